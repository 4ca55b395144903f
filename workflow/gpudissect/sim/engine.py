"""``SimGPU``: one simulated GPU that runs loads and P-chases through its memory hierarchy.

Every cache and TLB level of the profile becomes one structure in flat numpy arrays (layout in
``_kernels``); a load walks the TLB levels and the caches of its path in compiled code, by the
rules of ``hierarchy.py``. A cache named by several paths (e.g. Maxwell's unified L1/texture
cache) is one structure, shared; its hit latency may differ per path. A cache with
``instances_per_sm`` N is N structures side by side (copy k at structure first + k); a load
picks its warp's copy (``CacheSpec.instance_of``). A profile with an ``l2_slices`` block gives
the sliced cache's hits a latency by slice and by the SM that loads (``sm``; sim/l2_slices.py).
"""

from __future__ import annotations

import numpy as np

from ..exceptions import ProfileError
from . import _kernels as K
from .cache import INSTANCE_SELECT, CacheSpec
from .indexing import make_index
from .l2_slices import copy_stores
from .noise import seed_states
from .policies import POLICY_CODES
from .profile import LOAD_PATHS, DeviceProfile
from .tlb import PageMap


def _pack(specs: list[CacheSpec], latencies: list[int]) -> dict[str, np.ndarray]:
    """Parameter and state arrays of the structures ``specs`` (structure id = list position)."""
    par = np.zeros((len(specs), K.NCOL), dtype=np.int64)
    set_rows, idx, wcum, line_count = [], [], [], 0
    for s, spec in enumerate(specs):
        compiled = make_index(spec.index, sets=spec.sets, line_bytes=spec.line_bytes).compiled()
        lshift = spec.line_bytes.bit_length() - 1
        par[s, K.C_NSETS] = spec.sets
        par[s, K.C_SETOFF] = len(set_rows)
        par[s, K.C_LSHIFT] = lshift
        par[s, K.C_SSHIFT] = spec.sector.bit_length() - 1
        par[s, K.C_IKIND] = compiled.kind
        par[s, K.C_ISHIFT] = compiled.shift
        par[s, K.C_IOFF] = len(idx)
        par[s, K.C_ILEN] = len(compiled.data)
        par[s, K.C_IPERIOD] = compiled.period_bytes
        par[s, K.C_POLICY] = POLICY_CODES[spec.policy.kind]
        par[s, K.C_WOFF] = len(wcum)
        par[s, K.C_LAT] = latencies[s]
        par[s, K.C_PREFETCH] = spec.prefetch_lines
        par[s, K.C_DATA] = spec.data_lines or 0
        modulus = spec.sets if compiled.kind == K.MODULO else compiled.period_bytes
        par[s, K.C_IPOW2] = modulus if modulus > 0 and modulus & (modulus - 1) == 0 else 0
        par[s, K.C_NOTE] = _sector_fixes_set(compiled, spec.sector)
        idx.extend(int(x) for x in compiled.data)
        wcum.extend(np.cumsum(spec.policy.weights or [1.0]).tolist())
        for ways in spec.set_ways:
            set_rows.append((line_count, ways, 0, 0))
            line_count += ways
    return {
        "par": par,
        "sets": np.array(set_rows, dtype=np.int64),
        "idx": np.array(idx or [0], dtype=np.int64),
        "wcum": np.array(wcum, dtype=np.float64),
        "lines": np.zeros((3, line_count), dtype=np.int64),
        "clk": np.zeros(len(specs), dtype=np.int64),
    }


def _sector_fixes_set(compiled, sector_bytes: int) -> int:
    """1 when the index reads no address bit below the sector (every byte of a sector lies in
    one set), else 0."""
    below = sector_bytes - 1
    if compiled.kind == K.MASKS:
        return int(all(int(m) & below == 0 for m in compiled.data))
    if compiled.kind == K.TABLE:
        return int(
            compiled.shift >= sector_bytes.bit_length() - 1 and not compiled.period_bytes & below
        )
    return int(compiled.shift >= sector_bytes.bit_length() - 1)


def _addresses(addresses_bytes: np.ndarray) -> np.ndarray:
    """Byte addresses as a contiguous 1-D int64 array; refuses other shapes and negatives."""
    addrs = np.ascontiguousarray(addresses_bytes, dtype=np.int64)
    if addrs.ndim != 1:
        raise ValueError(f"addresses_bytes must be 1-D, got shape {addrs.shape}")
    if addrs.size and addrs.min() < 0:
        raise ValueError("addresses_bytes must not be negative")
    return addrs


def _slice_array(profile: DeviceProfile, path: str, sm: int, *, copies: int = -1) -> np.ndarray:
    """The slice array (``_kernels`` SL_* layout) of loads on ``path`` by SM ``sm``; ``copies``
    is the structure of partition 0's near-copy store, where the L2 keeps near copies."""
    slc = np.full(K.SL_HEAD, -1, dtype=np.int64)
    spec = profile.l2_slices
    if spec is None or spec.cache not in profile.paths[path]:
        if not 0 <= sm < profile.sms:
            raise ValueError(f"sm must be 0..{profile.sms - 1}, got {sm}")
        return slc
    cache = profile.caches[spec.cache]
    compiled = make_index(spec.index, sets=spec.slices, line_bytes=cache.line_bytes).compiled()
    slc[K.SL_ROW] = profile.paths[path].index(spec.cache)
    slc[K.SL_KIND] = compiled.kind
    slc[K.SL_SHIFT] = compiled.shift
    slc[K.SL_PERIOD] = compiled.period_bytes
    slc[K.SL_NSLICES] = spec.slices
    slc[K.SL_NDATA] = len(compiled.data)
    base = cache.hit_latency_on(path)
    latency = spec.hit_cycles(base_cycles=base, sm=sm)
    if spec.near_copies_bytes is None:
        return np.concatenate([slc, np.asarray(compiled.data, np.int64), latency])
    # with near copies: a hit of the cache itself is far from every slice, a copy's is near;
    # then the copy store of each slice's (home) partition
    near = spec.near_cycles(base_cycles=base, sm=sm)
    slc[K.SL_COPY] = copies + spec.sm_partition[sm]
    slc[K.SL_HOME_LINES] = int(spec.near_copies_home_lines)
    home = copies + np.asarray(spec.slice_partition, dtype=np.int64)
    return np.concatenate(
        [slc, np.asarray(compiled.data, np.int64), near + spec.far_cycles, near, home]
    )


def _warp(warp: int) -> int:
    if warp < 0:
        raise ValueError(f"warp must be >= 0, got {warp}")
    return int(warp)


class SimGPU:
    """A simulated GPU built from a ``DeviceProfile``; ``seed`` fixes replacement and noise.

    State (cache and TLB contents, page-table window, random streams) persists across calls
    until ``reset()``.
    """

    def __init__(self, profile: DeviceProfile, *, seed: int) -> None:
        self.profile, self.seed = profile, int(seed)
        specs: list[CacheSpec] = []
        self._first: dict[str, int] = {}  # cache name -> structure of its copy 0
        names: list[str] = []
        for name, spec in profile.caches.items():
            self._first[name] = len(specs)
            specs += [spec] * spec.instances_per_sm
            names += [name] + [f"{name}[{k}]" for k in range(1, spec.instances_per_sm)]
        latencies = [c.hit_latency_cycles for c in specs]
        n_caches = len(specs)
        tlb_levels = profile.tlbs.levels if profile.tlbs else ()
        specs += [level.as_cache_spec() for level in tlb_levels]
        latencies += [level.miss_penalty_cycles for level in tlb_levels]
        # an L2 that keeps near copies: one copy store per partition, after the TLB levels
        self._copies = len(specs)
        copies = copy_stores(profile.l2_slices, profile.caches)
        specs += copies
        latencies += [0] * len(copies)
        self._arrays = _pack(specs, latencies)
        for i, level in enumerate(tlb_levels):
            self._arrays["par"][n_caches + i, K.C_COALESCE] = level.coalesce_pages.bit_length() - 1
        self.structure_names = (
            tuple(names) + tuple(level.name for level in tlb_levels) + tuple(c.name for c in copies)
        )
        self._paths = {path: self._path_array(path) for path in profile.paths}
        self._slices: dict[tuple[str, int], np.ndarray] = {}
        self._tlbs = np.arange(n_caches, n_caches + len(tlb_levels), dtype=np.int64)
        tlbs, noise = profile.tlbs, profile.noise
        self._cfg_i = np.zeros(K.NCFG_I, dtype=np.int64)
        self._cfg_i[K.I_MAXWARPS] = profile.max_warps_per_sm
        self._cfg_i[K.I_DRAM] = profile.dram.latency_cycles
        self._cfg_i[K.I_WINDOW] = (tlbs.page_table_window_bytes or 0) if tlbs else 0
        self._cfg_i[K.I_SWITCH] = tlbs.window_switch_penalty_cycles if tlbs else 0
        self._cfg_i[K.I_OUTLIER] = noise.outlier_cycles
        self._cfg_f = np.array([noise.jitter_cycles, noise.outlier_probability], dtype=np.float64)
        self._noise = np.empty(K.NOISE_BLOCK, dtype=np.int64)  # a block's noise, drawn ahead
        self._work = np.empty((5, K.NOISE_BLOCK), dtype=np.float64)
        # per structure, the sector its last lookup left valid (``_kernels.lookup_noted``)
        self._memo = np.empty((len(specs), 4), dtype=np.int64)
        self.set_page_map(None)
        self.reset()

    def set_page_map(self, page_map: PageMap | None) -> None:
        """The physical memory behind the virtual addresses from now on (tlb.py ``PageMap``;
        None: physical = virtual). Caches and TLBs keep their contents."""
        if page_map is None:
            self._vmap = self._vrun = np.zeros(1, dtype=np.int64)
            self._cfg_i[K.I_MAPSHIFT] = 0
            return
        self._vmap = np.ascontiguousarray(page_map.frames, dtype=np.int64)
        self._vrun = np.ascontiguousarray(page_map.aligned_runs, dtype=np.int64)
        self._cfg_i[K.I_MAPSHIFT] = page_map.shift

    def _path_array(self, path: str) -> np.ndarray:
        """Rows (structure of copy 0, hit latency on ``path``, flags, copies, copy mapping) of
        the caches of ``path``."""
        rows = np.zeros((len(self.profile.paths[path]), K.PCOL), dtype=np.int64)
        for c, spec in enumerate(self.profile.path_caches(path)):
            rows[c, K.P_STRUCT] = self._first[spec.name]
            rows[c, K.P_NINST] = spec.instances_per_sm
            rows[c, K.P_ISEL] = INSTANCE_SELECT[spec.instance_select]
            rows[c, K.P_LAT] = spec.hit_latency_on(path)
            rows[c, K.P_FLAGS] = (0 if spec.translated else K.UNTRANSLATED) | (
                K.MISS_ON_TLB_MISS if spec.miss_on_tlb_miss else 0
            )
        return rows

    @property
    def paths(self) -> tuple[str, ...]:
        """The load paths this GPU has."""
        return tuple(self._paths)

    def reset(self) -> None:
        """Cold caches and TLBs, no active page-table window, random streams from the seed."""
        a = self._arrays
        a["lines"][0] = -1
        a["lines"][1:] = 0
        a["sets"][:, 2:] = 0
        a["clk"][:] = 0
        a["par"][:, K.C_VALID] = 0
        self._state = np.array([-1], dtype=np.int64)  # active page-table window
        self._rng = seed_states(self.seed)
        self._spare = np.zeros(3, dtype=np.float64)  # pending normal variate of the noise

    def _path(self, path: str) -> np.ndarray:
        if path not in self._paths:
            kind = "has no" if path in LOAD_PATHS else "knows no"
            raise ProfileError(
                f"profile {self.profile.name!r} ({self.profile.source}) {kind} load path "
                f"{path!r}; its paths: {', '.join(self._paths) or 'none'} (paths: "
                f"{', '.join(LOAD_PATHS)}); skip experiments on a path the GPU lacks"
            )
        return self._paths[path]

    def _slice(self, path: str, sm: int) -> np.ndarray:
        key = (path, int(sm))
        if key not in self._slices:
            self._slices[key] = _slice_array(self.profile, path, int(sm), copies=self._copies)
        return self._slices[key]

    def _args(self) -> tuple:
        a = self._arrays
        return (
            a["par"],
            a["sets"],
            a["idx"],
            a["lines"],
            a["wcum"],
            a["clk"],
            self._rng,
            self._spare,
            self._noise,
            self._work,
            self._state,
            self._cfg_i,
            self._cfg_f,
            self._vmap,
            self._vrun,
        )

    def fill(self, cache: str, addresses_bytes: np.ndarray, *, instance: int = 0) -> int:
        """Bring the lines of ``addresses_bytes`` into copy ``instance`` of ``cache`` alone, in
        order, as a copy engine writing through the L2 does: no TLB lookup, no other cache, no
        latency. Returns how many of them missed."""
        if cache not in self.profile.caches:
            raise ProfileError(
                f"profile {self.profile.name!r} ({self.profile.source}) has no cache {cache!r}; "
                f"its caches: {', '.join(self.profile.caches)}"
            )
        addrs = _addresses(addresses_bytes)
        a = self._arrays
        copies = self.profile.caches[cache].instances_per_sm
        if not 0 <= instance < copies:
            raise ValueError(f"cache {cache!r} has copies 0..{copies - 1}, not {instance}")
        s = self._first[cache] + instance
        return int(
            K.run_fill(
                addrs, s, a["par"], a["sets"], a["idx"], a["lines"], a["wcum"], a["clk"], self._rng
            )
        )

    def load_sequence(
        self, path: str, addresses_bytes: np.ndarray, *, warp: int = 0, sm: int = 0
    ) -> np.ndarray:
        """Latencies (int64 cycles) of dependent loads of ``addresses_bytes`` by one thread of
        warp ``warp`` on SM ``sm``."""
        p = self._path(path)
        addrs = _addresses(addresses_bytes)
        out = np.empty(addrs.shape[0], dtype=np.int64)
        slc = self._slice(path, sm)
        K.run_sequence(
            addrs, out, np.int64(_warp(warp)), p, self._tlbs, *self._args(), slc, self._memo
        )
        return out

    def chase(
        self,
        path: str,
        chain: np.ndarray,
        *,
        element_bytes: int,
        base_address_bytes: int,
        start_index: int,
        warmup_steps: int,
        record_steps: int,
        warp: int = 0,
        sm: int = 0,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The fine-grained P-chase (TPDS Listing 3) on ``path`` by one thread of warp ``warp``.

        ``j = start_index``; ``warmup_steps`` times ``j = chain[j]`` (loads not recorded); then
        ``record_steps`` times: load ``base_address_bytes + j * element_bytes``, ``j =
        chain[j]``, record the load's latency and the loaded ``j``. Returns ``(latencies_cycles,
        indices)``, both uint32 of length ``record_steps``.
        """
        p = self._path(path)
        chain = np.ascontiguousarray(chain, dtype=np.uint32)
        n = chain.shape[0]
        if chain.ndim != 1 or n == 0:
            raise ValueError(f"chain must be a non-empty 1-D array, got shape {chain.shape}")
        if int(chain.max()) >= n or not 0 <= start_index < n:
            raise ValueError(f"chain values and start_index must be indices into the chain (< {n})")
        if element_bytes <= 0 or base_address_bytes < 0 or min(warmup_steps, record_steps) < 0:
            raise ValueError("element_bytes must be > 0; base address and step counts >= 0")
        lat = np.empty(record_steps, dtype=np.uint32)
        ind = np.empty(record_steps, dtype=np.uint32)
        K.run_chase(
            chain,
            np.int64(element_bytes),
            np.int64(base_address_bytes),
            np.int64(start_index),
            np.int64(warmup_steps),
            np.int64(_warp(warp)),
            lat,
            ind,
            p,
            self._tlbs,
            *self._args(),
            self._slice(path, sm),
            self._memo,
        )
        return lat, ind
