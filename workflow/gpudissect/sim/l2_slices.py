"""A sliced, partitioned L2: which slice holds an address and how far it is from each SM (the
optional ``l2_slices:`` block of a profile; config/README.md, "Device profiles").

The cache the block names (normally ``l2``) keeps its sets, ways and policy; what changes is
the latency of a hit. An address goes to slice ``slice_of(address)`` (an index function of
indexing.py over the byte address: XOR masks, a bit list or a table), each slice belongs to one
partition (``slice_partition``), and each SM to one (``sm_partition``). A hit of SM ``s`` in
slice ``k`` costs

    hit latency of the cache on the load's path + sm_cycles[s] + slice_cycles[k]
    + far_cycles when slice_partition[k] != sm_partition[s]

(an SM's distance to the crossbar, the slice's distance, and the trip to the other partition).
Misses and every other cache are unchanged.

With ``near_copies`` (an L2 that copies the lines an SM reads into its own partition, Hopper's)
each partition holds a copy store of ``near_copies.size_bytes`` (LRU, ``ways`` ways, its own
set index, contiguous bits by default, the cache's line and sectors; a size and ways per
partition where the two are given as lists: partitions need not be equal) in front of the
cache: a
load looks up its SM's partition's store first, and a hit there costs the hit above without
the far term; a miss there (the store fills the line) that hits the cache costs the far term
whatever the slice (the line comes from the other partition, or from a home partition that no
longer holds it near); a load that misses the cache also places the line in its home
partition's store (the slice's partition). So a footprint up to one store reads near hits, a
larger one far hits until the cache is full, and a line that another partition's SM brought in
reads far until copied.

With ``near_copies.home_lines: true`` the stores are the L2 (the cache's own array gives only
its geometry): each partition's store holds the lines homed in its slices and the copies of
the other partition's lines alike, in one LRU capacity. A load looks up its SM's partition's
store (a hit: near; a miss fills it); a line homed there that missed goes to DRAM; a line
homed in the other partition is looked up (and filled) in that partition's store: a far hit,
or DRAM plus the far term. So one SM's footprint up to one store reads near hits; past it its
own partition's lines miss to DRAM while the other's still hit far until their half of the
footprint outgrows the other store, and then miss to DRAM plus the far trip (the H200's `l2`
trace split by the partition function: results/reference/FINDINGS.md).

Each slice has one atomic unit, busy ``atomic_cycles`` per warp-wide atomic (the contention
launches of backends/l2slices_sim.py).

With ``data_per_slice: true`` the cache's data array is split among the slices as well: slice
``k`` holds ``sets / slices`` sets of its own (``size_bytes / slices`` bytes), and the lines of
slice ``k`` fill its sets in turn: the j-th line of slice ``k`` counted from address 0 goes to
set ``k * sets_per_slice + j mod sets_per_slice``. A buffer the slice function spreads unevenly
then overflows its most loaded slice first, below the cache's size. The composed index is a
table over a period of the slice function long enough that every slice takes a whole number
of rounds of its sets in it (``per_slice_index``); the cache's own ``index`` must then be left
out.
The engine evaluates the slice function per load (``_kernels.load``); the latencies of one SM's
slices are computed here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .cache import CacheSpec
from .indexing import MASKS, MODULO, IndexSpec, make_index


@dataclass(frozen=True)
class L2SliceSpec:
    cache: str
    slices: int
    index: IndexSpec
    slice_partition: tuple[int, ...]
    sm_partition: tuple[int, ...]
    sm_cycles: tuple[int, ...]
    slice_cycles: tuple[int, ...]
    far_cycles: int
    line_bytes: int
    atomic_cycles: int = 4
    # one store size and ways per partition; None: no copies (far by slice, as above)
    near_copies_bytes: tuple[int, ...] | None = None
    near_copies_ways: tuple[int, ...] = (16,)
    near_copies_index: IndexSpec = field(default_factory=IndexSpec)
    near_copies_home_lines: bool = False  # the stores hold their home lines too (docstring)
    data_per_slice: bool = False  # the cache's sets split among the slices (docstring)

    @property
    def partitions(self) -> int:
        return max(max(self.slice_partition), max(self.sm_partition)) + 1

    @cached_property
    def _slice_index(self):
        """The slice function, built once (a table's array is not rebuilt per address)."""
        return make_index(self.index, sets=self.slices, line_bytes=self.line_bytes)

    def slice_of(self, address_bytes: int) -> int:
        """The slice of one byte address."""
        return self._slice_index.set_of(int(address_bytes))

    def slices_of(self, addresses_bytes: np.ndarray) -> np.ndarray:
        """The slice of each byte address (int64), by the compiled form the kernels evaluate
        (indexing.py: modulo, parity masks or table)."""
        c = self._slice_index.compiled()
        a = np.asarray(addresses_bytes, dtype=np.int64)
        if c.kind == MODULO:
            return (a >> c.shift) % self.slices
        if c.kind == MASKS:
            out = np.zeros(a.shape, dtype=np.int64)
            for k, mask in enumerate(c.data.tolist()):
                bits = a & mask
                parity = np.zeros(a.shape, dtype=np.int64)
                while bits.any():
                    parity ^= bits & 1
                    bits = bits >> 1
                out |= parity << k
            return out
        return c.data[(a % c.period_bytes) >> c.shift]

    def near_cycles(self, *, base_cycles: int, sm: int) -> np.ndarray:
        """The latency of a hit in each slice without the far term (a near copy's)."""
        if not 0 <= sm < len(self.sm_partition):
            raise ValueError(f"sm must be 0..{len(self.sm_partition) - 1}, got {sm}")
        return base_cycles + self.sm_cycles[sm] + np.asarray(self.slice_cycles, dtype=np.int64)

    def hit_cycles(self, *, base_cycles: int, sm: int) -> np.ndarray:
        """The latency of a hit in each slice (int64, one per slice) for a load of SM ``sm``
        whose path's hit latency of the cache is ``base_cycles``."""
        if not 0 <= sm < len(self.sm_partition):
            raise ValueError(f"sm must be 0..{len(self.sm_partition) - 1}, got {sm}")
        far = np.asarray(self.slice_partition) != self.sm_partition[sm]
        return (
            base_cycles
            + self.sm_cycles[sm]
            + np.asarray(self.slice_cycles, dtype=np.int64)
            + self.far_cycles * far.astype(np.int64)
        )


def copy_stores(spec: L2SliceSpec | None, caches) -> list[CacheSpec]:
    """The near-copy store of each partition (caches of their own; none without copies)."""
    if spec is None or spec.near_copies_bytes is None:
        return []
    cache = caches[spec.cache]
    return [
        CacheSpec(
            name=f"{spec.cache}.near_copies[{p}]",
            size_bytes=size,
            line_bytes=cache.line_bytes,
            set_ways=(ways,) * (size // cache.line_bytes // ways),
            index=spec.near_copies_index,
            hit_latency_cycles=0,
            sector_bytes=cache.sector_bytes,
        )
        for p, (size, ways) in enumerate(
            zip(spec.near_copies_bytes, spec.near_copies_ways, strict=True)
        )
    ]


MAX_TABLE_LINES = 1 << 20  # the composed index's period, in lines, at most


def slice_period_bytes(spec: L2SliceSpec) -> int:
    """The period of the slice function in bytes: modulo, ``slices`` lines of the shift; masks,
    the span of their highest bit; a table, its period."""
    c = make_index(spec.index, sets=spec.slices, line_bytes=spec.line_bytes).compiled()
    if c.kind == MODULO:
        return spec.slices << c.shift
    if c.kind == MASKS:
        return 1 << max(1, int(np.bitwise_or.reduce(c.data)).bit_length())
    return c.period_bytes  # TABLE


def per_slice_index(spec: L2SliceSpec, cache: CacheSpec) -> IndexSpec:
    """The set index of a cache whose data array is split among the slices (module docstring),
    as a table; raises ValueError naming what does not fit."""
    if cache.sets % spec.slices:
        raise ValueError(
            f"the cache's {cache.sets} sets do not split into {spec.slices} slices; give a "
            "size and ways whose set count is a multiple of the slice count"
        )
    per = cache.sets // spec.slices
    line = cache.line_bytes
    base = max(slice_period_bytes(spec), line) // line  # lines of one period of the function
    one = spec.slices_of(np.arange(base, dtype=np.int64) * line)
    counts = np.bincount(one, minlength=spec.slices)
    # periods it takes every slice to go round its sets a whole number of times
    rounds = math.lcm(*(per // math.gcd(int(c), per) for c in counts if c)) if counts.any() else 1
    lines = base * rounds
    if lines > MAX_TABLE_LINES:
        raise ValueError(
            f"the slice function and the sets repeat every {lines} lines; at most "
            f"{MAX_TABLE_LINES} allowed"
        )
    k = np.tile(one, rounds)
    order = np.argsort(k, kind="stable")
    rank = np.empty(lines, dtype=np.int64)
    start = np.concatenate([[0], np.cumsum(np.bincount(k, minlength=spec.slices))[:-1]])
    rank[order] = np.arange(lines) - start[k[order]]
    sets = k * per + rank % per
    return IndexSpec(kind="table", period_bytes=lines * line, sets_of_lines=tuple(sets.tolist()))
