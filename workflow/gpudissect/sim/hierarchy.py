"""One load through the whole hierarchy: the composition rules and their Python reference model.

A load on a path walks the caches of that path (nearest first) and the TLB levels; its latency is

    hit latency of the first cache that hits, on this path (``path_latency_cycles``, else
    ``hit_latency_cycles``), else DRAM
    + the miss penalty of every TLB level that missed (nearest first; a hit stops the walk)
    + the window switch penalty when every level missed and the page lies outside the active
      page-table window (tlb.py)
    + noise;
    a hit in the cache an ``l2_slices`` block names costs the latency of its slice for the SM
    that loads instead (l2_slices.py).

The order of the walk (it matters for the replacement state and the random streams):

1. The caches before the first *translated* cache of the path (``translated: false``: a hit
   there needs no translation - the Maxwell unified L1, TPDS Sec. 5.2(2)). A hit ends the load:
   no TLB is looked up and no penalty is paid.
2. Translation: the TLB levels, nearest first, until one hits (every load that gets here is
   translated, including one that goes on to DRAM).
3. The remaining caches, on the physical address (the experiment's page map, tlb.py; without
   one the address itself). A cache with ``miss_on_tlb_miss: true`` misses whenever the nearest TLB
   level missed in step 2, even if it holds the line: it is looked up and filled as on a miss,
   and the next level serves the load (Fermi L1: an L1-TLB miss costs an L1-cached load as much
   as an L2-cached one, NPC Table 3 patterns 2-3 with L1 enabled, 404/488 against 398/482
   with L1 disabled; TPDS Sec. 5.2(3)).

A cache with ``instances_per_sm`` N > 1 is N independent copies (lines and replacement state);
a load of warp w looks up the copy ``CacheSpec.instance_of(w)`` and no other (cache.py).

``MemoryHierarchy`` below implements these rules on the reference models of cache.py and
tlb.py; the numba engine (``_kernels.load``) implements the same ones, and tests check that
both give the same latencies, load for load, for the same seed.
"""

from __future__ import annotations

from .cache import Cache
from .l2_slices import copy_stores
from .noise import Noise, Rng
from .profile import DeviceProfile
from .tlb import PageMap, Tlb


class MemoryHierarchy:
    """Python reference model of a simulated GPU's loads (slow; for tests and for reading)."""

    def __init__(
        self, profile: DeviceProfile, *, seed: int, page_map: PageMap | None = None
    ) -> None:
        self.profile = profile
        self.page_map = page_map
        self.rng = Rng(seed=seed)  # one replacement stream for every structure, as the engine
        self.caches = {
            name: [Cache(spec, rng=self.rng) for _ in range(spec.instances_per_sm)]
            for name, spec in profile.caches.items()
        }
        self.copies = [
            Cache(spec, rng=self.rng) for spec in copy_stores(profile.l2_slices, profile.caches)
        ]
        self.tlb = Tlb(profile.tlbs, rng=self.rng, page_map=page_map) if profile.tlbs else None
        self.noise = Noise(profile.noise, seed=seed)

    def reset(self) -> None:
        """Cold caches and TLBs, no active window, random streams from the seed."""
        for copies in self.caches.values():
            for cache in copies:
                cache.reset()
        for cache in self.copies:
            cache.reset()
        if self.tlb is not None:
            self.tlb.reset()
        self.rng.reset()
        self.noise.reset()

    def load(self, path: str, address_bytes: int, *, warp: int = 0, sm: int = 0) -> int:
        """Latency in cycles of one load of ``address_bytes`` on ``path`` by warp ``warp`` of
        SM ``sm``."""
        sliced = self.profile.l2_slices
        specs = self.profile.path_caches(path)
        latency = self.profile.dram.latency_cycles
        penalty, nearest_tlb_missed, translated = 0, False, self.tlb is None
        physical = self.page_map.physical(address_bytes) if self.page_map else address_bytes
        for k, spec in enumerate(specs):
            if not translated and spec.translated:
                penalty, nearest_tlb_missed = self._translate(address_bytes)
                translated = True
            # the caches before the first translated one are virtually addressed
            before = all(not s.translated for s in specs[: k + 1])
            copy = spec.instance_of(warp, max_warps_per_sm=self.profile.max_warps_per_sm)
            near = self.copies and sliced is not None and spec.name == sliced.cache
            if near:
                base = spec.hit_latency_on(path)
                k = sliced.slice_of(physical)
                if self.copies[sliced.sm_partition[sm]].access(physical).hit:
                    latency = int(sliced.near_cycles(base_cycles=base, sm=sm)[k])
                    break
                if sliced.near_copies_home_lines:  # the stores are the L2
                    home = sliced.slice_partition[k]
                    if home != sliced.sm_partition[sm]:
                        far = int(sliced.near_cycles(base_cycles=base, sm=sm)[k])
                        far += sliced.far_cycles
                        hit = self.copies[home].access(physical).hit
                        latency = far if hit else latency + sliced.far_cycles
                    break
            hit = self.caches[spec.name][copy].access(address_bytes if before else physical).hit
            if near and not hit and sliced.slice_partition[k] != sliced.sm_partition[sm]:
                self.copies[sliced.slice_partition[k]].access(physical)
            if near and hit:
                latency = int(sliced.near_cycles(base_cycles=base, sm=sm)[k]) + sliced.far_cycles
                break
            if hit and not (spec.miss_on_tlb_miss and nearest_tlb_missed):
                latency = spec.hit_latency_on(path)
                if sliced is not None and spec.name == sliced.cache:
                    latency = int(
                        sliced.hit_cycles(base_cycles=latency, sm=sm)[sliced.slice_of(physical)]
                    )
                break
        else:
            if not translated:  # every cache missed before translation: DRAM needs it
                penalty, _ = self._translate(address_bytes)
        return max(latency + penalty + self.noise.draw(), 0)

    def _translate(self, address_bytes: int) -> tuple[int, bool]:
        """(penalty cycles, whether the nearest TLB level missed)."""
        t = self.tlb.translate(address_bytes)
        return t.penalty_cycles, t.hit_level != self.profile.tlbs.levels[0].name
