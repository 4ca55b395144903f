"""A set-associative cache level: the data (``CacheSpec``) and a Python reference model.

Rules (the numba engine implements the same ones, see ``_kernels.lookup``):

- a line is ``line_bytes`` long and holds ``line_bytes / sector_bytes`` sectors; a miss fills
  only the sector that was asked for, so a hit on the line whose sector is absent is a miss
  (it costs the next level's latency) that fills that sector and counts as a use of the line;
- sets may have different numbers of ways (``set_ways``); the index function picks the set;
- on a line miss the first invalid way is filled, else the policy's victim is replaced;
- on any miss, ``prefetch_lines`` following lines are brought in whole (without counting as a
  use when already present).

How a cache takes part in a whole load (address translation, the latency it returns on each
path) is data of the spec too; the rules are in ``hierarchy.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .indexing import IndexSpec, make_index
from .policies import PolicySpec, make_policy

# How warps reach the copies of a cache with several instances per SM:
# - warp_modulo (default): warp w uses copy w mod N. Each warp is assigned statically to one
#   warp scheduler, round robin (CUDA C Programming Guide, ch. K; Thesis Sec. 4.6), so copies
#   that belong to scheduler partitions repeat every N warps (the thesis saw the pattern of
#   its Kepler and Maxwell texture caches repeat after 4 and 2 warps, Figs. 4.21, 4.23).
# - warp_block: warp w uses copy floor(w N / max_warps_per_sm): contiguous ranges of warps
#   share a copy (a mapping no paper reports; it lets tests check that the analysis does not
#   assume the modulo pattern).
INSTANCE_SELECT = {"warp_modulo": 0, "warp_block": 1}


def instance_of(warp: int, *, instances: int, select: int, max_warps_per_sm: int) -> int:
    """Copy used by warp ``warp`` under mapping code ``select`` (the numba engine has the same
    function, ``_kernels.instance_of``)."""
    if instances <= 1:
        return 0
    if select == INSTANCE_SELECT["warp_modulo"]:
        return warp % instances
    return (warp * instances // max_warps_per_sm) % instances


@dataclass(frozen=True)
class CacheSpec:
    """One entry of the profile's ``caches:`` mapping (``name`` is its key)."""

    name: str
    size_bytes: int
    line_bytes: int
    set_ways: tuple[int, ...]
    hit_latency_cycles: int
    sector_bytes: int | None = None  # None: one sector per line
    index: IndexSpec = field(default_factory=IndexSpec)
    policy: PolicySpec = field(default_factory=PolicySpec)
    prefetch_lines: int = 0
    # a hit needs no address translation (virtually addressed; TPDS 5.2(2), Maxwell L1)
    translated: bool = True
    # a miss of the nearest TLB level turns a hit here into a miss (Fermi L1, NPC Table 3)
    miss_on_tlb_miss: bool = False
    # hit latency through particular load paths, (path, cycles) pairs; others: hit_latency
    path_latency_cycles: tuple[tuple[str, int], ...] = ()
    # physical copies of this cache in one SM (Thesis Sec. 4.6), each with its own lines and
    # replacement state; a load of warp w uses copy `instance_of(w)` (see INSTANCE_SELECT)
    instances_per_sm: int = 1
    instance_select: str = "warp_modulo"
    # the bytes the data array holds where fewer than its sets and ways index (None: all): a
    # fill into a free way when they are all taken drops the least recently used line of the
    # whole cache (Hopper's L1 beside its shared-memory carveout)
    data_bytes: int | None = None
    # what a driver reports as the size (None: size_bytes); sweep ranges only (DeviceFacts)
    reported_size_bytes: int | None = None

    @property
    def data_lines(self) -> int | None:
        return None if self.data_bytes is None else self.data_bytes // self.line_bytes

    def instance_of(self, warp: int, *, max_warps_per_sm: int) -> int:
        """The copy a load of warp ``warp`` (of its block, 0-based) uses."""
        return instance_of(
            warp,
            instances=self.instances_per_sm,
            select=INSTANCE_SELECT[self.instance_select],
            max_warps_per_sm=max_warps_per_sm,
        )

    @property
    def sets(self) -> int:
        return len(self.set_ways)

    @property
    def lines(self) -> int:
        return sum(self.set_ways)

    @property
    def sector(self) -> int:
        """Sector size in bytes (``line_bytes`` when the profile gives none)."""
        return self.sector_bytes or self.line_bytes

    def hit_latency_on(self, path: str) -> int:
        """Latency of a hit here for a load on ``path``."""
        return dict(self.path_latency_cycles).get(path, self.hit_latency_cycles)


@dataclass(frozen=True)
class AccessResult:
    """What one access did: ``hit``; ``sector_miss`` when the line was there but not the sector;
    ``set`` and ``way`` where the line is now; ``evicted`` the line number it replaced (or None).
    """

    hit: bool
    sector_miss: bool
    set: int
    way: int
    evicted: int | None


class Cache:
    """Python reference model of one cache (slow; for tests and for reading the rules)."""

    def __init__(self, spec: CacheSpec, *, rng=None) -> None:
        self.spec = spec
        self.index = make_index(spec.index, sets=spec.sets, line_bytes=spec.line_bytes)
        self.sectors_per_line = spec.line_bytes // spec.sector
        self.policies = [make_policy(spec.policy, ways=w, rng=rng) for w in spec.set_ways]
        self.reset()

    def reset(self) -> None:
        """Cold cache: every way invalid, every policy forgets."""
        self.tags = [[None] * w for w in self.spec.set_ways]
        self.valid_sectors = [[0] * w for w in self.spec.set_ways]
        self.used: dict[tuple[int, int], int] = {}  # (set, way) -> last use, for data_bytes
        self.clock = 0
        for p in self.policies:
            p.reset()

    def _fill(self, address_bytes: int, sector_mask: int, *, use: bool) -> AccessResult:
        line = address_bytes // self.spec.line_bytes
        s = self.index.set_of(address_bytes)
        tags, valid, policy = self.tags[s], self.valid_sectors[s], self.policies[s]
        if line in tags:
            way = tags.index(line)
            if use:
                policy.touch(way)
                self._stamp(s, way)
            if valid[way] & sector_mask == sector_mask:
                return AccessResult(True, False, s, way, None)
            valid[way] |= sector_mask
            return AccessResult(False, True, s, way, None)
        way = tags.index(None) if None in tags else policy.victim()
        if tags[way] is None and self.spec.data_lines is not None:
            self._make_room()
        evicted = tags[way]
        tags[way], valid[way] = line, sector_mask
        policy.insert(way)
        self._stamp(s, way)
        return AccessResult(False, False, s, way, evicted)

    def _stamp(self, s: int, way: int) -> None:
        self.clock += 1
        self.used[(s, way)] = self.clock

    def _make_room(self) -> None:
        """All `data_lines` lines taken: drop the least recently used one of the cache."""
        held = [(t, sw) for sw, t in self.used.items() if self.tags[sw[0]][sw[1]] is not None]
        if len(held) < self.spec.data_lines:
            return
        s, way = min(held)[1]
        self.tags[s][way], self.valid_sectors[s][way] = None, 0
        del self.used[(s, way)]

    def access(self, address_bytes: int) -> AccessResult:
        """Load the sector holding ``address_bytes``; fills (and prefetches) on a miss."""
        sector = (address_bytes % self.spec.line_bytes) // self.spec.sector
        result = self._fill(address_bytes, 1 << sector, use=True)
        if not result.hit:
            full = (1 << self.sectors_per_line) - 1
            line = address_bytes // self.spec.line_bytes
            for k in range(1, self.spec.prefetch_lines + 1):
                self._fill((line + k) * self.spec.line_bytes, full, use=False)
        return result

    def contains(self, address_bytes: int) -> bool:
        """Whether the line of ``address_bytes`` is cached (any sector); changes nothing."""
        line = address_bytes // self.spec.line_bytes
        return line in self.tags[self.index.set_of(address_bytes)]
