// L2 size from a copy with and without a flushed L2.
//
// What: the time (CUDA events, on the host) of a kernel that copies `elements` 8-byte values
// from `src` to `dst`, each thread one element.
// How: A. Lashgar, E. Salehi, A. Baniasadi, "A Case Study in Reverse Engineering GPGPUs:
// Outstanding Memory Handling Resources", Sec. 3.3 and Fig. 2. The host copies `src` to the
// device just before the launch, so its lines sit in the L2 (every host-to-device transfer
// passes through it). In the flushed variant a large dummy host-to-device copy (76 MB in the
// paper) runs in between and evicts them. The gap between the two times grows with the size
// while the source fits in the L2 and stops growing beyond it.
extern "C" __global__ void l2_copy(const unsigned long long *__restrict__ src,
                                   unsigned long long *__restrict__ dst,
                                   unsigned long long elements)
{
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < elements)
        dst[i] = src[i];
}
