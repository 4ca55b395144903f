// Timing overhead of the fine-grained P-chase's timed window, and the latency of a load without it.
//
// What: (a) the cycles of two consecutive reads of %clock, and of an empty timed window (read
// %clock, store the index to shared memory, read %clock: the window of kernels/pchase.cu with no
// load in it), `record_steps` samples each; (b) is kernels/pchase.cu itself (the per-access window
// every other experiment reads, over a small array that stays in the cache after warm-up);
// (c) the elapsed cycles of `loads` dependent loads j = A[j] of a 32-bit index chain between one
// read of %clock before and one after (the index arithmetic A + 4j stays between the loads, the
// window's store and clock read come once); (d) the same over 64-bit pointers, p = *p, where no
// arithmetic sits between two loads: the load-to-use latency alone.
// How: Mei & Chu, "Dissecting GPU Memory Hierarchy through Microbenchmarking" (TPDS 2017), Sec.
// 4.2 measure the overhead of the window's store and second clock read with a separate program
// (the empty window) and the clock read alone; Größler's thesis (Sec. 4.4) times whole chains
// and counts the index arithmetic (a multiply and an add) between two loads. One thread of one
// block: a warm-up walk first, then `repetitions` timed chains; every sample goes to (dynamic)
// shared memory during the timed loop and is copied out at the end, as in pchase.cu. The chain's
// last value is stored to shared memory before the second clock read, so that read waits for the
// last load, and is written out as the sink (it must equal the host's walk).
// (e) on the texture path, the chain read through a texture object (tex1Dfetch on a linear
// resource, as pchase_tex reads it): j = tex1Dfetch(t, j) takes the index itself as its coordinate,
// so no address arithmetic sits between two fetches, and the latency per fetch of a chain timed as
// a whole is the texture path's load-to-use latency (there is no pointer form of a fetch).
// Load paths: ca = ld.global.ca (L1 + L2), cg = ld.global.cg (L2 only), nc = ld.global.nc
// (read-only data path), tex = tex1Dfetch (texture path; index chase only).

__device__ __forceinline__ unsigned int clock32()
{
    unsigned int t;
    asm volatile("mov.u32 %0, %%clock;" : "=r"(t)::"memory");
    return t;
}

// (a) two consecutive clock reads
extern "C" __global__ void clock_pair(unsigned int record_steps,
                                      unsigned int *__restrict__ latency_cycles)
{
    extern __shared__ unsigned int s_buffer[];
    for (unsigned int k = 0; k < record_steps; ++k) {
        unsigned int t0 = clock32();
        unsigned int t1 = clock32();
        s_buffer[k] = t1 - t0;
    }
    for (unsigned int k = 0; k < record_steps; ++k)
        latency_cycles[k] = s_buffer[k];
}

// (a) the empty window: pchase.cu's window (clock, store of the index, clock) with no load; the
// stored value is a kernel argument, so the compiler cannot fold the store away
extern "C" __global__ void empty_window(unsigned int record_steps, unsigned int value,
                                        unsigned int *__restrict__ latency_cycles,
                                        unsigned int *__restrict__ indices)
{
    extern __shared__ unsigned int s_buffer[];
    unsigned int *s_latency = s_buffer;
    unsigned int *s_index = s_buffer + record_steps;
    unsigned int j = value;
    for (unsigned int k = 0; k < record_steps; ++k) {
        unsigned int t0 = clock32();
        s_index[k] = j;
        unsigned int t1 = clock32();
        s_latency[k] = t1 - t0;
        j += 1;
    }
    for (unsigned int k = 0; k < record_steps; ++k) {
        latency_cycles[k] = s_latency[k];
        indices[k] = s_index[k];
    }
}

#define DEFINE_LOAD(NAME, T, PTX, REG)                                                        \
    __device__ __forceinline__ T NAME(const T *p)                                             \
    {                                                                                         \
        T v;                                                                                  \
        asm volatile(PTX " %0, [%1];" : "=" REG(v) : "l"(p) : "memory");                      \
        return v;                                                                             \
    }

DEFINE_LOAD(load_ca, unsigned int, "ld.global.ca.u32", "r")
DEFINE_LOAD(load_cg, unsigned int, "ld.global.cg.u32", "r")
DEFINE_LOAD(load_ptr_ca, unsigned long long, "ld.global.ca.u64", "l")
DEFINE_LOAD(load_ptr_cg, unsigned long long, "ld.global.cg.u64", "l")
DEFINE_LOAD(load_nc, unsigned int, "ld.global.nc.u32", "r")
DEFINE_LOAD(load_ptr_nc, unsigned long long, "ld.global.nc.u64", "l")

// (c) the amortized index chase: j = A[j] over 32-bit indices (address A + 4j before each load)
#define DEFINE_AMORTIZED_INDEX(PATH)                                                           \
    extern "C" __global__ void amortized_index_##PATH(                                         \
        const unsigned int *__restrict__ chain, unsigned int start_index,                      \
        unsigned int warmup_steps, unsigned int loads, unsigned int repetitions,               \
        unsigned int *__restrict__ elapsed_cycles, unsigned int *__restrict__ final_index)     \
    {                                                                                          \
        extern __shared__ unsigned int s_buffer[];                                             \
        unsigned int *s_elapsed = s_buffer;                                                    \
        unsigned int *s_sink = s_buffer + repetitions;                                         \
        unsigned int j = start_index;                                                          \
        for (unsigned int k = 0; k < warmup_steps; ++k)                                        \
            j = load_##PATH(chain + j);                                                        \
        for (unsigned int r = 0; r < repetitions; ++r) {                                       \
            unsigned int t0 = clock32();                                                       \
            for (unsigned int k = 0; k < loads; ++k)                                           \
                j = load_##PATH(chain + j);                                                    \
            s_sink[0] = j;                                                                     \
            unsigned int t1 = clock32();                                                       \
            s_elapsed[r] = t1 - t0;                                                            \
        }                                                                                      \
        for (unsigned int r = 0; r < repetitions; ++r)                                         \
            elapsed_cycles[r] = s_elapsed[r];                                                  \
        final_index[0] = s_sink[0];                                                            \
    }

DEFINE_AMORTIZED_INDEX(ca)
DEFINE_AMORTIZED_INDEX(cg)
DEFINE_AMORTIZED_INDEX(nc)

// (e) the amortized index chase on the texture path: j = tex1Dfetch(t, j), the same protocol
extern "C" __global__ void amortized_index_tex(unsigned long long tex, unsigned int start_index,
                                               unsigned int warmup_steps, unsigned int loads,
                                               unsigned int repetitions,
                                               unsigned int *__restrict__ elapsed_cycles,
                                               unsigned int *__restrict__ final_index)
{
    extern __shared__ unsigned int s_buffer[];
    unsigned int *s_elapsed = s_buffer;
    unsigned int *s_sink = s_buffer + repetitions;
    cudaTextureObject_t t = (cudaTextureObject_t)tex;
    unsigned int j = start_index;
    for (unsigned int k = 0; k < warmup_steps; ++k)
        j = tex1Dfetch<unsigned int>(t, j);
    for (unsigned int r = 0; r < repetitions; ++r) {
        unsigned int t0 = clock32();
        for (unsigned int k = 0; k < loads; ++k)
            j = tex1Dfetch<unsigned int>(t, j);
        s_sink[0] = j;
        unsigned int t1 = clock32();
        s_elapsed[r] = t1 - t0;
    }
    for (unsigned int r = 0; r < repetitions; ++r)
        elapsed_cycles[r] = s_elapsed[r];
    final_index[0] = s_sink[0];
}

// (d) the amortized pointer chase: p = *p over 64-bit pointers (each element holds the address
// of the next); the final pointer's offset from `base` in elements is written out
#define DEFINE_AMORTIZED_POINTER(PATH)                                                         \
    extern "C" __global__ void amortized_pointer_##PATH(                                       \
        const unsigned long long *base, const unsigned long long *start,                       \
        unsigned int warmup_steps, unsigned int loads, unsigned int repetitions,               \
        unsigned int *__restrict__ elapsed_cycles, unsigned int *__restrict__ final_index)     \
    {                                                                                          \
        extern __shared__ unsigned int s_buffer[];                                             \
        unsigned int *s_elapsed = s_buffer;                                                    \
        unsigned long long *s_sink = (unsigned long long *)(s_buffer + 2 * repetitions);      \
        const unsigned long long *p = start;                                                   \
        for (unsigned int k = 0; k < warmup_steps; ++k)                                        \
            p = (const unsigned long long *)load_ptr_##PATH(p);                                \
        for (unsigned int r = 0; r < repetitions; ++r) {                                       \
            unsigned int t0 = clock32();                                                       \
            for (unsigned int k = 0; k < loads; ++k)                                           \
                p = (const unsigned long long *)load_ptr_##PATH(p);                            \
            s_sink[0] = (unsigned long long)p;                                                 \
            unsigned int t1 = clock32();                                                       \
            s_elapsed[r] = t1 - t0;                                                            \
        }                                                                                      \
        for (unsigned int r = 0; r < repetitions; ++r)                                         \
            elapsed_cycles[r] = s_elapsed[r];                                                  \
        final_index[0] = (unsigned int)((const unsigned long long *)s_sink[0] - base);         \
    }

DEFINE_AMORTIZED_POINTER(ca)
DEFINE_AMORTIZED_POINTER(cg)
DEFINE_AMORTIZED_POINTER(nc)
