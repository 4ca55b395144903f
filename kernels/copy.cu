// Memory copy throughput: global memory (grid-stride copy) and shared memory (copy between two
// shared regions, timed per CTA with the SM clock).
//
// What: the bytes per second (global) and bytes per SM cycle (shared) a copy sustains, as a
// function of CTAs, CTA size and ILP (elements each thread loads before it stores them).
// How: Mei & Chu, "Dissecting GPU Memory Hierarchy through Microbenchmarking" (TPDS 2017):
// - Sec. 5.1, Table VI, Fig. 12 (gcopy_*): a plain copy of n elements; thread i of T in the grid
//   loads elements base + k*T (k < ILP, consecutive threads on consecutive elements, so every
//   warp load is coalesced) into registers, then stores them, and steps base by ILP*T. 16-byte
//   elements (uint4) are the vectorised variant that needs fewer instructions per byte. The host
//   times the launch with CUDA events and compares it with cuMemcpyDtoD of the same buffers.
// - Sec. 6.1, Table VII, Figs. 15-16 (scopy_*): each thread copies ILP elements from shared
//   region A to region B, `iterations` times (ld.shared / st.shared through inline PTX so that
//   no copy is optimised away or forwarded in registers); consecutive threads on consecutive
//   elements, so no access has a bank conflict (a 16-byte vector access takes four conflict-free
//   passes of 128 bytes). After a __syncthreads() thread 0 reads %clock64 and %smid before and
//   after the copy; the host sums bytes per SM over the span from the first start to the last
//   end of the CTAs on that SM.
// Kernel names: gcopy_e{4,16}_ilp{1,2,4,6,8}, scopy_v{4,16}_ilp{1,2,4,6,8}.

#include <cstdint>

// ---- global copy ---------------------------------------------------------------------------
template <int ILP, typename T>
__device__ __forceinline__ void global_copy(const T *__restrict__ src, T *__restrict__ dst,
                                            unsigned long long n)
{
    const unsigned long long threads = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    T r[ILP];
    // full chunks: no bounds checks inside
    for (; i + (ILP - 1) * threads < n; i += ILP * threads) {
#pragma unroll
        for (int k = 0; k < ILP; ++k)
            r[k] = src[i + k * threads];
#pragma unroll
        for (int k = 0; k < ILP; ++k)
            dst[i + k * threads] = r[k];
    }
#pragma unroll
    for (int k = 0; k < ILP; ++k)
        if (i + k * threads < n)
            dst[i + k * threads] = src[i + k * threads];
}

#define DEFINE_GCOPY(E, T, ILP)                                                                  \
    extern "C" __global__ void __launch_bounds__(1024)                                          \
        gcopy_e##E##_ilp##ILP(const T *__restrict__ src, T *__restrict__ dst,                  \
                              unsigned long long n)                                             \
    {                                                                                           \
        global_copy<ILP, T>(src, dst, n);                                                       \
    }

#define DEFINE_GCOPY_ILPS(E, T)                                                                  \
    DEFINE_GCOPY(E, T, 1)                                                                       \
    DEFINE_GCOPY(E, T, 2)                                                                       \
    DEFINE_GCOPY(E, T, 4)                                                                       \
    DEFINE_GCOPY(E, T, 6)                                                                       \
    DEFINE_GCOPY(E, T, 8)

DEFINE_GCOPY_ILPS(4, unsigned int)
DEFINE_GCOPY_ILPS(16, uint4)

// ---- shared copy ---------------------------------------------------------------------------
__device__ __forceinline__ long long clock64_now()
{
    long long t;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t)::"memory");
    return t;
}

__device__ __forceinline__ unsigned int smid_now()
{
    unsigned int s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}

struct V4 {
    unsigned int x, y, z, w;
};

__device__ __forceinline__ void lds(unsigned int &v, unsigned int a)
{
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(a));
}
__device__ __forceinline__ void sts(unsigned int a, const unsigned int &v)
{
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(a), "r"(v));
}
__device__ __forceinline__ void lds(V4 &v, unsigned int a)
{
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(a));
}
__device__ __forceinline__ void sts(unsigned int a, const V4 &v)
{
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(a), "r"(v.x), "r"(v.y),
                 "r"(v.z), "r"(v.w));
}

template <int ILP, typename T>
__device__ __forceinline__ void shared_copy(unsigned int iterations, long long *start_cycle,
                                            long long *end_cycle, unsigned int *smid)
{
    extern __shared__ uint4 s_regions[];  // region A then region B, ILP * blockDim.x each
    const unsigned int base = (unsigned int)__cvta_generic_to_shared(s_regions);
    const unsigned int step = blockDim.x * (unsigned int)sizeof(T);
    const unsigned int a = base + threadIdx.x * (unsigned int)sizeof(T);
    const unsigned int b = a + ILP * step;
    T r[ILP];
#pragma unroll
    for (int k = 0; k < ILP; ++k)  // initialise region A (values are irrelevant, but defined)
        sts(a + k * step, r[k] = T());
    __syncthreads();
    const long long t0 = clock64_now();
#pragma unroll 4
    for (unsigned int it = 0; it < iterations; ++it) {
#pragma unroll
        for (int k = 0; k < ILP; ++k)
            lds(r[k], a + k * step);
#pragma unroll
        for (int k = 0; k < ILP; ++k)
            sts(b + k * step, r[k]);
    }
    __syncthreads();
    const long long t1 = clock64_now();
    if (threadIdx.x == 0) {
        start_cycle[blockIdx.x] = t0;
        end_cycle[blockIdx.x] = t1;
        smid[blockIdx.x] = smid_now();
    }
}

#define DEFINE_SCOPY(V, T, ILP)                                                                  \
    extern "C" __global__ void __launch_bounds__(1024)                                          \
        scopy_v##V##_ilp##ILP(unsigned int iterations, long long *start_cycle,                 \
                              long long *end_cycle, unsigned int *smid)                        \
    {                                                                                           \
        shared_copy<ILP, T>(iterations, start_cycle, end_cycle, smid);                          \
    }

#define DEFINE_SCOPY_ILPS(V, T)                                                                  \
    DEFINE_SCOPY(V, T, 1)                                                                       \
    DEFINE_SCOPY(V, T, 2)                                                                       \
    DEFINE_SCOPY(V, T, 4)                                                                       \
    DEFINE_SCOPY(V, T, 6)                                                                       \
    DEFINE_SCOPY(V, T, 8)

DEFINE_SCOPY_ILPS(4, unsigned int)
DEFINE_SCOPY_ILPS(16, V4)
