"""TLB levels and the page-table window: what address translation adds to a load.

Latency composition (TPDS section 5.2, Fig. 14; NPC 2014 Table 3; the full rules, with the
caches that skip translation or lose their hits on a TLB miss, are in hierarchy.py). A load that
is translated adds

    miss_penalty_cycles of every TLB level that missed (nearest first; a hit stops the walk)
    + window_switch_penalty_cycles when every level missed and the page lies outside the
      active page-table window (which then moves to that page's window)

to its data latency (first cache on the path that hits, else DRAM), so the paper's patterns
come out as P1 = hit, P2 = hit + L1-TLB penalty, P3 = hit + both penalties, P4 = DRAM, P5 =
DRAM + both penalties, P6 = P5 + switch. Only Kepler and Maxwell show P6: "only memory page
entries of 512 MB are activated" at kernel launch (TPDS 5.2); here the first page walk after a
reset activates its window for free.

A TLB level is a set-associative cache of pages: ``line_bytes`` = ``page_bytes``, no sectors,
the same index functions (on byte addresses: bit 21 is the lowest page-number bit of 2 MB
pages) and policies. The Fermi/Kepler L2 TLB has one set of 17 entries and six of 8 (TPDS
section 4.4, Fig. 10).

Coalescing (``coalesce_pages`` K > 1): one entry covers the K aligned virtual pages of a block
(virtual page number // K) when the physical memory behind them is contiguous and aligned to K
pages; otherwise each page takes an entry of its own, as without coalescing. A coalesced
entry's tag and set come from the block number (``entry_key``). Which physical memory backs a
virtual address is the ``PageMap`` an experiment gives (chunks of ``chunk_bytes`` in the order
it mapped them); without one, virtual = physical (contiguous), so every block coalesces. The
caches after translation see the physical address.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .cache import Cache, CacheSpec
from .indexing import IndexSpec
from .policies import PolicySpec


@dataclass(frozen=True)
class TlbLevelSpec:
    """One entry of ``tlbs.levels``."""

    name: str
    entries: int
    page_bytes: int
    set_ways: tuple[int, ...]
    miss_penalty_cycles: int
    index: IndexSpec = field(default_factory=IndexSpec)
    policy: PolicySpec = field(default_factory=PolicySpec)
    coalesce_pages: int = 1  # aligned pages one entry covers when physically contiguous

    def as_cache_spec(self) -> CacheSpec:
        """This level as a cache of pages (hit latency 0: a hit adds nothing)."""
        return CacheSpec(
            name=self.name,
            size_bytes=self.entries * self.page_bytes,
            line_bytes=self.page_bytes,
            set_ways=self.set_ways,
            hit_latency_cycles=0,
            index=self.index,
            policy=self.policy,
        )


# marks a coalesced entry's key (a block number, not a page number): no address reaches bit 58
COALESCED_KEY_BIT = 1 << 58


@dataclass(frozen=True, eq=False)
class PageMap:
    """The physical memory behind a virtual range: virtual chunk v (of ``chunk_bytes``, from
    address 0) lies in physical chunk ``frames[v]``. Addresses past the range map to
    themselves."""

    chunk_bytes: int
    frames: np.ndarray  # int64, one physical chunk number per virtual chunk

    def __post_init__(self) -> None:
        c = self.chunk_bytes
        if c <= 0 or c & (c - 1):
            raise ValueError(f"chunk_bytes must be a power of two, got {c}")
        frames = np.asarray(self.frames, dtype=np.int64)
        if frames.ndim != 1 or len(np.unique(frames)) != len(frames) or frames.min() < 0:
            raise ValueError("frames must list distinct physical chunks >= 0, one per chunk")
        object.__setattr__(self, "frames", frames)

    @property
    def shift(self) -> int:
        return self.chunk_bytes.bit_length() - 1

    def physical(self, address_bytes: int) -> int:
        v = address_bytes >> self.shift
        if v >= len(self.frames):
            return address_bytes
        return (int(self.frames[v]) << self.shift) | (address_bytes & (self.chunk_bytes - 1))

    @cached_property
    def aligned_runs(self) -> np.ndarray:
        """log2 of the largest aligned block of 2^j chunks around each virtual chunk that maps
        onto physical chunks in order, starting at a physical chunk aligned to 2^j."""
        f = self.frames
        runs = np.zeros(len(f), dtype=np.int64)
        ok = np.ones(len(f), dtype=bool)  # blocks of 2^j chunks (here j = 0) that map in order
        j = 0
        while len(ok) >= 2:
            half = 1 << j
            n = len(ok) // 2
            first = f[0 : 2 * n * half : 2 * half]
            second = f[half : 2 * n * half : 2 * half]
            ok = (
                ok[0 : 2 * n : 2]
                & ok[1 : 2 * n : 2]
                & (second == first + half)
                & (first % (2 * half) == 0)
            )
            j += 1
            runs[: n * (1 << j)][np.repeat(ok, 1 << j)] = j
        return runs

    def coalesces(self, address_bytes: int, block_bytes: int) -> bool:
        """Whether the aligned block of ``block_bytes`` around the address maps contiguously
        (physical memory in order, aligned to the block)."""
        need = block_bytes.bit_length() - 1 - self.shift
        v = address_bytes >> self.shift
        if need <= 0 or v >= len(self.frames):
            return True
        return int(self.aligned_runs[v]) >= need


def entry_key(level: TlbLevelSpec, address_bytes: int, page_map: PageMap | None) -> int:
    """The address a level looks up for ``address_bytes``: the address itself, or for a
    coalesced entry its block number (in page units) marked with ``COALESCED_KEY_BIT``."""
    k = level.coalesce_pages
    if k <= 1:
        return address_bytes
    block_bytes = k * level.page_bytes
    if page_map is not None and not page_map.coalesces(address_bytes, block_bytes):
        return address_bytes
    return COALESCED_KEY_BIT | (address_bytes // block_bytes * level.page_bytes)


@dataclass(frozen=True)
class TlbSpec:
    """The ``tlbs:`` block: levels nearest first and the optional page-table window."""

    levels: tuple[TlbLevelSpec, ...]
    page_table_window_bytes: int | None = None
    window_switch_penalty_cycles: int = 0


@dataclass(frozen=True)
class Translation:
    """What translating one address did: the first level that hit (None: none), the cycles
    added, and whether the page-table window switched."""

    hit_level: str | None
    penalty_cycles: int
    window_switched: bool


class Tlb:
    """Python reference model of the TLB levels and the page-table window."""

    def __init__(self, spec: TlbSpec, *, rng=None, page_map: PageMap | None = None) -> None:
        self.spec = spec
        self.page_map = page_map
        self.levels = [Cache(level.as_cache_spec(), rng=rng) for level in spec.levels]
        self.reset()

    def reset(self) -> None:
        """Cold TLBs; no active window until the next page walk."""
        for level in self.levels:
            level.reset()
        self.active_window: int | None = None

    def translate(self, address_bytes: int) -> Translation:
        """Look ``address_bytes`` up level by level, filling the levels that missed."""
        penalty = 0
        for level, cache in zip(self.spec.levels, self.levels, strict=True):
            if cache.access(entry_key(level, address_bytes, self.page_map)).hit:
                return Translation(level.name, penalty, False)
            penalty += level.miss_penalty_cycles
        switched = False
        window_bytes = self.spec.page_table_window_bytes
        if window_bytes:
            window = address_bytes // window_bytes
            if self.active_window is not None and window != self.active_window:
                penalty += self.spec.window_switch_penalty_cycles
                switched = True
            self.active_window = window
        return Translation(None, penalty, switched)
