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
"""

from __future__ import annotations

from dataclasses import dataclass, field

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

    def __init__(self, spec: TlbSpec, *, rng=None) -> None:
        self.spec = spec
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
            if cache.access(address_bytes).hit:
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
