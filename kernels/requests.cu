// Outstanding memory requests of one SM: the Thread-Latency micro-benchmark.
//
// What: per-thread cycles (t2 - t1) to complete N independent global loads per thread in one
// thread block, for the MSHR / pending-request-table study of A. Lashgar, E. Salehi,
// A. Baniasadi, "A Case Study in Reverse Engineering GPGPUs: Outstanding Memory Handling
// Resources" (Listing 1, Sec. 3.1).
// How: one block of `threads` threads (one SM). Each thread reads its N byte offsets (built on
// the host: UNQ = a unique 128-byte block per load, MergerK = K neighbouring threads share one)
// before the first barrier and uses them in a branch, so those loads have completed before the
// clock is read. Then `__syncthreads(); t1 = clock; N independent loads (inline PTX);` the sum of
// the loaded values goes to shared memory, which waits for all N loads of this thread, then
// `__syncthreads(); t2 = clock`: t2 - t1 covers the completion of every load of the block.
// The sum is written to `sink` so no load is removed. N is a template parameter (the loads are
// unrolled into independent registers); req_<path>_n<N> for N = 1..8; path ca is Listing 1's
// plain ld.global (L1 + L2 on GPUs that cache globals in L1), cg is ld.global.cg (L2 only).

__device__ __forceinline__ unsigned long long clock64_volatile()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t)::"memory");
    return t;
}

template <bool CG>
__device__ __forceinline__ unsigned int load_u32(const char *p)
{
    unsigned int v;
    if (CG)
        asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    else
        asm volatile("ld.global.ca.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

template <int N, bool CG>
__device__ __forceinline__ void requests(const char *__restrict__ data,
                                         const unsigned int *__restrict__ offsets_bytes,
                                         unsigned int threads,
                                         unsigned int *__restrict__ sink,
                                         unsigned int *__restrict__ elapsed_cycles)
{
    __shared__ unsigned int s_sum[1024];
    const unsigned int tid = threadIdx.x;
    const char *addr[N];
    unsigned int check = 0;
#pragma unroll
    for (int j = 0; j < N; ++j) {
        unsigned int off = offsets_bytes[j * threads + tid];
        check ^= off;
        addr[j] = data + off;
    }
    if (check == 0xFFFFFFFFu) // never true for the host's offsets; waits for the offset loads
        sink[threads + tid] = check;
    unsigned int reg[N];
    __syncthreads();
    const unsigned long long t1 = clock64_volatile();
#pragma unroll
    for (int j = 0; j < N; ++j)
        reg[j] = load_u32<CG>(addr[j]);
    unsigned int sum = 0;
#pragma unroll
    for (int j = 0; j < N; ++j)
        sum += reg[j];
    s_sum[tid] = sum; // needs every load of this thread
    __syncthreads();
    const unsigned long long t2 = clock64_volatile();
    sink[tid] = s_sum[tid];
    elapsed_cycles[tid] = (unsigned int)(t2 - t1);
}

#define DEFINE_REQUESTS(PATH, CG, N)                                                           \
    extern "C" __global__ void req_##PATH##_n##N(const char *__restrict__ data,                \
                                                 const unsigned int *__restrict__ offsets,     \
                                                 unsigned int threads,                         \
                                                 unsigned int *__restrict__ sink,              \
                                                 unsigned int *__restrict__ elapsed_cycles)    \
    {                                                                                          \
        requests<N, CG>(data, offsets, threads, sink, elapsed_cycles);                         \
    }

#define DEFINE_PATH(PATH, CG)                                                                  \
    DEFINE_REQUESTS(PATH, CG, 1)                                                               \
    DEFINE_REQUESTS(PATH, CG, 2)                                                               \
    DEFINE_REQUESTS(PATH, CG, 3)                                                               \
    DEFINE_REQUESTS(PATH, CG, 4)                                                               \
    DEFINE_REQUESTS(PATH, CG, 5)                                                               \
    DEFINE_REQUESTS(PATH, CG, 6)                                                               \
    DEFINE_REQUESTS(PATH, CG, 7)                                                               \
    DEFINE_REQUESTS(PATH, CG, 8)

DEFINE_PATH(ca, false)
DEFINE_PATH(cg, true)
