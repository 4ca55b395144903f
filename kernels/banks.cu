// Shared-memory bank conflicts by strided access.
//
// What: the mean latency (SM clock cycles) of one warp's shared-memory load when thread t reads
// element t * stride, for one stride per launch; the conflict degree of the access follows from
// the bank mapping, so latency against stride exposes the banks, their width and the cost of a
// conflict.
// How: Mei & Chu, "Dissecting GPU Memory Hierarchy through Microbenchmarking" (TPDS 2017),
// Sec. 6.2 and Listing 4; Mei et al., NPC 2014, Sec. 3.1 and Listing 1. One warp of one block.
// Every element of the (dynamic) shared array holds its own shared-window address, so the chain
// a = s[a] started at element t * stride returns to the same element at every step: 64 loads of
// the same warp access, each waiting for the previous one. The 64 loads are bracketed by two
// reads of %clock; the last loaded value is stored (to a conflict-free sink word per thread)
// before the second read, so the second read waits for the last load. The loaded value is the
// address itself (ld.shared with a 32-bit shared address), so no address arithmetic sits between
// two loads. One untimed pass, then `repetitions` timed ones; lane 0 writes each pass's cycles.
// The element each lane ends on goes to `final_index` (it must be lane * stride).
// bank_stride_e4: 4-byte elements (ld.shared.u32); bank_stride_e8: 8-byte elements
// (ld.shared.u64, the address in the low word). Bank modes (Kepler's 4-/8-byte) are set by the
// host on the context (cuCtxSetSharedMemConfig) before the launch.

#define LOADS 64

__device__ __forceinline__ unsigned int clock32()
{
    unsigned int t;
    asm volatile("mov.u32 %0, %%clock;" : "=r"(t)::"memory");
    return t;
}

__device__ __forceinline__ unsigned int chase_u32(unsigned int a)
{
    asm volatile("ld.shared.u32 %0, [%0];" : "+r"(a));
    return a;
}

__device__ __forceinline__ unsigned int chase_u64(unsigned int a)
{
    unsigned long long v;
    asm volatile("ld.shared.u64 %0, [%1];" : "=l"(v) : "r"(a));
    return (unsigned int)v;
}

__device__ __forceinline__ void sink_u32(unsigned int where, unsigned int v)
{
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(where), "r"(v) : "memory");
}

// n_elements: elements of the array, (31 * stride + 1); the sink words follow the array.
#define DEFINE_BANK_STRIDE(NAME, T, CHASE)                                                      \
    extern "C" __global__ void NAME(unsigned int stride, unsigned int n_elements,               \
                                    unsigned int repetitions,                                   \
                                    unsigned int *__restrict__ elapsed_cycles,                  \
                                    unsigned int *__restrict__ final_index)                     \
    {                                                                                           \
        extern __shared__ T s_array_##NAME[];                                                   \
        const unsigned int lane = threadIdx.x;                                                  \
        const unsigned int base = (unsigned int)__cvta_generic_to_shared(s_array_##NAME);       \
        for (unsigned int i = lane; i < n_elements; i += blockDim.x)                            \
            s_array_##NAME[i] = (T)(base + i * (unsigned int)sizeof(T));                        \
        __syncwarp();                                                                           \
        const unsigned int sink = base + n_elements * (unsigned int)sizeof(T) + 4 * lane;       \
        unsigned int a = base + lane * stride * (unsigned int)sizeof(T);                        \
        for (unsigned int rep = 0; rep <= repetitions; ++rep) {                                 \
            unsigned int t0 = clock32();                                                        \
            _Pragma("unroll") for (int k = 0; k < LOADS; ++k) a = CHASE(a);                     \
            sink_u32(sink, a);                                                                  \
            unsigned int t1 = clock32();                                                        \
            if (rep > 0 && lane == 0)                                                           \
                elapsed_cycles[rep - 1] = t1 - t0;                                              \
        }                                                                                       \
        final_index[lane] = (a - base) / (unsigned int)sizeof(T);                               \
    }

DEFINE_BANK_STRIDE(bank_stride_e4, unsigned int, chase_u32)
DEFINE_BANK_STRIDE(bank_stride_e8, unsigned long long, chase_u64)
