// Fine-grained P-chase: per-access latency of dependent global loads.
//
// What: the latency (SM clock cycles) of every load of one thread walking a pointer chain
// j = A[j] through one load path, and the index each load returned.
// How: Mei & Chu, "Dissecting GPU Memory Hierarchy through Microbenchmarking" (TPDS 2017),
// Sec. 3.2 and Fig. 4: one thread of one block first walks `warmup_steps` elements so the caches
// hold what they can, then times `record_steps` loads. Each timed load is bracketed by two reads of
// %clock; the loaded index is stored to shared memory before the second read, so the second read
// waits for the load to complete. Latencies and indices stay in (dynamic) shared memory during the
// walk, so the timed loop issues no global stores, and are copied out at the end.
// The dynamic shared-memory size is a launch parameter (>= 8 * record_steps bytes): on GPUs where
// L1 and shared memory are one array (Volta and later), the experiment varies it to show that the
// measured L1 size follows the carveout, not the buffer.
// Load paths: ca = ld.global.ca (L1 + L2), cg = ld.global.cg (L2 only), nc = ld.global.nc
// (read-only / texture data path).

__device__ __forceinline__ unsigned int clock32()
{
    unsigned int t;
    asm volatile("mov.u32 %0, %%clock;" : "=r"(t)::"memory");
    return t;
}

#define DEFINE_LOAD(NAME, PTX)                                                    \
    __device__ __forceinline__ unsigned int NAME(const unsigned int *p)          \
    {                                                                             \
        unsigned int v;                                                           \
        asm volatile(PTX " %0, [%1];" : "=r"(v) : "l"(p) : "memory");             \
        return v;                                                                 \
    }

DEFINE_LOAD(load_ca, "ld.global.ca.u32")
DEFINE_LOAD(load_cg, "ld.global.cg.u32")
DEFINE_LOAD(load_nc, "ld.global.nc.u32")

#define DEFINE_PCHASE(PATH)                                                                    \
    extern "C" __global__ void pchase_##PATH(const unsigned int *__restrict__ chain,           \
                                             unsigned int start_index,                         \
                                             unsigned int warmup_steps,                        \
                                             unsigned int record_steps,                        \
                                             unsigned int *__restrict__ latency_cycles,        \
                                             unsigned int *__restrict__ indices)               \
    {                                                                                          \
        extern __shared__ unsigned int s_buffer[];                                             \
        unsigned int *s_latency = s_buffer;                                                    \
        unsigned int *s_index = s_buffer + record_steps;                                       \
        unsigned int j = start_index;                                                          \
        for (unsigned int k = 0; k < warmup_steps; ++k)                                        \
            j = load_##PATH(chain + j);                                                        \
        for (unsigned int k = 0; k < record_steps; ++k) {                                      \
            unsigned int t0 = clock32();                                                       \
            j = load_##PATH(chain + j);                                                        \
            s_index[k] = j;                                                                    \
            unsigned int t1 = clock32();                                                       \
            s_latency[k] = t1 - t0;                                                            \
        }                                                                                      \
        for (unsigned int k = 0; k < record_steps; ++k) {                                      \
            latency_cycles[k] = s_latency[k];                                                  \
            indices[k] = s_index[k];                                                           \
        }                                                                                      \
    }

DEFINE_PCHASE(ca)
DEFINE_PCHASE(cg)
DEFINE_PCHASE(nc)

// The same chase over 8-byte elements: j = A[j] with 64-bit indices, for arrays past the 16 GiB
// that 32-bit indices of 4-byte elements reach (the TLB sweeps of GPUs with tens of GB). The
// low 32 bits of each loaded index are recorded.
#define DEFINE_LOAD64(NAME, PTX)                                                              \
    __device__ __forceinline__ unsigned long long NAME(const unsigned long long *p)          \
    {                                                                                         \
        unsigned long long v;                                                                 \
        asm volatile(PTX " %0, [%1];" : "=l"(v) : "l"(p) : "memory");                         \
        return v;                                                                             \
    }

DEFINE_LOAD64(load64_ca, "ld.global.ca.u64")
DEFINE_LOAD64(load64_cg, "ld.global.cg.u64")
DEFINE_LOAD64(load64_nc, "ld.global.nc.u64")

#define DEFINE_PCHASE64(PATH)                                                                  \
    extern "C" __global__ void pchase64_##PATH(const unsigned long long *__restrict__ chain,   \
                                               unsigned long long start_index,                 \
                                               unsigned int warmup_steps,                      \
                                               unsigned int record_steps,                      \
                                               unsigned int *__restrict__ latency_cycles,      \
                                               unsigned int *__restrict__ indices)             \
    {                                                                                          \
        extern __shared__ unsigned int s_buffer[];                                             \
        unsigned int *s_latency = s_buffer;                                                    \
        unsigned int *s_index = s_buffer + record_steps;                                       \
        unsigned long long j = start_index;                                                    \
        for (unsigned int k = 0; k < warmup_steps; ++k)                                        \
            j = load64_##PATH(chain + j);                                                      \
        for (unsigned int k = 0; k < record_steps; ++k) {                                      \
            unsigned int t0 = clock32();                                                       \
            j = load64_##PATH(chain + j);                                                      \
            s_index[k] = (unsigned int)j;                                                      \
            unsigned int t1 = clock32();                                                       \
            s_latency[k] = t1 - t0;                                                            \
        }                                                                                      \
        for (unsigned int k = 0; k < record_steps; ++k) {                                      \
            latency_cycles[k] = s_latency[k];                                                  \
            indices[k] = s_index[k];                                                           \
        }                                                                                      \
    }

DEFINE_PCHASE64(ca)
DEFINE_PCHASE64(cg)
DEFINE_PCHASE64(nc)

// Texture path: the chain read through a texture object (tex1Dfetch on a linear resource), the
// texture/read-only cache path of TPDS Sec. 4.3. Same protocol as above.
extern "C" __global__ void pchase_tex(unsigned long long tex, unsigned int start_index,
                                      unsigned int warmup_steps, unsigned int record_steps,
                                      unsigned int *__restrict__ latency_cycles,
                                      unsigned int *__restrict__ indices)
{
    extern __shared__ unsigned int s_buffer[];
    unsigned int *s_latency = s_buffer;
    unsigned int *s_index = s_buffer + record_steps;
    cudaTextureObject_t t = (cudaTextureObject_t)tex;
    unsigned int j = start_index;
    for (unsigned int k = 0; k < warmup_steps; ++k)
        j = tex1Dfetch<unsigned int>(t, j);
    for (unsigned int k = 0; k < record_steps; ++k) {
        unsigned int t0 = clock32();
        j = tex1Dfetch<unsigned int>(t, j);
        s_index[k] = j;
        unsigned int t1 = clock32();
        s_latency[k] = t1 - t0;
    }
    for (unsigned int k = 0; k < record_steps; ++k) {
        latency_cycles[k] = s_latency[k];
        indices[k] = s_index[k];
    }
}

// Constant path: the chain in constant memory (at most 64 KiB), read with ld.const through the
// constant caches (Größler's thesis Sec. 5: constant L1 and L1.5).
__constant__ unsigned int c_chain[16384];

__device__ __forceinline__ unsigned int load_const(unsigned int j)
{
    // c_chain + j is a generic address here: convert it to the constant window for ld.const
    unsigned int v;
    asm volatile("{\n\t.reg .u64 a;\n\tcvta.to.const.u64 a, %1;\n\tld.const.u32 %0, [a];\n\t}"
                 : "=r"(v)
                 : "l"(c_chain + j)
                 : "memory");
    return v;
}

extern "C" __global__ void pchase_const(unsigned int start_index, unsigned int warmup_steps,
                                        unsigned int record_steps,
                                        unsigned int *__restrict__ latency_cycles,
                                        unsigned int *__restrict__ indices)
{
    extern __shared__ unsigned int s_buffer[];
    unsigned int *s_latency = s_buffer;
    unsigned int *s_index = s_buffer + record_steps;
    unsigned int j = start_index;
    for (unsigned int k = 0; k < warmup_steps; ++k)
        j = load_const(j);
    for (unsigned int k = 0; k < record_steps; ++k) {
        unsigned int t0 = clock32();
        j = load_const(j);
        s_index[k] = j;
        unsigned int t1 = clock32();
        s_latency[k] = t1 - t0;
    }
    for (unsigned int k = 0; k < record_steps; ++k) {
        latency_cycles[k] = s_latency[k];
        indices[k] = s_index[k];
    }
}

// Sparse chains (arrays of hundreds of MB where only a few elements are visited): write
// values[i] at element positions[i] of the chain array.
extern "C" __global__ void scatter_u64(unsigned long long *__restrict__ array,
                                       const unsigned long long *__restrict__ positions,
                                       const unsigned long long *__restrict__ values, unsigned int n)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        array[positions[i]] = values[i];
}

extern "C" __global__ void scatter_u32(unsigned int *__restrict__ array,
                                       const unsigned long long *__restrict__ positions,
                                       const unsigned int *__restrict__ values, unsigned int n)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        array[positions[i]] = values[i];
}
