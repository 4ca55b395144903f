"""Automatic sweep ranges (`auto` in a config) from the driver's facts (`DeviceFacts`).

Size searches (`size_plan`: `l1_size`, `cache_stage1`), per load path and level: where each
search starts, where it gives up, and how fine it ends. Footprint grids (`l2_grid`) whose steps
are then refined (`sizesearch.refine_steps`).

- L1-family paths (`ca`, `nc`, `tex`): from 4 strides up to twice the shared memory per SM
  (rounded up to a power of two): the L1 and shared memory are one array since Fermi, and the
  L1 part is never larger than the whole; dense at the configured resolution.
- `cg` (the L2): from 1/64 of the driver's L2 size up to twice it, dense at 1/256 of it (a
  power of two, at least the configured resolution): the L2 is tens of MiB on recent GPUs, and a
  point costs one warm-up pass over the array, so the search ends coarser and closer (4 steps).
- `const`: the first level from 4 strides, the second from twice the first level's size (a
  power of two: every access then misses the first level), both bounded by the 64 KiB of
  constant memory; a level that does not miss there is "larger than 64 KiB".
"""

from __future__ import annotations

import numpy as np

from ..config import SizeRange
from ..contract.facts import DeviceFacts
from ..exceptions import ConfigError
from ..sizesearch import SearchPlan

FALLBACK_SHARED_BYTES = 256 * 1024  # no shared size from the driver: Hopper's whole array
FALLBACK_L2_BYTES = 64 << 20  # no L2 size from the driver: larger than any L2 so far
L1_PATHS = ("ca", "nc", "tex")


def pow2_ceil(n: int) -> int:
    return 1 << int(np.ceil(np.log2(max(n, 1))))


def pow2_floor(n: int) -> int:
    return 1 << int(np.floor(np.log2(max(n, 1))))


def size_plan(
    facts: DeviceFacts,
    *,
    path: str,
    level: int,
    stride_bytes: int,
    resolution_bytes: int,
    below_bytes: int | None = None,
) -> SearchPlan:
    """The search of one level; `below_bytes` is the size of the level in front (const L1.5)."""
    resolution = max(resolution_bytes, stride_bytes)
    resolution = resolution if resolution % stride_bytes == 0 else stride_bytes
    if path == "cg":
        l2 = facts.l2_bytes or FALLBACK_L2_BYTES
        res = max(resolution, pow2_floor(l2 // 256))
        start = max(res, pow2_floor(l2 // 64))
        return SearchPlan(
            start_bytes=start, limit_bytes=max(2 * pow2_ceil(l2), 4 * start),
            resolution_bytes=res, dense_steps=4,
        )  # fmt: skip
    if path == "const":
        limit = facts.const_memory_bytes
        start = 4 * resolution if level == 1 or not below_bytes else pow2_ceil(2 * below_bytes)
        return SearchPlan(start_bytes=min(start, limit // 4), limit_bytes=limit,
                          resolution_bytes=resolution)  # fmt: skip
    shared = facts.shared_per_sm_bytes or FALLBACK_SHARED_BYTES
    start = 4 * resolution  # a walk of 4 lines: smaller than any cache
    return SearchPlan(
        start_bytes=start,
        limit_bytes=max(pow2_ceil(2 * shared), 4 * start),
        resolution_bytes=resolution,
    )


def l2_grid(facts: DeviceFacts, *, stride_bytes: int) -> tuple[list[int], int]:
    """The `l2` footprints of `array_bytes: auto` and the resolution its steps are refined to:
    from 1/4 to 5/4 of the driver's L2 size in steps of 1/8 (two footprints that fit, to learn
    the hit latency, then the whole L2), then 2 and 4 times it (an L2 that keeps much of a
    slightly larger array - random replacement, hashed sets - misses on nearly every access
    only there); each step is then halved down to 1/64 of the L2 (Hopper: the near partition's
    share at about 24 of 50 MiB, the L2 size, DRAM; 1/64 brackets the size to 1.6 %, inside
    the 3 % it is compared with the driver's at: at 1/32 an H200 read 58.1 of its 60 MiB)."""
    l2 = facts.l2_bytes or FALLBACK_L2_BYTES
    step = max(stride_bytes, l2 // 8 - (l2 // 8) % stride_bytes)
    resolution = max(stride_bytes, l2 // 64 - (l2 // 64) % stride_bytes)
    return [k * step for k in range(2, 11)] + [16 * step, 32 * step], resolution


def l2_flush_range(facts: DeviceFacts, *, align_bytes: int) -> tuple[SizeRange, int]:
    """The `l2_flush` copies of `size_bytes: auto` and the flush of `flush_bytes: auto`: copies
    of 1/4 to 2 times the driver's L2 size in steps of 1/16, a flush of four L2 sizes (whole
    MiB). The gap grows up to the L2 size and is flat for as long again; in copies much smaller
    than the L2 it is flat too, hidden by the fixed cost of a launch, and would bend the line
    the analysis fits to its growth. The analysis calls a size past the line once the gap falls
    3% behind it (`analysis.l2.l2_flush.LINE_TOLERANCE`): a finer step than 1/16 only moves the
    first size it can see falling behind past the L2."""
    l2 = facts.l2_bytes or FALLBACK_L2_BYTES
    step = max(align_bytes, l2 // 16 - (l2 // 16) % align_bytes)
    mib = 1 << 20
    flush = -(-4 * l2 // mib) * mib
    return SizeRange(4 * step, 32 * step, step), flush


def classic_sizes(size_bytes: int, *, stride_bytes: int) -> tuple[tuple[int, ...], SizeRange]:
    """`pchase_classic`'s sizes around a cache of `size_bytes`: Saavedra's two fixed arrays,
    the size itself (Saavedra reads the size from an array that just fits, as TPDS Fig. 5's
    12 KB on a 12 KB cache) and four times it; Wong's sweep from 7/8 to 9/8 of the size in
    steps of about 1/128 (a power of two, at least the stride)."""
    fits = size_bytes - size_bytes % 4
    saavedra = (fits, 4 * fits)
    step = max(stride_bytes, pow2_floor(size_bytes // 128))
    start = max(step, (7 * size_bytes // 8) // step * step)
    stop = -(-(9 * size_bytes // 8) // step) * step
    return saavedra, SizeRange(start, stop, step)


MEMORY_SHARE = 0.9  # of the device memory a sparse walk may span: the rest for the context
FREE_MARGIN_BYTES = 1 << 30  # of the free memory: a flush buffer, records, the kernels


def walk_memory_bytes(
    facts: DeviceFacts, *, align_bytes: int, key: str, free_bytes: int | None = None
) -> int:
    """`max_array_bytes: auto` of the TLB walks: 90% of the memory the driver reports, a multiple
    of `align_bytes` (a TLB past the reach of the memory cannot be overflowed anyway); no more
    than `free_bytes` (the memory free when the sweep starts, where known) less
    FREE_MARGIN_BYTES for the sweep's other buffers."""
    if not facts.total_memory_bytes:
        raise ConfigError(
            f"{key}: auto needs the device memory size, which the driver (or the profile's "
            "dram.size_bytes) does not give; allowed: an explicit size in bytes"
        )
    n = int(MEMORY_SHARE * facts.total_memory_bytes)
    if free_bytes is not None:  # what other processes hold is not there to walk
        n = min(n, free_bytes - FREE_MARGIN_BYTES)
    return n - n % align_bytes


# --- the TLB walks (`tlbs`) ---------------------------------------------------------------------
ALLOCATION_GRANULE_BYTES = 2 << 20  # cuMemAlloc's granularity: 2 MiB on every GPU since Fermi
SMALLEST_STRIDE_BYTES = 4096  # no GPU page is smaller
RECORD_BYTES = 8  # a timed access keeps its latency and index in shared memory
FALLBACK_SHARED_BLOCK_BYTES = 48 << 10  # no opt-in size from the driver: CUDA's static limit
SET_WAYS_FOLLOWED = 8  # TPDS Fig. 10's L2-TLB sets have 8 ways (and one of 17)


def tlb_record_steps(facts: DeviceFacts) -> int:
    """`max_record_steps: auto`: the timed accesses whose records (8 bytes each) fill the shared
    memory one block may opt into, in whole KiB of buffer (the H100's 227 KiB: 28672)."""
    shared = facts.shared_per_block_optin_bytes or facts.shared_per_sm_bytes
    shared = shared or FALLBACK_SHARED_BLOCK_BYTES
    return (shared // RECORD_BYTES) // 1024 * 1024


def tlb_max_elements(record_steps: int) -> int:
    """`max_elements: auto`: the longest walk whose three traversals the records hold (the
    analysis reads the median traversal's misses); each stride's walks also stop at
    `max_array_bytes`."""
    return max(8, record_steps // 3)


def tlb_stride_bounds(max_array_bytes: int, dense_elements: int) -> tuple[int, int, int]:
    """`strides_bytes: auto`: the first stride (the allocation granule), the smallest (4 KiB) and
    the largest (a power of two at which a walk still spans twice the dense walks within
    `max_array_bytes`) the reach stage may add, a factor of 4 at a time."""
    top = pow2_floor(max(max_array_bytes // (2 * dense_elements), SMALLEST_STRIDE_BYTES))
    return min(ALLOCATION_GRANULE_BYTES, top), SMALLEST_STRIDE_BYTES, top


def tlb_dense_pages(first_miss_pages: int) -> int:
    """`max_dense_pages: auto`: one-page steps past the first overflowing walk of the outermost
    TLB level until every set of 8 or more ways has overflowed (each further page overflows one
    more set: TPDS Fig. 10), plus 4 to see the steps of one miss a page that end it."""
    return max(8, -(-first_miss_pages // SET_WAYS_FOLLOWED) + 4)


STREAM_MIN_BYTES = 256 << 20  # a copy of at least 256 MiB: launch overheads stay below 1%


def copy_bytes(l2_bytes: int | None) -> int:
    """`global_throughput.copy_bytes: auto`: four L2 sizes in whole MiB (the copy streams from
    DRAM, as `l2_flush`'s flush), at least 256 MiB."""
    mib = 1 << 20
    four = -(-4 * (l2_bytes or 0) // mib) * mib
    return max(STREAM_MIN_BYTES, four)


def index_bytes(largest_bytes: int) -> int:
    """`element_bytes: auto` of the sparse chases: 4-byte (32-bit) indices while they reach
    every element of the largest array, 8 from 16 GiB on."""
    return 4 if largest_bytes // 4 < 2**32 else 8
