// Multi-thread P-chase: several threads of one block walk their own chains, in a scripted order.
//
// What: the per-access latency (SM clock cycles) of the timed walks of a script in which
// threads of one block, each on its own load path, fill, disturb and re-walk caches; and the
// index each timed load returned.
// How: Größler, "Capturing the Memory Topology of GPUs" (thesis, 2022), Sec. 4.5 (cache
// sharing: thread 0 fills its cache, thread 1 walks another path, thread 0 re-walks) and
// Sec. 4.6 (caches per SM: the base thread against test threads in other warps). Each walker
// is one thread; `walkers` holds (thread, path code, start index) per walker, `script` holds
// (walker, steps, record offset or NO_RECORD) per step. Every thread runs every step; only
// the step's walker loads, the others wait at the __syncthreads() that ends the step, so the
// steps run strictly in order even across warps (the thesis's Figs. 4.16, 4.19). Timed loads
// use the fine-grained protocol of Mei & Chu (TPDS 2017, Sec. 3.2): %clock before and after,
// the loaded index stored to shared memory before the second read. The script and walkers are
// copied to shared memory first, through ld.global.cg, so that reading them leaves no line in
// the L1 the walks measure. Load paths: ld.global.ca / .cg / .nc (inline PTX), tex1Dfetch on a
// texture object over the same global array, ld.const on the chain in constant memory.

#define PATH_CA 0
#define PATH_CG 1
#define PATH_NC 2
#define PATH_TEX 3
#define PATH_CONST 4
#define NO_RECORD 0xffffffffu
#define NO_WALKER 0xffffffffu

__constant__ unsigned int c_chain[16384];

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

__device__ __forceinline__ unsigned int load_const(unsigned int j)
{
    unsigned int v;
    asm volatile("{\n\t.reg .u64 a;\n\tcvta.to.const.u64 a, %1;\n\tld.const.u32 %0, [a];\n\t}"
                 : "=r"(v)
                 : "l"(c_chain + j)
                 : "memory");
    return v;
}

// One step of one walker: `steps` loads from j; timed into s_latency/s_index from `rec`.
#define WALK(LOAD)                                                                 \
    if (rec == NO_RECORD) {                                                        \
        for (unsigned int k = 0; k < steps; ++k)                                   \
            j = LOAD;                                                              \
    } else {                                                                       \
        for (unsigned int k = 0; k < steps; ++k) {                                 \
            unsigned int t0 = clock32();                                           \
            j = LOAD;                                                              \
            s_index[rec + k] = j;                                                  \
            unsigned int t1 = clock32();                                           \
            s_latency[rec + k] = t1 - t0;                                          \
        }                                                                          \
    }

extern "C" __global__ void multichase(const unsigned int *__restrict__ chain,
                                      unsigned long long tex,
                                      const unsigned int *__restrict__ walkers,
                                      unsigned int n_walkers,
                                      const unsigned int *__restrict__ script,
                                      unsigned int n_steps, unsigned int record_steps,
                                      unsigned int *__restrict__ latency_cycles,
                                      unsigned int *__restrict__ indices)
{
    extern __shared__ unsigned int s_buffer[];
    unsigned int *s_latency = s_buffer;
    unsigned int *s_index = s_buffer + record_steps;
    unsigned int *s_script = s_index + record_steps;
    unsigned int *s_walkers = s_script + 3 * n_steps;
    for (unsigned int i = threadIdx.x; i < 3 * n_steps; i += blockDim.x)
        s_script[i] = __ldcg(script + i);
    for (unsigned int i = threadIdx.x; i < 3 * n_walkers; i += blockDim.x)
        s_walkers[i] = __ldcg(walkers + i);
    __syncthreads();
    unsigned int me = NO_WALKER, path = 0, j = 0;
    for (unsigned int w = 0; w < n_walkers; ++w) {
        if (s_walkers[3 * w] == threadIdx.x) {
            me = w;
            path = s_walkers[3 * w + 1];
            j = s_walkers[3 * w + 2];
        }
    }
    cudaTextureObject_t t = (cudaTextureObject_t)tex;
    for (unsigned int s = 0; s < n_steps; ++s) {
        if (s_script[3 * s] == me) {
            unsigned int steps = s_script[3 * s + 1];
            unsigned int rec = s_script[3 * s + 2];
            switch (path) {
            case PATH_CA: WALK(load_ca(chain + j)) break;
            case PATH_CG: WALK(load_cg(chain + j)) break;
            case PATH_NC: WALK(load_nc(chain + j)) break;
            case PATH_TEX: WALK(tex1Dfetch<unsigned int>(t, j)) break;
            default: WALK(load_const(j)) break;
            }
        }
        __syncthreads();
    }
    for (unsigned int k = threadIdx.x; k < record_steps; k += blockDim.x) {
        latency_cycles[k] = s_latency[k];
        indices[k] = s_index[k];
    }
}
