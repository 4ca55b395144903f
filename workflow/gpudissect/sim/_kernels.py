"""Numba kernels of the simulator: the hot path of every load.

All set-associative structures of one simulated GPU (caches and TLB levels) live in a few flat
arrays, so one compiled function serves every structure:

- ``par[s, C_*]`` (int64): the parameters of structure ``s`` (sets, line shift, index, policy...)
- ``sets[row]`` = (first line row, ways, tree-PLRU bits, way used last); the rows of structure
  ``s`` start at ``par[s, C_SETOFF]``, so unequal sets are just rows with different ``ways``
- ``lines[:, i]`` = (line number or -1 when invalid, policy stamp, bit mask of valid sectors):
  one row per field, so that the tags of a set, which every lookup scans, lie side by side
- ``idx`` (int64): XOR masks and set tables; ``wcum`` (float64): cumulative way weights
- ``vmap[v]``, ``vrun[v]`` (int64): the physical chunk behind virtual chunk ``v`` of the
  experiment's page map and the log2 of its aligned contiguous run (tlb.py ``PageMap``);
  ``cfg_i[I_MAPSHIFT]`` = log2 of the chunk, 0 when there is no map (physical = virtual)
- ``clk[s]``: the stamp counter of structure ``s``; ``rng`` (uint64[2]): xorshift64* states,
  ``rng[0]`` for replacement decisions and ``rng[1]`` for timing noise, so turning noise off
  does not change which lines are replaced; ``spare`` (float64[3]) the pending normal variate
  (``_noise_kernels``); ``noise`` (int64[NOISE_BLOCK]) and ``work`` (float64[5, NOISE_BLOCK])
  room for drawing the noise of the next block of loads; ``memo[s]`` (int64[4]): the sector the
  last lookup of structure ``s`` left valid, where it was (``lookup_noted``; forgotten at the
  start of every ``run_sequence`` and ``run_chase``).

Every function is compiled with ``_nrt=False``: none allocates, and without the runtime's
reference counting the array arguments of inner calls cost nothing (with it, a load took
~5x longer). Loops over the ways of a set index with unsigned integers: numba tests a signed
index for wrap-around, which keeps the compiler from vectorising the loop (``_scan``).

The pure-Python reference models (cache.py, policies.py, indexing.py, tlb.py, hierarchy.py)
implement the same rules; tests check that both give identical hit/miss sequences and latencies.
"""

from __future__ import annotations

from functools import partial

import numpy as np
from numba import njit

from ._noise_kernels import noise_block, rng_uniform

# every kernel: cached, without the runtime, with numpy's error model (no test for a zero
# divisor: sets, copies, warps and periods are >= 1 by the profile's validation)
kernel = partial(njit, cache=True, _nrt=False, error_model="numpy")

# columns of ``par``
C_NSETS, C_SETOFF, C_LSHIFT, C_SSHIFT = 0, 1, 2, 3
C_IKIND, C_ISHIFT, C_IOFF, C_ILEN, C_IPERIOD = 4, 5, 6, 7, 8
C_POLICY, C_WOFF, C_LAT, C_PREFETCH = 9, 10, 11, 12
C_COALESCE = 13  # TLB levels: log2 of the pages one entry covers when physically contiguous
# a cache whose data array holds fewer lines than its sets and ways index (``data_bytes``):
# the lines it may hold (0: every way) and how many are valid now (state, reset with the lines)
C_DATA, C_VALID = 14, 15
# the sets (MODULO) or the period (TABLE) when that is a power of two, else 0: addresses are
# never negative, so ``x % n`` is then ``x & (n - 1)``, without a division
C_IPOW2 = 16
# 1 where the set of an address follows from its sector (the index reads no bit below the
# sector): then a note of the sector a lookup left valid stands for its set too (lookup_noted)
C_NOTE = 17
NCOL = 18
# index kinds (see indexing.py) and policy codes (see policies.py)
MODULO, MASKS, TABLE = 0, 1, 2
LRU, FIFO, RANDOM, PLRU, WEIGHTED, SRRIP = 0, 1, 2, 3, 4, 5
RRPV_MAX = 3  # SRRIP: 2-bit re-reference prediction values
HIT, MISS = 0, 1
# columns of a path array (one row per cache of the path, nearest first) and its flag bits;
# P_STRUCT is the structure of copy 0 of the cache, its P_NINST copies follow it (cache.py)
P_STRUCT, P_LAT, P_FLAGS, P_NINST, P_ISEL = 0, 1, 2, 3, 4
PCOL = 5
UNTRANSLATED, MISS_ON_TLB_MISS = 1, 2
# columns of the scalar configuration arrays of a device
I_DRAM, I_WINDOW, I_SWITCH, I_OUTLIER, I_MAXWARPS, I_MAPSHIFT = 0, 1, 2, 3, 4, 5
NCFG_I = 6
COALESCED_KEY_BIT = np.int64(1) << np.int64(58)  # tlb.py
F_JITTER, F_OUTLIER_P = 0, 1
NOISE_BLOCK = 256  # loads whose noise is drawn ahead, in one go
# the slice array of a sliced L2 (sim/l2_slices.py) for one path and SM: the path row of the
# sliced cache (-1: none), the slice function's kind, shift, period and slice count, the length
# of its data, the structure of the SM's partition's near-copy store (-1: no copies); then the
# data (masks or table) and the hit latency of each slice; with copies also each slice's near
# latency and the copy store of its (home) partition. SL_HOME_LINES: 1 where the stores hold
# their partitions' home lines too (the stores are the L2: l2_slices.py)
SL_ROW, SL_KIND, SL_SHIFT, SL_PERIOD, SL_NSLICES, SL_NDATA, SL_COPY = 0, 1, 2, 3, 4, 5, 6
SL_HOME_LINES = 7
SL_HEAD = 8


@kernel(inline="always")
def _parity(x):
    x ^= x >> 32
    x ^= x >> 16
    x ^= x >> 8
    x ^= x >> 4
    x ^= x >> 2
    x ^= x >> 1
    return x & 1


@kernel(inline="always")
def set_of(addr, par, s, idx):
    """Set number of byte address ``addr`` in structure ``s``."""
    us = np.uint64(s)
    kind, pow2 = par[us, C_IKIND], par[us, C_IPOW2]
    if kind == MODULO:
        if pow2 > 0:
            return (addr >> par[us, C_ISHIFT]) & (pow2 - 1)
        return (addr >> par[s, C_ISHIFT]) % par[s, C_NSETS]
    off = par[s, C_IOFF]
    if kind == MASKS:
        r = 0
        for k in range(par[s, C_ILEN]):
            r |= _parity(addr & idx[off + k]) << k
        return r
    if pow2 > 0:
        return idx[off + ((addr & (pow2 - 1)) >> par[s, C_ISHIFT])]
    return idx[off + ((addr % par[s, C_IPERIOD]) >> par[s, C_ISHIFT])]


@kernel(inline="always")
def slice_of(addr, slc):
    """The slice of byte address ``addr`` (``slc``: SL_* layout)."""
    kind, n, nd = slc[SL_KIND], slc[SL_NSLICES], slc[SL_NDATA]
    if kind == MODULO:
        k = (addr >> slc[SL_SHIFT]) % n
    elif kind == MASKS:
        k = 0
        for b in range(nd):
            k |= _parity(addr & slc[SL_HEAD + b]) << b
    else:
        k = slc[SL_HEAD + ((addr % slc[SL_PERIOD]) >> slc[SL_SHIFT])]
    return k


@kernel(inline="always")
def slice_latency(addr, slc):
    """The hit latency of byte address ``addr`` in the sliced cache (``slc``: SL_* layout)."""
    return slc[SL_HEAD + slc[SL_NDATA] + slice_of(addr, slc)]


@kernel()
def near_copy(addr, slc, par, sets, idx, lines, wcum, clk, rng):
    """An L2 with near copies, before the cache itself: the SM's partition's store looked up
    (and filled on a miss); the near latency on a hit, else -1."""
    if lookup(addr, par, slc[SL_COPY], sets, idx, lines, wcum, clk, rng) == HIT:
        return slc[SL_HEAD + slc[SL_NDATA] + slc[SL_NSLICES] + slice_of(addr, slc)]
    return -1


@kernel()
def home_copy(addr, slc, par, sets, idx, lines, wcum, clk, rng):
    """A line that missed the L2 is placed in its home partition's store too."""
    home = slc[SL_HEAD + slc[SL_NDATA] + 2 * slc[SL_NSLICES] + slice_of(addr, slc)]
    if home != slc[SL_COPY]:
        lookup(addr, par, home, sets, idx, lines, wcum, clk, rng)


@kernel(inline="always")
def _plru_point_away(bits, ways, way):
    """Tree-PLRU: turn every node on the path to ``way`` to point at the other half."""
    node, lo, size = 1, 0, ways
    while node < ways:
        half = size >> 1
        if way < lo + half:
            bits |= np.int64(1) << node
            node = 2 * node
        else:
            bits &= ~(np.int64(1) << node)
            node = 2 * node + 1
            lo += half
        size = half
    return bits


@kernel(inline="always")
def _touch(par, s, sets, row, lines, i, way, clk, inserting):
    """Policy update on a hit (``inserting`` False) or on filling a way (True)."""
    us, ui = np.uint64(s), np.uint64(i)
    pol = par[us, C_POLICY]
    if pol == LRU or (pol == FIFO and inserting):
        clk[us] += 1
        lines[1, ui] = clk[us]
    elif pol == PLRU:
        sets[row, 2] = _plru_point_away(sets[row, 2], sets[row, 1], way)
    elif pol == SRRIP:
        # a fill is predicted a long re-reference interval, a hit a near one (hit priority)
        lines[1, i] = RRPV_MAX - 1 if inserting else 0


@kernel(inline="always")
def _victim(par, s, sets, row, lines, wcum, rng, free):
    """The way to replace: the first invalid way (``free``, -1: none), else the policy's
    choice."""
    if free >= 0:
        return free
    base, ways = sets[row, 0], sets[row, 1]
    pol = par[s, C_POLICY]
    if pol == LRU or pol == FIFO:
        best, stamp = 0, lines[1, base]
        for w in range(1, ways):
            if lines[1, base + w] < stamp:
                best, stamp = w, lines[1, base + w]
        return best
    if pol == SRRIP:
        # the first way predicted re-referenced most distantly; none: every line ages a step
        while True:
            for w in range(ways):
                if lines[1, base + w] >= RRPV_MAX:
                    return w
            for w in range(ways):
                lines[1, base + w] += 1
    if pol == RANDOM:
        return min(np.int64(rng_uniform(rng, 0) * ways), ways - 1)
    if pol == WEIGHTED:
        off = par[s, C_WOFF]
        u = rng_uniform(rng, 0) * wcum[off + ways - 1]
        # the first way whose cumulative weight exceeds u: the count of those that do not, as
        # the weights are >= 0 (a count has no branch to mispredict)
        way = 0
        for w in range(ways - 1):
            way += u >= wcum[off + w]
        return way
    bits, node = sets[row, 2], 1  # PLRU: follow the pointers down the tree
    while node < ways:
        node = 2 * node + ((bits >> node) & 1)
    return node - ways


@kernel()
def _make_room(par, s, sets, lines):
    """A line is about to fill an invalid way of structure ``s``, whose data array holds
    ``par[s, C_DATA]`` lines: when they are all taken, the least recently used valid line of the
    whole structure is dropped (LRU stamps; the profile allows lru only)."""
    if par[s, C_VALID] < par[s, C_DATA]:
        par[s, C_VALID] += 1
        return
    first = sets[par[s, C_SETOFF], 0]
    last_row = par[s, C_SETOFF] + par[s, C_NSETS] - 1
    stop = sets[last_row, 0] + sets[last_row, 1]
    best, stamp = -1, np.int64(0)
    for i in range(first, stop):
        if lines[0, i] != -1 and (best < 0 or lines[1, i] < stamp):
            best, stamp = i, lines[1, i]
    if best >= 0:
        lines[0, best] = -1
        lines[2, best] = 0


@kernel(inline="always")
def _scan(lines, base, ways, line):
    """(the way of the set at ``base`` that holds ``line``, -1: none; its first invalid way,
    ``ways``: none). Max and min reductions over unsigned indices, which the compiler
    vectorises (a signed index costs a wrap-around test per way)."""
    tags, ubase = lines[0], np.uint64(base)
    way, free = np.int64(-1), ways
    for w in range(ways):
        tag = tags[ubase + np.uint64(w)]
        way = max(way, w if tag == line else -1)
        free = min(free, w if tag == -1 else ways)
    return way, free


@kernel(inline="always")
def _fill(addr, par, s, sets, idx, lines, wcum, clk, rng, sector_mask, prefetch):
    """Bring the sectors in ``sector_mask`` of ``addr``'s line in; returns (HIT or MISS, the
    set's row, the line's slot, its way).

    A ``prefetch`` does not count as a use of a line that is already there.
    """
    us = np.uint64(s)
    line = addr >> par[us, C_LSHIFT]
    row = par[us, C_SETOFF] + set_of(addr, par, s, idx)
    urow = np.uint64(row)
    base, ways = sets[urow, 0], sets[urow, 1]
    # the line's way (-1: absent) and the first invalid way (``ways``: none); a line is in at
    # most one way of its set. The way used last is tried first (a P-chase mostly finds it
    # there); else every way is scanned without an early exit, which the CPU predicts well
    way, free = sets[urow, 3], ways
    if lines[0, np.uint64(base + way)] != line:
        way, free = _scan(lines, base, ways, line)
    result, inserting = MISS, way < 0
    if inserting:
        way = _victim(par, s, sets, row, lines, wcum, rng, free if free < ways else -1)
        ui = np.uint64(base + way)
        if par[us, C_DATA] > 0 and lines[0, ui] == -1:
            _make_room(par, s, sets, lines)
        lines[0, ui] = line
        lines[2, ui] = sector_mask
    else:
        ui = np.uint64(base + way)
        if lines[2, ui] & sector_mask == sector_mask:
            result = HIT
        lines[2, ui] |= sector_mask
    sets[urow, 3] = way
    if inserting or not prefetch:
        _touch(par, s, sets, row, lines, base + way, way, clk, inserting)
    return result, row, base + way, way


@kernel()
def _prefetch(addr, par, s, sets, idx, lines, wcum, clk, rng):
    """The ``par[s, C_PREFETCH]`` whole lines after ``addr``'s, brought in after its miss."""
    lshift, sshift = par[s, C_LSHIFT], par[s, C_SSHIFT]
    whole = (np.int64(1) << (np.int64(1) << (lshift - sshift))) - 1
    for k in range(1, par[s, C_PREFETCH] + 1):
        a = ((addr >> lshift) + k) << lshift
        _fill(a, par, s, sets, idx, lines, wcum, clk, rng, whole, True)


@kernel(inline="always")
def lookup(addr, par, s, sets, idx, lines, wcum, clk, rng):
    """One load of ``addr`` in structure ``s``: HIT, or MISS after filling its sector.

    A miss (line or sector) also prefetches the next ``par[s, C_PREFETCH]`` whole lines
    (``_prefetch``, out of line: few caches prefetch).
    """
    us = np.uint64(s)
    lshift, sshift = par[us, C_LSHIFT], par[us, C_SSHIFT]
    sector = (addr >> sshift) & ((np.int64(1) << (lshift - sshift)) - 1)
    mask = np.int64(1) << sector
    result = _fill(addr, par, s, sets, idx, lines, wcum, clk, rng, mask, False)[0]
    if result != HIT and par[us, C_PREFETCH] > 0:
        _prefetch(addr, par, s, sets, idx, lines, wcum, clk, rng)
    return result


@kernel(inline="always")
def lookup_noted(addr, par, s, sets, idx, lines, wcum, clk, rng, memo):
    """``lookup``, remembering in ``memo[s]`` = (sector number, set row, slot, way) the sector
    it leaves valid (where the sector fixes the set, ``C_NOTE``). A load of that sector again,
    while nothing else touched the structure, is a hit on that slot: what ``_fill`` would
    find (the line in the way its set used last, the sector valid), so only the policy's
    update of a hit is left to do. A prefetch may replace the line, so a lookup that
    prefetched leaves no note (-1: none)."""
    us = np.uint64(s)
    lshift, sshift = par[us, C_LSHIFT], par[us, C_SSHIFT]
    key = addr >> sshift
    if memo[us, 0] == key:  # only where par[s, C_NOTE]
        _touch(par, s, sets, memo[us, 1], lines, memo[us, 2], memo[us, 3], clk, False)
        return HIT
    mask = np.int64(1) << (key & ((np.int64(1) << (lshift - sshift)) - 1))
    result, row, i, way = _fill(addr, par, s, sets, idx, lines, wcum, clk, rng, mask, False)
    memo[us, 0] = key if par[us, C_NOTE] != 0 else -1
    memo[us, 1], memo[us, 2], memo[us, 3] = row, i, way
    if result != HIT and par[us, C_PREFETCH] > 0:
        memo[us, 0] = -1
        _prefetch(addr, par, s, sets, idx, lines, wcum, clk, rng)
    return result


@kernel(inline="always")
def _forget(memo):
    """No notes (a kernel's first load: other calls may have changed any structure since)."""
    for s in range(memo.shape[0]):
        memo[s, 0] = -1


@kernel(inline="always")
def instance_of(warp, instances, select, max_warps):
    """The copy of a cache that warp ``warp`` uses (cache.py: ``instance_of``)."""
    if instances <= 1:
        return 0
    if select == 0:
        return warp % instances
    return (warp * instances // max_warps) % instances


@kernel(inline="always")
def _window_penalty(addr, state, cfg_i):
    """Page walk: the switch penalty when ``addr`` lies outside the active page-table window
    (``state[0]``), which then moves there (TPDS Fig. 14, P6). The first walk after a reset
    activates its window for free."""
    window_bytes = cfg_i[I_WINDOW]
    if window_bytes <= 0:
        return 0
    window = addr // window_bytes
    if state[0] < 0:
        state[0] = window
    elif window != state[0]:
        state[0] = window
        return cfg_i[I_SWITCH]
    return 0


@kernel(inline="always")
def physical_of(addr, vmap, cfg_i):
    """The physical address of ``addr`` under the page map (itself without one, or past it)."""
    shift = cfg_i[I_MAPSHIFT]
    if shift <= 0:
        return addr
    v = addr >> shift
    if v >= vmap.shape[0]:
        return addr
    return (vmap[v] << shift) | (addr & ((np.int64(1) << shift) - 1))


@kernel(inline="always")
def entry_key(addr, par, s, vrun, cfg_i):
    """The address TLB level ``s`` looks up (tlb.py ``entry_key``): the address, or the block
    number of a coalesced entry when the block maps contiguously."""
    c = par[s, C_COALESCE]
    if c <= 0:
        return addr
    lshift = par[s, C_LSHIFT]
    shift = cfg_i[I_MAPSHIFT]
    if shift > 0:
        v = addr >> shift
        need = lshift + c - shift
        if need > 0 and v < vrun.shape[0] and vrun[v] < need:
            return addr
    return COALESCED_KEY_BIT | ((addr >> (lshift + c)) << lshift)


@kernel()
def partition_stores(addr, slc, par, sets, idx, lines, wcum, clk, rng, dram):
    """An L2 whose partitions' stores hold their home lines and the copies both (the load
    already missed its SM's store, which filled the line): a line homed in the SM's own
    partition goes to DRAM; one homed in the other is looked up (and filled) there, a
    far hit, or DRAM and the far trip on a miss."""
    k = slice_of(addr, slc)
    home = slc[SL_HEAD + slc[SL_NDATA] + 2 * slc[SL_NSLICES] + k]
    if home == slc[SL_COPY]:
        return dram
    far = slc[SL_HEAD + slc[SL_NDATA] + k]
    if lookup(addr, par, home, sets, idx, lines, wcum, clk, rng) == HIT:
        return far
    return dram + far - slc[SL_HEAD + slc[SL_NDATA] + slc[SL_NSLICES] + k]


@kernel(inline="always")
def _cache_step(
    c, a, warp, path, par, sets, idx, lines, wcum, clk, rng, cfg_i, slc, tlb_missed, memo
):
    """The load of ``a`` in the ``c``-th cache of the path (the warp's copy): (whether it
    serves the load, its latency). ``tlb_missed``: the nearest TLB level missed."""
    s = path[c, P_STRUCT] + instance_of(warp, path[c, P_NINST], path[c, P_ISEL], cfg_i[I_MAXWARPS])
    copied = c == slc[SL_ROW] and slc[SL_COPY] >= 0
    if copied:
        near = near_copy(a, slc, par, sets, idx, lines, wcum, clk, rng)
        if near >= 0:
            return True, near
        if slc[SL_HOME_LINES] == 1:
            return True, partition_stores(
                a, slc, par, sets, idx, lines, wcum, clk, rng, cfg_i[I_DRAM]
            )
    r = lookup_noted(a, par, s, sets, idx, lines, wcum, clk, rng, memo)
    if copied and r != HIT:
        home_copy(a, slc, par, sets, idx, lines, wcum, clk, rng)
    if r == HIT and not (tlb_missed and path[c, P_FLAGS] & MISS_ON_TLB_MISS):
        return True, path[c, P_LAT] if c != slc[SL_ROW] else slice_latency(a, slc)
    return False, np.int64(0)


@kernel(inline="always")
def load(
    addr, warp, path, tlbs, par, sets, idx, lines, wcum, clk, rng, state, cfg_i, vmap, vrun, slc,
    memo,
):  # fmt: skip
    """Latency in cycles of one load by warp ``warp`` before noise (the rules: hierarchy.py's
    docstring); the caller adds the load's noise and clamps at 0.

    ``path[c]`` = (structure of copy 0, hit latency on this path, flags, copies, copy mapping)
    of its ``c``-th cache; the warp's copy is looked up (``instance_of``). The walk is: the
    leading caches flagged UNTRANSLATED (a hit ends the load untranslated); the TLB levels until
    one hits, each miss adding its penalty (``C_LAT``) and, when all miss, the window switch;
    the other caches until one hits (a MISS_ON_TLB_MISS cache counts as missed when the nearest
    TLB level missed); else DRAM. The caches after translation see the physical address
    (``physical_of``), the TLB levels their entry key (``entry_key``). The noise stream is the
    caller's: it draws the noise of a block of loads beforehand (``noise_block``), which
    consumes the streams as drawing it load by load does (nothing else uses stream 1).
    """
    ntlb, ncache = tlbs.shape[0], path.shape[0]
    pre = 0  # caches looked up before translation
    while pre < ncache and path[pre, P_FLAGS] & UNTRANSLATED:
        pre += 1
    for c in range(pre):
        hit, latency = _cache_step(
            c, addr, warp, path, par, sets, idx, lines, wcum, clk, rng, cfg_i, slc, False, memo
        )
        if hit:
            return latency
    penalty, tlb_missed = 0, False
    for k in range(ntlb):
        s = tlbs[k]
        key = entry_key(addr, par, s, vrun, cfg_i)
        if lookup_noted(key, par, s, sets, idx, lines, wcum, clk, rng, memo) == HIT:
            break
        penalty += par[s, C_LAT]
        tlb_missed = tlb_missed or k == 0
        if k == ntlb - 1:
            penalty += _window_penalty(addr, state, cfg_i)
    phys = physical_of(addr, vmap, cfg_i)
    for c in range(pre, ncache):
        hit, latency = _cache_step(
            c, phys, warp, path, par, sets, idx, lines, wcum, clk, rng, cfg_i, slc, tlb_missed,
            memo,
        )  # fmt: skip
        if hit:
            return latency + penalty
    return cfg_i[I_DRAM] + penalty


@kernel()
def run_sequence(
    addrs,
    out,
    warp,
    path,
    tlbs,
    par,
    sets,
    idx,
    lines,
    wcum,
    clk,
    rng,
    spare,
    noise,
    work,
    state,
    cfg_i,
    cfg_f,
    vmap,
    vrun,
    slc,
    memo,
):
    """Dependent loads of ``addrs`` by warp ``warp``, one after another; latencies into ``out``
    (``noise``, ``work``: room for the noise of a block of loads, ``noise_block``; ``memo``:
    for the notes of ``lookup_noted``)."""
    _forget(memo)
    total, block = addrs.shape[0], noise.shape[0]
    for t0 in range(0, total, block):
        n = min(block, total - t0)
        jit, outlier_p, outlier = cfg_f[F_JITTER], cfg_f[F_OUTLIER_P], cfg_i[I_OUTLIER]
        noise_block(noise, 0, n, rng, spare, jit, outlier_p, outlier, work)
        for b in range(n):
            lat = load(
                addrs[t0 + b], warp, path, tlbs, par, sets, idx, lines, wcum, clk, rng, state,
                cfg_i, vmap, vrun, slc, memo,
            )  # fmt: skip
            out[t0 + b] = max(lat + noise[b], 0)


@kernel()
def run_fill(addrs, s, par, sets, idx, lines, wcum, clk, rng):
    """Lines of ``addrs`` brought into structure ``s`` alone, in order (a copy engine's writes
    into the L2: no TLB, no other cache, no timing); returns how many missed."""
    missed = 0
    for t in range(addrs.shape[0]):
        if lookup(addrs[t], par, s, sets, idx, lines, wcum, clk, rng) != HIT:
            missed += 1
    return missed


@kernel()
def run_chase(
    chain,
    element_bytes,
    base_bytes,
    start,
    warmup_steps,
    warp,
    out_lat,
    out_idx,
    path,
    tlbs,
    par,
    sets,
    idx,
    lines,
    wcum,
    clk,
    rng,
    spare,
    noise,
    work,
    state,
    cfg_i,
    cfg_f,
    vmap,
    vrun,
    slc,
    memo,
):
    """The fine-grained P-chase of Mei & Chu (TPDS Listing 3): ``j = chain[j]``, timed.

    ``warmup_steps`` untimed steps, then one recorded (latency, loaded index) per step; every
    load is warp ``warp``'s. ``noise``, ``work``: room for the noise of a block of loads
    (``noise_block``); ``memo``: for the notes of ``lookup_noted``.
    """
    _forget(memo)
    j = np.int64(start)
    total, block = warmup_steps + out_lat.shape[0], noise.shape[0]
    for t0 in range(0, total, block):
        n = min(block, total - t0)
        jit, outlier_p, outlier = cfg_f[F_JITTER], cfg_f[F_OUTLIER_P], cfg_i[I_OUTLIER]
        noise_block(noise, 0, n, rng, spare, jit, outlier_p, outlier, work)
        for b in range(n):
            lat = load(
                base_bytes + j * element_bytes, warp, path, tlbs, par, sets, idx, lines, wcum,
                clk, rng, state, cfg_i, vmap, vrun, slc, memo,
            )  # fmt: skip
            j = np.int64(chain[j])
            t = t0 + b
            if t >= warmup_steps:
                out_lat[t - warmup_steps] = max(lat + noise[b], 0)
                out_idx[t - warmup_steps] = j
