// Pointer walk over an arbitrary list of addresses: eviction-set tests of one cache.
//
// What: the latency (SM clock cycles) of chosen loads of one thread walking p = *p through
// ld.global.ca (L1 + L2), where each visited 8-byte word holds the address of the next; the
// host chooses the visited words, so one walk can be any sequence of lines (a target, a
// candidate eviction set, the target again; a cyclic walk at any stride).
// How: `link_words` writes the chain first (one thread per word, st.global.cg: the stores stay
// in the L2 and leave no line in any L1); then `walk_ca` runs on one thread of one block. The
// walk's loads carry no arithmetic between them (the loaded value is the next address), so
// the index function sees exactly the addresses the host chose. A load is timed when its step
// is in `record_steps` (sorted, copied to shared memory through ld.global.cg before the walk,
// so the list leaves no line in the L1 either): %clock before and after, the loaded address
// stored to shared memory before the second read, so the second read waits for the load (the
// window of Mei & Chu, TPDS 2017, Sec. 3.2). Records stay in shared memory during the walk and
// are copied out at the end, with the final address (the sink the host checks against its own
// walk). The shared-memory size is a launch parameter, fixed by the experiment for all its
// launches: it is carved from the same array as the L1.
// Used by: Vila et al., "Theory and Practice of Finding Eviction Sets" (IEEE S&P 2019), group-
// testing reduction, and Maurice et al. (RAID 2015), the index function as a linear map.

__device__ __forceinline__ unsigned int clock32()
{
    unsigned int t;
    asm volatile("mov.u32 %0, %%clock;" : "=r"(t)::"memory");
    return t;
}

__device__ __forceinline__ unsigned long long load_ca(const unsigned long long *p)
{
    unsigned long long v;
    asm volatile("ld.global.ca.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ unsigned int load_cg_u32(const unsigned int *p)
{
    unsigned int v;
    asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// word offsets[i] (bytes from base) receives base + offsets[i + 1]; the last one base + offsets[0]
extern "C" __global__ void link_words(unsigned long long base,
                                      const unsigned long long *__restrict__ offsets,
                                      unsigned int n)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    unsigned long long next = base + offsets[i + 1 < n ? i + 1 : 0];
    unsigned long long *word = (unsigned long long *)(base + offsets[i]);
    asm volatile("st.global.cg.u64 [%0], %1;" ::"l"(word), "l"(next) : "memory");
}

// shared memory: records latencies, records + 1 record steps (the last a sentinel), the sink.
// Before the walk, `flush_lines` lines of `flush` (128 B apart, independent loads through
// ld.global.ca) push every line out of this SM's L1: an H100 SM's L1 may still hold lines of
// the chain from `link_words` or from an earlier launch (without it, an H100's first touches
// read 38 cycles, L1 hits). The walk runs in segments: untimed steps up to the next recorded
// one, then the timed load in a block of its own (in one loop with a branch, ptxas issued the
// load before the first clock read).
extern "C" __global__ void walk_ca(const unsigned long long *start, unsigned int steps,
                                   const unsigned int *__restrict__ record_steps,
                                   unsigned int records,
                                   unsigned int *__restrict__ latency_cycles,
                                   unsigned long long *__restrict__ final_address,
                                   const unsigned long long *flush, unsigned int flush_lines)
{
    extern __shared__ unsigned long long s_buffer[];
    unsigned long long *s_sink = s_buffer;
    unsigned int *s_latency = (unsigned int *)(s_buffer + 1);
    unsigned int *s_at = s_latency + records;
    for (unsigned int r = 0; r < records; ++r)
        s_at[r] = load_cg_u32(record_steps + r);
    s_at[records] = 0xffffffffu;
    unsigned long long acc = 0;
    for (unsigned int i = 0; i < flush_lines; ++i)
        acc += load_ca(flush + 16ull * i);
    s_sink[0] = acc; // waits for every flush load
    const unsigned long long *p = start;
    unsigned int k = 0;
    for (unsigned int r = 0; r < records; ++r) {
        const unsigned int at = s_at[r] < steps ? s_at[r] : steps;
        for (; k < at; ++k)
            p = (const unsigned long long *)load_ca(p);
        if (k >= steps)
            break;
        unsigned int t0 = clock32();
        p = (const unsigned long long *)load_ca(p);
        s_sink[0] = (unsigned long long)p;
        unsigned int t1 = clock32();
        s_latency[r] = t1 - t0;
        ++k;
    }
    for (; k < steps; ++k)
        p = (const unsigned long long *)load_ca(p);
    s_sink[0] = (unsigned long long)p;
    for (unsigned int q = 0; q < records; ++q)
        latency_cycles[q] = s_latency[q];
    final_address[0] = s_sink[0];
}
