// Streaming bandwidth of each memory level: read-only and write-only kernels.
//
// What: the bytes per second one launch reads (or writes) from the level that holds its
// footprint - the L1 (a footprint per SM below the L1 size), the L2 (a total footprint below
// the L2 size) or DRAM (several times the L2) - as a function of the CTAs per SM; and, with
// footprints per SM around the L1 size, the largest one the L1 holds with no shared memory.
// How: each CTA streams one slice of the buffer, `slice_vecs` 16-byte vectors, `iterations`
// times; thread t of T touches vectors t, t + T, ... (consecutive threads on consecutive
// vectors: every warp access is coalesced into 512 contiguous bytes), four independent vectors
// per step. bw_read_cg, bw_read_ca and bw_write stream the CTA's own slice (blockIdx.x): the
// footprint is the grid's slices together. bw_read_ca_sm streams its SM's slice (%smid mod
// `nslices`): the CTAs of one SM share one slice wherever the scheduler puts them, so the
// footprint of an SM is exactly one slice. The host times each launch with CUDA events after
// one untimed launch (which also fills the level).
// - Reads: ld.global.{ca,cg}.v4.u32 through inline PTX (volatile: no load is hoisted out of
//   the iteration loop or merged with another); every loaded word is folded into an xor
//   accumulator, stored to `sink` only if it equals `magic`, a parameter the compiler cannot
//   know - so no load is dead, and no store happens in practice. `.ca` caches in the L1 (the
//   L1 footprints), `.cg` in the L2 only (the L2 and DRAM footprints).
// - Writes (bw_write): st.global.v4.u32 of `value` ^ the vector's index ^ the iteration (a
//   value the compiler cannot fold into one store), every vector of the slice, `iterations`
//   times. No kernel uses shared memory.
// Method: gpu-benches' cuda-stream and cuda-cache (te42kyfo/gpu-benches) and nvbench's
// protocol (warm-up, repeated samples, all kept); MT4G reports per-level read and write
// bandwidths of the same kind.

#include <cstdint>

__device__ __forceinline__ unsigned int sm_id()
{
    unsigned int id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    return id;
}

// SLOT: which slice a CTA streams - its own (blockIdx.x), or its SM's (%smid mod nslices)
#define DEFINE_READ(NAME, QUAL, SLOT)                                                             \
    extern "C" __global__ void __launch_bounds__(1024)                                           \
        NAME(const uint4 *__restrict__ buf, unsigned long long slice_vecs, unsigned int nslices, \
             unsigned int iterations, unsigned int magic, unsigned int *__restrict__ sink)       \
    {                                                                                            \
        const uint4 *p = buf + (unsigned long long)(SLOT) * slice_vecs;                          \
        const unsigned long long T = blockDim.x;                                                 \
        unsigned int acc = 0;                                                                    \
        for (unsigned int it = 0; it < iterations; ++it) {                                       \
            unsigned long long i = threadIdx.x;                                                  \
            for (; i + 3 * T < slice_vecs; i += 4 * T) {                                         \
                unsigned int r[16];                                                              \
                _Pragma("unroll") for (int k = 0; k < 4; ++k)                                    \
                    asm volatile("ld.global." QUAL ".v4.u32 {%0, %1, %2, %3}, [%4];"             \
                                 : "=r"(r[4 * k]), "=r"(r[4 * k + 1]), "=r"(r[4 * k + 2]),        \
                                   "=r"(r[4 * k + 3])                                            \
                                 : "l"(p + i + k * T));                                          \
                _Pragma("unroll") for (int k = 0; k < 16; ++k) acc ^= r[k];                      \
            }                                                                                    \
            for (; i < slice_vecs; i += T) {                                                     \
                unsigned int a, b, c, d;                                                         \
                asm volatile("ld.global." QUAL ".v4.u32 {%0, %1, %2, %3}, [%4];"                 \
                             : "=r"(a), "=r"(b), "=r"(c), "=r"(d)                                \
                             : "l"(p + i));                                                      \
                acc ^= a ^ b ^ c ^ d;                                                            \
            }                                                                                    \
        }                                                                                        \
        if (acc == magic)                                                                        \
            sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;                                   \
    }

DEFINE_READ(bw_read_ca, "ca", blockIdx.x)
DEFINE_READ(bw_read_cg, "cg", blockIdx.x)
DEFINE_READ(bw_read_ca_sm, "ca", sm_id() % nslices)

extern "C" __global__ void __launch_bounds__(1024)
    bw_write(uint4 *__restrict__ buf, unsigned long long slice_vecs, unsigned int iterations,
             unsigned int value)
{
    uint4 *p = buf + (unsigned long long)blockIdx.x * slice_vecs;
    const unsigned long long T = blockDim.x;
    for (unsigned int it = 0; it < iterations; ++it) {
        const unsigned int v = value ^ it;
        unsigned long long i = threadIdx.x;
        for (; i + 3 * T < slice_vecs; i += 4 * T) {
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const unsigned int w = v ^ (unsigned int)(i + k * T);
                asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p + i + k * T),
                             "r"(w), "r"(w + 1), "r"(w + 2), "r"(w + 3)
                             : "memory");
            }
        }
        for (; i < slice_vecs; i += T) {
            const unsigned int w = v ^ (unsigned int)i;
            asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p + i), "r"(w),
                         "r"(w + 1), "r"(w + 2), "r"(w + 3)
                         : "memory");
        }
    }
}
