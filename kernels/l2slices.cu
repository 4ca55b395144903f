// L2 slice map: the latency of an L2 hit from one SM to each 128-B line of a region.
//
// What: from the SM under test, the latency (SM clock cycles) of one ld.global.cg load of each
// line of a list of lines inside one 2 MiB-aligned region, in a chain order, timed once per pass;
// and an untimed walk of the same lines from another SM (the warm-up that puts them in the L2).
// How: the fine-grained P-chase of kernels/pchase.cu (Mei & Chu, TPDS 2017, Sec. 3.2): each
// timed load j = A[j] is bracketed by two reads of %clock, and the loaded index is stored to
// shared memory before the second read, so the second read waits for the load. The element at
// each listed line holds the index of the next line of the chain (a cycle through the lines).
// The launch is a grid of one-thread blocks; each reads its SM id (%smid) and leaves at once
// unless it runs on `target_sm`; of the blocks there, the first to claim the launch (atomicCAS on
// `claim`) walks, the rest leave. So one block walks, alone on the GPU once the others have
// left (they do no work), as in the papers' one-block P-chase, but on a chosen SM. The walking
// block writes its SM id and the chain's last index (the sink: it must equal the host's walk).
// Each block asks for enough dynamic shared memory that at most one fits on an SM, so the first
// wave of a grid of twice the SM count places a block on every SM.
// An L2 partitioned in two (Hopper) keeps a copy of a far partition's line in the near one once
// an SM has read it (the `l2` family's small footprints read near): the walk from a helper SM
// fills the L2, so that the first timed pass from the SM under test reads each line where the
// helper left it (its home slice when the helper sits in the other partition), and the second
// pass reads the copies the first made.

__device__ __forceinline__ unsigned int clock32()
{
    unsigned int t;
    asm volatile("mov.u32 %0, %%clock;" : "=r"(t)::"memory");
    return t;
}

__device__ __forceinline__ unsigned int sm_id()
{
    unsigned int s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}

__device__ __forceinline__ unsigned int load_cg(const unsigned int *p)
{
    unsigned int v;
    asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// result[0]: the walking block's SM id; result[1]: the chain's last index
extern "C" __global__ void l2_slice_chase(const unsigned int *__restrict__ region,
                                          unsigned int start_index, unsigned int warmup_steps,
                                          unsigned int record_steps, unsigned int target_sm,
                                          unsigned int *__restrict__ claim,
                                          unsigned int *__restrict__ latency_cycles,
                                          unsigned int *__restrict__ result)
{
    extern __shared__ unsigned int s_buffer[];
    if (sm_id() != target_sm)
        return;
    if (atomicCAS(claim, 0u, 1u) != 0u)
        return;
    unsigned int *s_sink = s_buffer;
    unsigned int *s_latency = s_buffer + 1;
    unsigned int j = start_index;
    for (unsigned int k = 0; k < warmup_steps; ++k)
        j = load_cg(region + j);
    s_sink[0] = j;
    for (unsigned int k = 0; k < record_steps; ++k) {
        unsigned int t0 = clock32();
        j = load_cg(region + j);
        s_sink[0] = j;
        unsigned int t1 = clock32();
        s_latency[k] = t1 - t0;
    }
    for (unsigned int k = 0; k < record_steps; ++k)
        latency_cycles[k] = s_latency[k];
    result[0] = sm_id();
    result[1] = s_sink[0];
}

// The L2 flush between repetitions: every thread reads 8-byte words of `buffer` (grid-stride)
// through ld.global.cg and adds them into a sink, so the buffer's lines replace the L2's.
extern "C" __global__ void l2_slice_flush(const unsigned long long *__restrict__ buffer,
                                          unsigned long long words,
                                          unsigned long long *__restrict__ sink)
{
    unsigned long long acc = 0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < words; i += stride) {
        unsigned long long v;
        asm volatile("ld.global.cg.u64 %0, [%1];" : "=l"(v) : "l"(buffer + i) : "memory");
        acc += v;
    }
    if (acc == 0x9e3779b97f4a7c15ull)
        sink[0] = acc;
}

// Slice contention: which lines share an L2 slice.
// What: the duration of one launch in which every warp of a full grid hammers one of two lines
// of the region with atomic additions (even warps line `a`, odd warps line `b`).
// How: an atomic is carried out at the L2 slice that holds the line, and each slice's atomic
// unit serves one warp-wide atomic at a time; the grid issues far more than one slice can
// serve. So two lines of one slice take as long as one line hammered by every warp, and two
// lines of two slices take about half as long (two servers). Each lane adds `addend` to its own
// 4-byte word of the 128-B line (the host passes 0: the chain the walks read stays intact; the
// read-modify-write at the slice is the same). red.global is a reduction (no value comes back),
// so a warp issues its `iterations` atomics back to back.
extern "C" __global__ void l2_slice_hammer(unsigned int *region, unsigned long long a,
                                           unsigned long long b, unsigned int iterations,
                                           unsigned int addend)
{
    const unsigned int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    unsigned int *p = (unsigned int *)((char *)region + ((warp & 1) ? b : a)) + lane;
    for (unsigned int i = 0; i < iterations; ++i)
        asm volatile("red.global.add.u32 [%0], %1;" ::"l"(p), "r"(addend) : "memory");
}
