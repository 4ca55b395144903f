"""Streaming read and write bandwidth of a launch, from where its footprint lives and what
each level can serve.

The work is the `bandwidth` experiment's: CTA b streams its own slice of a buffer, over and
over; the footprint of one SM is its CTAs' slices (CTAs are placed on SMs round-robin), the
footprint of the L2 all of them. Two mechanisms give the throughput:

- **Where the accesses are served.** Every line of the footprint goes through the set-index
  function of each cache on the load path (for stores: the caches after the L1, which stores
  write through); a cyclic walk over a set holding more lines than its ways misses on every
  line of that set (LRU and FIFO evict each line before its reuse; PLRU and random keep a few,
  which this model does not count), and a cache whose data array holds fewer lines than the
  footprint (the L1 beside a shared partition, ``CacheSpec.data_bytes``) misses on all. The
  share of lines each level serves follows; DRAM serves the rest.
- **How fast.** The closed queueing network of sim/throughput.py, per SM: every warp keeps
  ``LOADS_IN_FLIGHT`` 512-byte warp accesses in flight (the kernel's four independent vectors
  per thread); each waits the unloaded latency of the level that serves it and queues at the
  servers it passes - the SM's L1 pipeline (``l1_peak_bytes_per_cycle_per_sm``), the SM's share
  of the L2 (``l2_read_peak_gbps`` / ``l2_write_peak_gbps`` over the SMs) and of DRAM
  (``dram_peak_gbps x dram_achievable_fraction``, for stores ``dram_write_achievable_fraction``
  where the profile gives one). A level without a peak in the profile is no
  server (it never limits). Exact mean-value analysis with several servers.

Nothing here knows the footprint's intended level: a slice that overflows the L1 is served by
the L2, whatever the experiment meant.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpudissect.exceptions import ConfigError

from .cache import CacheSpec
from .indexing import MASKS, MODULO, TABLE, make_index

WARP_THREADS = 32
VECTOR_BYTES = 16
ACCESS_BYTES = WARP_THREADS * VECTOR_BYTES  # one warp's coalesced access: 512 bytes
LOADS_IN_FLIGHT = 4  # independent vectors per thread per step (kernels/bandwidth.cu)


@dataclass(frozen=True)
class StreamLevel:
    """One level a stream passes: its unloaded latency and the rate of its server (None: no
    server, it never limits), in bytes per ns of one SM's share."""

    name: str
    latency_cycles: float
    rate_bytes_per_ns: float | None


@dataclass(frozen=True)
class StreamThroughput:
    throughput_gbps: float  # bytes read (or written) per ns, the whole GPU
    served: dict[str, float]  # share of the accesses each level serves (and "dram")


def set_indices(spec: CacheSpec, addresses: np.ndarray) -> np.ndarray:
    """The set of each address (vectorised form of the cache's set-index function)."""
    c = make_index(spec.index, sets=spec.sets, line_bytes=spec.line_bytes).compiled()
    a = addresses.astype(np.uint64)
    if c.kind == MODULO:
        return ((a >> np.uint64(c.shift)) % np.uint64(spec.sets)).astype(np.int64)
    if c.kind == MASKS:
        out = np.zeros(len(a), np.int64)
        for k, mask in enumerate(c.data):
            out |= (np.bitwise_count(a & np.uint64(mask)).astype(np.int64) & 1) << k
        return out
    if c.kind == TABLE:
        return c.data[((a % np.uint64(c.period_bytes)) >> np.uint64(c.shift)).astype(np.int64)]
    raise ValueError(f"unknown compiled index kind {c.kind}")


def resident_share(spec: CacheSpec, lines: np.ndarray) -> float:
    """Share of a cyclic walk's accesses to ``lines`` (line addresses, bytes) that hit once
    the walk repeats: lines of sets within their ways, none past the data array's lines."""
    if len(lines) == 0:
        return 0.0
    data = spec.data_lines
    if data is not None and len(lines) > data:
        return 0.0
    counts = np.bincount(set_indices(spec, lines), minlength=spec.sets)
    ways = np.asarray(spec.set_ways, np.int64)
    return float(counts[counts <= ways].sum()) / len(lines)


def footprint_lines(*, slice_bytes: int, slice_ids: np.ndarray, line_bytes: int) -> np.ndarray:
    """Line addresses of the given slices (slice k starts at k x ``slice_bytes``)."""
    per_slice = np.arange(0, slice_bytes, line_bytes, dtype=np.uint64)
    starts = slice_ids.astype(np.uint64) * np.uint64(slice_bytes)
    return np.unique((starts[:, None] + per_slice[None, :]).ravel() // line_bytes * line_bytes)


def served_shares(
    caches: tuple[CacheSpec, ...],
    *,
    ctas: int,
    sms: int,
    slice_bytes: int,
    per_sm: tuple[bool, ...],
    by_sm: bool = False,
) -> list[float]:
    """The share of accesses each cache serves (walked nearest first), then DRAM's. A cache of
    one SM (``per_sm``) sees SM 0's slices - its own one where the stream is ``by_sm``, else
    those of its CTAs, placed round-robin (0, sms, 2 sms, ...); a cache of the whole GPU sees
    every slice."""
    left, shares = 1.0, []
    for spec, local in zip(caches, per_sm, strict=True):
        if by_sm:
            ids = np.arange(1) if local else np.arange(sms)
        else:
            ids = np.arange(0, ctas, sms) if local else np.arange(ctas)
        lines = footprint_lines(slice_bytes=slice_bytes, slice_ids=ids, line_bytes=spec.line_bytes)
        hit = resident_share(spec, lines) * left
        shares.append(hit)
        left -= hit
    return [*shares, left]


def mva_multi(customers: int, demands_ns: list[float], delay_ns: float) -> float:
    """Customers completed per ns of a closed network of queueing servers (``demands_ns``
    per visit) and one delay station, by exact mean-value analysis."""
    queues = [0.0] * len(demands_ns)
    x = 0.0
    for n in range(1, customers + 1):
        responses = [d * (1.0 + q) for d, q in zip(demands_ns, queues, strict=True)]
        x = n / (delay_ns + sum(responses))
        queues = [x * r for r in responses]
    return x


def stream_throughput(
    levels: list[StreamLevel],
    shares: list[float],
    *,
    warps_per_sm: int,
    sms: int,
    sm_clock_mhz: float,
) -> float:
    """GB/s of the whole GPU. ``levels`` nearest first, DRAM last; ``shares[i]``: the share
    of accesses level i serves. An access served by level i passes the servers of levels 0..i
    (a line missing in the L1 passes the L1 and the L2 on its way from DRAM)."""
    if warps_per_sm < 1 or sms < 1 or sm_clock_mhz <= 0:
        raise ConfigError(
            f"warps_per_sm, sms and sm_clock_mhz must be positive, got {warps_per_sm}, {sms}, "
            f"{sm_clock_mhz}"
        )
    ns_per_cycle = 1000.0 / sm_clock_mhz
    delay = sum(s * lv.latency_cycles for s, lv in zip(shares, levels, strict=True))
    demands = []
    for i, lv in enumerate(levels):
        if lv.rate_bytes_per_ns is None:
            continue
        passing = sum(shares[i:])
        demands.append(passing * ACCESS_BYTES / lv.rate_bytes_per_ns)
    per_sm = mva_multi(warps_per_sm * LOADS_IN_FLIGHT, demands, delay * ns_per_cycle)
    return per_sm * ACCESS_BYTES * sms
