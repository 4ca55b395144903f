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
//
// Past one block: req_<path>_sm_n<N> runs the threads of one SM as `blocks` co-resident blocks
// (launched as SM count x blocks blocks of blockDim.x threads; threads past `threads` idle). Each
// block reads %smid and takes a slot on its SM with an atomic; only the first `blocks` blocks
// of SM `target_sm` go on, the others exit at once. They wait for each other (a spin on the
// slot counter, bounded by `spin_cycles`), then time their loads as above; each block writes
// its t1 and t2 (the SM's clock) to `block_clocks[2 * slot]`, and thread
// `slot * blockDim.x + tid` loads offsets_bytes[j * threads + slot * blockDim.x + tid]. `arrived[smid]` counts the blocks each
// SM received (the host picks another target when the target got fewer than `blocks`);
// `gathered` is set to the number of blocks that found all others before timing.
// __launch_bounds__(1024, 2) keeps two 1024-thread blocks co-resident (at most 32 registers);
// nvcc warns that the 2 is out of range on archs holding fewer than 2048 threads per SM, where
// the blocks are smaller (the host splits the threads evenly).

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

__device__ __forceinline__ unsigned int smid_of()
{
    unsigned int id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    return id;
}

#define MAX_SMID 1024 // size of the host's `arrived` array

template <int N, bool CG>
__device__ __forceinline__ void requests_sm(const char *__restrict__ data,
                                            const unsigned int *__restrict__ offsets_bytes,
                                            unsigned int threads, unsigned int blocks,
                                            unsigned int target_sm,
                                            unsigned long long spin_cycles,
                                            unsigned int *arrived, unsigned int *gathered,
                                            unsigned int *__restrict__ sink,
                                            unsigned long long *__restrict__ block_clocks)
{
    __shared__ unsigned int s_sum[1024];
    __shared__ unsigned int s_slot;
    const unsigned int tid = threadIdx.x;
    if (tid == 0) {
        const unsigned int sm = smid_of();
        unsigned int slot = 0xFFFFFFFFu;
        if (sm < MAX_SMID) {
            slot = atomicAdd(&arrived[sm], 1u);
            if (sm != target_sm || slot >= blocks)
                slot = 0xFFFFFFFFu;
        }
        if (slot != 0xFFFFFFFFu) { // wait for the other blocks of the target SM
            const unsigned long long start = clock64_volatile();
            volatile unsigned int *count = &arrived[target_sm];
            while (*count < blocks && clock64_volatile() - start < spin_cycles) {
            }
            if (*count >= blocks)
                atomicAdd(gathered, 1u);
        }
        s_slot = slot;
    }
    __syncthreads();
    const unsigned int slot = s_slot;
    if (slot == 0xFFFFFFFFu)
        return; // the whole block leaves together
    const unsigned int t = slot * blockDim.x + tid;
    const bool active = t < threads;
    const char *addr[N];
    unsigned int check = 0;
#pragma unroll
    for (int j = 0; j < N; ++j) {
        unsigned int off = active ? offsets_bytes[j * threads + t] : 0u;
        check ^= off;
        addr[j] = data + off;
    }
    if (check == 0xFFFFFFFFu) // never true for the host's offsets; waits for the offset loads
        sink[threads + t] = check;
    unsigned int reg[N];
    __syncthreads();
    const unsigned long long t1 = clock64_volatile();
    unsigned int sum = 0;
    if (active) {
#pragma unroll
        for (int j = 0; j < N; ++j)
            reg[j] = load_u32<CG>(addr[j]);
#pragma unroll
        for (int j = 0; j < N; ++j)
            sum += reg[j];
    }
    s_sum[tid] = sum; // needs every load of this thread
    __syncthreads();
    const unsigned long long t2 = clock64_volatile();
    if (active)
        sink[t] = s_sum[tid];
    if (tid == 0) {
        block_clocks[2 * slot] = t1;
        block_clocks[2 * slot + 1] = t2;
    }
}

#define DEFINE_REQUESTS_SM(PATH, CG, N)                                                        \
    extern "C" __global__ void __launch_bounds__(1024, 2)                                      \
        req_##PATH##_sm_n##N(const char *__restrict__ data,                                    \
                             const unsigned int *__restrict__ offsets, unsigned int threads,   \
                             unsigned int blocks, unsigned int target_sm,                      \
                             unsigned long long spin_cycles, unsigned int *arrived,            \
                             unsigned int *gathered, unsigned int *__restrict__ sink,          \
                             unsigned long long *__restrict__ block_clocks)                    \
    {                                                                                          \
        requests_sm<N, CG>(data, offsets, threads, blocks, target_sm, spin_cycles, arrived,    \
                           gathered, sink, block_clocks);                                      \
    }

#define DEFINE_PATH_SM(PATH, CG)                                                               \
    DEFINE_REQUESTS_SM(PATH, CG, 1)                                                            \
    DEFINE_REQUESTS_SM(PATH, CG, 2)                                                            \
    DEFINE_REQUESTS_SM(PATH, CG, 3)                                                            \
    DEFINE_REQUESTS_SM(PATH, CG, 4)                                                            \
    DEFINE_REQUESTS_SM(PATH, CG, 5)                                                            \
    DEFINE_REQUESTS_SM(PATH, CG, 6)                                                            \
    DEFINE_REQUESTS_SM(PATH, CG, 7)                                                            \
    DEFINE_REQUESTS_SM(PATH, CG, 8)

DEFINE_PATH_SM(ca, false)
DEFINE_PATH_SM(cg, true)
