// Peer memory of a node of several GPUs: SM-driven streams over the link and timed atomics.
//
// What: the bandwidth with which the SMs of one GPU read (or write) another GPU's memory, and
// the latency of a dependent atomic on it. The peer P-chase itself is kernels/pchase.cu,
// launched by the loading GPU over a chain in the peer's memory (peer access enabled).
// How:
// - stream_read_v{4,8,16}: every thread of a grid of N blocks (the block scheduler spreads a
//   grid no larger than the SM count one block to an SM) walks the buffer in a grid-stride loop, loading 4, 8 or 16 bytes at a time (consecutive threads on consecutive
//   elements: every warp load is coalesced) and folding them into a register by XOR; the fold
//   goes to a sink only when it equals an impossible value, so no load is removed. The host
//   times the launch with CUDA events (the method of nvbandwidth's SM copies and of Li et al.,
//   "Evaluating Modern GPU Interconnect", TPDS 2020).
// - stream_write_v{4,8,16}: the same walk storing a constant.
// - atomic_chase: one thread walks j = atomicAdd(&A[j], 0) (the add of 0 returns the next index
//   and leaves the chain as it is), each atomic bracketed by two reads of %clock with the
//   returned index stored to shared memory before the second read, as the P-chase times loads
//   (Mei & Chu, TPDS 2017, Sec. 3.2). Records stay in shared memory until the walk ends.
// Nothing here uses NVLink multicast (no multimem instruction, no multicast object).

#include <cstdint>

#define DEFINE_STREAM(V, T, FOLD)                                                                \
    extern "C" __global__ void stream_read_v##V(const T *__restrict__ src,                      \
                                                unsigned long long n,                           \
                                                unsigned long long *__restrict__ sink)          \
    {                                                                                           \
        const unsigned long long threads = (unsigned long long)gridDim.x * blockDim.x;          \
        unsigned long long acc = 0;                                                             \
        for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;  \
             i < n; i += threads) {                                                             \
            const T v = src[i];                                                                 \
            acc ^= FOLD;                                                                        \
        }                                                                                       \
        if (acc == 0x9E3779B97F4A7C15ull)                                                       \
            sink[0] = acc;                                                                      \
    }                                                                                           \
    extern "C" __global__ void stream_write_v##V(T *__restrict__ dst, unsigned long long n)     \
    {                                                                                           \
        const unsigned long long threads = (unsigned long long)gridDim.x * blockDim.x;          \
        T v;                                                                                    \
        memset(&v, 0x5A, sizeof(T));                                                            \
        for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;  \
             i < n; i += threads)                                                               \
            dst[i] = v;                                                                         \
    }

DEFINE_STREAM(4, unsigned int, (unsigned long long)v)
DEFINE_STREAM(8, unsigned long long, v)
DEFINE_STREAM(16, uint4, ((unsigned long long)(v.x ^ v.z) << 32) | (v.y ^ v.w))

__device__ __forceinline__ unsigned int clock32()
{
    unsigned int t;
    asm volatile("mov.u32 %0, %%clock;" : "=r"(t)::"memory");
    return t;
}

extern "C" __global__ void atomic_chase(unsigned int *__restrict__ chain, unsigned int start_index,
                                        unsigned int warmup_steps, unsigned int record_steps,
                                        unsigned int *__restrict__ latency_cycles,
                                        unsigned int *__restrict__ indices)
{
    extern __shared__ unsigned int s_buffer[];
    unsigned int *s_latency = s_buffer;
    unsigned int *s_index = s_buffer + record_steps;
    unsigned int j = start_index;
    for (unsigned int k = 0; k < warmup_steps; ++k)
        j = atomicAdd(chain + j, 0u);
    for (unsigned int k = 0; k < record_steps; ++k) {
        unsigned int t0 = clock32();
        j = atomicAdd(chain + j, 0u);
        s_index[k] = j;
        unsigned int t1 = clock32();
        s_latency[k] = t1 - t0;
    }
    for (unsigned int k = 0; k < record_steps; ++k) {
        latency_cycles[k] = s_latency[k];
        indices[k] = s_index[k];
    }
}
