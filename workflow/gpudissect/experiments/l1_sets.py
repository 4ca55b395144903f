"""Eviction sets and the set-index function of the L1 data cache (path ld.global.ca), measured
by pointer walks over chosen lines of one aligned window (`experiments.pointer_walk`).

An adaptive sweep: each test depends on the ones before, so the sweep is a loop of small
launches driven from here, the same for both backends. In order (every test is a row set of
the trace; `kind` names the phase):

1. `calibrate`: `calibration_lines` lines walked twice, the second touches timed (L1 hits;
   `detail` 0); as many other lines touched once, then, after a walk of more lines than the L1
   holds, once more (L1 misses served by the L2; `detail` 1): the hit/miss threshold
   (`analysis.caches.l1_decisions`).
2. `stride`: per stride of k lines (k = 1..`max_stride_lines`, then every power of two up to
   `max_stride_bytes`), the largest cyclic walk of N lines at that stride (from the window's
   first line; `walk_passes` passes, the last one timed) that still hits, by bisection over N
   up to `max_footprint_lines` or as many lines as the probe window holds at that stride.
3. `pool`, `reduce`, `confirm`, `verify_full`, `verify_drop`: per target (`targets`), a
   minimal overloaded set by group testing (the reduction of Vila et al., IEEE S&P 2019): from
   a random pool of `pool_factor` times the stride-1 capacity, split the candidates into G
   groups and drop a group whose removal keeps the walk overloaded; with no group removable,
   G doubles, until single lines are left and none can go. A test walks its lines cyclically
   `set_passes` times and times the last `timed_passes`; it is overloaded when every timed
   pass misses (`analysis.caches.l1_decisions.overloaded`): W + 1 lines of one W-way set miss in
   every pass whatever the replacement policy keeps, so the test needs no assumption about
   the policy or about what earlier tests left in the cache, as a target timed after its
   candidates does. The set is then verified (the whole set is overloaded, each set minus one
   line is not). Its lines are W + 1 of one set: the ways, and the target x0 (its first line).
4. `member`: the index function's kernel at the first verified target x0 (Maurice et al., RAID
   2015): a line x0 ^ v (v over the probe window's address bits above the line: the window of
   `probe_window_bytes`, by default the largest aligned power of two the device's memory
   holds twice, so that the masks may use every bit an allocation spans; the calibration and
   the pools stay in its first `window_bytes`) is in x0's set when
   it overloads a walk with W known lines of that set; single bits, then pairs, then random
   vectors outside the span of the members found, until `stop_factor` * 2^(bits - dimension)
   vectors in a row are not. A probe that reads a member is tested twice.
5. `member_check`: predictions of the linear map: random vectors of the span at x0 and at the
   other targets (members), and random vectors outside it at the other targets (not members).
6. `policy`: W + 1 lines a_0..a_W of x0's set after flushing the set with W others: fill
   a_0..a_{W-1} (sequence 1 hits a_0 again), then a_W, then time one a_i: which line went.
   Sequence 2 (with 3W lines of the set known): fill, a_0 again, W new lines, time a_0: gone
   under LRU, FIFO and tree-PLRU, kept by a policy that protects lines that hit (SRRIP).

Every timed access is a row; the analysis takes every decision again from the trace.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd
import pyarrow as pa

from ..analysis.caches.l1_decisions import hit_threshold, overloaded, walk_hits
from ..analysis.common import gf2
from ..config import DeviceEntry
from ..contract.backend import Backend
from ..exceptions import ConfigError
from .pointer_walk import WalkTest, max_records, pack

log = logging.getLogger(__name__)

NAME = "l1_sets"
KERNELS = ("pointer_walk",)

SCHEMA = pa.schema(
    [
        pa.field("point", pa.int32()),  # launch
        pa.field("test", pa.int32()),
        pa.field("kind", pa.string()),
        pa.field("subject", pa.int32()),  # target index; stride; policy sequence
        pa.field("detail", pa.int64()),  # kind-specific (see _Driver)
        pa.field("set_lines", pa.int32()),  # lines walked between the timed line's visits
        pa.field("access", pa.int32()),  # timed access of the test, 0-based
        pa.field("address_bytes", pa.int64()),  # timed line, from the window's base
        pa.field("carveout_pct", pa.int16()),  # -1: the backend sets no carveout
        pa.field("line_bytes", pa.int32()),
        pa.field("window_bytes", pa.int64()),
        pa.field("latency_cycles", pa.uint32()),
        pa.field("sm_clock_mhz", pa.float32()),
    ]
)


@dataclass(frozen=True)
class L1SetsParams:
    enabled: bool
    line_bytes: int
    window_bytes: int
    shared_buffer_bytes: int
    carveout_pct: int
    calibration_lines: int
    max_stride_lines: int
    max_footprint_lines: int
    walk_passes: int
    miss_tolerance: int
    targets: int
    pool_factor: float
    max_pool_lines: int
    set_passes: int
    timed_passes: int
    initial_groups: int
    probe_batch: int
    max_probes: int
    stop_factor: float
    check_probes: int
    policy_repeats: int
    max_reduction_tests: int
    max_launches: int
    seed: int
    # the window of the probes and the stride walks: None (the pools' window_bytes), a power
    # of two, or "auto" (probe_window)
    probe_window_bytes: int | str | None = None
    max_probe_window_bytes: int = 1 << 37
    memory_reserve_bytes: int = 8 << 30
    # power-of-two strides above max_stride_lines up to this (0: none)
    max_stride_bytes: int = 0


def parse_params(section: dict, key: str) -> L1SetsParams:
    p = L1SetsParams(**{f: section[f] for f in L1SetsParams.__dataclass_fields__ if f in section})
    pw = p.probe_window_bytes
    if (
        pw is not None
        and pw != "auto"
        and (not isinstance(pw, int) or pw & (pw - 1) or pw < p.window_bytes)
    ):
        raise ConfigError(
            f"{key}.probe_window_bytes: {pw!r}; allowed: auto, or a power of two of at least "
            f"window_bytes ({p.window_bytes})"
        )
    for name in ("line_bytes", "window_bytes", "max_probe_window_bytes"):
        v = getattr(p, name)
        if v & (v - 1):
            raise ConfigError(f"{key}.{name}: {v}; allowed: a power of two")
    if p.max_footprint_lines > max_records(p.shared_buffer_bytes):
        raise ConfigError(
            f"{key}.max_footprint_lines: {p.max_footprint_lines} timed loads do not fit "
            f"shared_buffer_bytes {p.shared_buffer_bytes} (8 bytes each, "
            f"{max_records(p.shared_buffer_bytes)} at most); allowed: fewer lines or more bytes"
        )
    span = p.max_stride_lines * p.max_footprint_lines * p.line_bytes
    if span > p.window_bytes or p.max_pool_lines * p.line_bytes > p.window_bytes // 2:
        raise ConfigError(
            f"{key}.window_bytes: {p.window_bytes} cannot hold the longest stride walk ({span} "
            f"bytes) or twice the largest pool; allowed: a larger window"
        )
    if max(p.walk_passes, p.set_passes) > p.line_bytes // 8:
        raise ConfigError(
            f"{key}.walk_passes/set_passes: a line has {p.line_bytes // 8} words, one per "
            "visit in a launch; allowed: fewer passes"
        )
    if p.max_stride_bytes < 0 or p.max_stride_bytes & (p.max_stride_bytes - 1):
        raise ConfigError(
            f"{key}.max_stride_bytes: {p.max_stride_bytes}; allowed: 0 or a power of two"
        )
    if p.timed_passes >= p.set_passes:
        raise ConfigError(
            f"{key}.timed_passes: {p.timed_passes}; allowed: fewer than set_passes "
            f"({p.set_passes}): the first pass brings the lines in untimed"
        )
    return p


class _OutOfLaunches(Exception):
    pass


def probe_window(p: L1SetsParams, memory_bytes: int | None) -> int:
    """The window of the probes and stride walks: as configured, or ("auto") the largest power
    of two W <= `max_probe_window_bytes` whose aligned placement (a GPU allocates 2 W) fits
    the device's memory less `memory_reserve_bytes`; `window_bytes` when the device reports
    no memory size or holds no larger window."""
    if p.probe_window_bytes is None:
        return p.window_bytes
    if p.probe_window_bytes != "auto":
        return int(p.probe_window_bytes)
    if not memory_bytes:
        return p.window_bytes
    room = (int(memory_bytes) - p.memory_reserve_bytes) // 2
    if room < p.window_bytes:
        return p.window_bytes
    return min(1 << (room.bit_length() - 1), p.max_probe_window_bytes)


def strides(p: L1SetsParams) -> list[int]:
    """Strides in lines: 1..max_stride_lines, then every power of two up to max_stride_bytes."""
    out = list(range(1, p.max_stride_lines + 1))
    k = 1 << p.max_stride_lines.bit_length()
    while k * p.line_bytes <= p.max_stride_bytes:
        out.append(k)
        k *= 2
    return out


class _Driver:
    """Runs tests (packed into launches) and keeps every timed access as a trace row."""

    def __init__(self, backend: Backend, p: L1SetsParams, progress) -> None:
        self.backend, self.p, self.progress = backend, p, progress
        self.rng = np.random.default_rng(p.seed)
        self.lines = p.window_bytes // p.line_bytes  # the pools' and calibration's lines
        memory = backend.facts().total_memory_bytes if p.probe_window_bytes == "auto" else None
        self.window = probe_window(p, memory)
        self.carveout = p.carveout_pct if backend.supports_carveout else None
        # per test run: its scalars (point, test, kind, subject, detail, set_lines, clock), and
        # its timed addresses and latencies; the rows are made once, at the end (`_frame`)
        self.frames: list[tuple] = []
        self.launches = 0
        self.tests = 0
        self.threshold: float | None = None

    # --- running ---------------------------------------------------------------------------
    def run(self, tests: list[WalkTest], kind: str, meta: list[tuple[int, int, int]]):
        """Latencies of each test's timed accesses; `meta` = (subject, detail, set_lines) each."""
        launches = pack(
            tests,
            window_bytes=self.window,
            line_bytes=self.p.line_bytes,
            shared_buffer_bytes=self.p.shared_buffer_bytes,
            carveout_pct=self.carveout,
        )
        if self.launches + len(launches) > self.p.max_launches:
            raise _OutOfLaunches
        out: list[np.ndarray] = [np.zeros(0, np.uint32)] * len(tests)
        for launch in launches:
            r = self.backend.run(launch.work, seed=self.launches)
            at = 0
            for t, n in zip(launch.tests, launch.records, strict=True):
                lat = r.latency_cycles[at : at + n]
                at += n
                out[t] = lat
                test = tests[t]
                subject, detail, set_lines = meta[t]
                self.frames.append(
                    (
                        (self.launches, self.tests + t, kind, subject, detail, set_lines,
                         r.sm_clock_mhz),
                        np.asarray(test.lines, np.int64)[list(test.timed)] * self.p.line_bytes,
                        np.asarray(lat, np.uint32),
                    )
                )  # fmt: skip
            self.launches += 1
        self.tests += len(tests)
        return out

    def overloads(self, sets: list[np.ndarray], kind: str, meta) -> np.ndarray:
        """For each line set: walked cyclically `set_passes` times, the last `timed_passes`
        timed (as many as the shared buffer holds, at least one): overloaded?"""
        limit = max_records(self.p.shared_buffer_bytes)
        tests = []
        for s in sets:
            n, passes = len(s), self.p.set_passes
            timed = max(min(self.p.timed_passes, limit // max(n, 1)), 1)
            tests.append(
                WalkTest(np.tile(s, passes), tuple(range((passes - timed) * n, passes * n)))
            )
        lat = self.run(tests, kind, meta)
        return np.array(
            [overloaded(x, self.threshold, len(s)) for x, s in zip(lat, sets, strict=True)]
        )

    def random_lines(self, n: int, exclude: set[int]) -> np.ndarray:
        out: list[int] = []
        seen = set(exclude)
        while len(out) < n:
            for v in self.rng.integers(0, self.lines, 2 * (n - len(out))).tolist():
                if v not in seen:
                    seen.add(v)
                    out.append(v)
                    if len(out) == n:
                        break
        return np.array(out, dtype=np.int64)

    # --- phases ----------------------------------------------------------------------------
    def calibrate(self) -> None:
        """Two tests: the calibration lines walked twice, the second touches timed (L1 hits);
        then as many other lines touched once, `2 * max_footprint_lines` lines more walked
        twice (more than the L1 holds), and those other lines again, timed (L1 misses that hit
        the L2, where every eviction test's miss is served). First touches are no reference
        for a miss: they may come from DRAM or a far L2 partition, slower than the L2 hits the
        tests read. Nor are lines that hit once: an H100's L1 keeps them through a walk of
        twice its size (its policy resists scans)."""
        lines = self.random_lines(self.p.calibration_lines, set())
        n = len(lines)
        other = self.random_lines(n, set(lines.tolist()))
        evict = self.random_lines(
            2 * self.p.max_footprint_lines, set(lines.tolist() + other.tolist())
        )
        back = 2 * len(evict) + n
        tests = [
            WalkTest(np.tile(lines, 2), tuple(range(n, 2 * n))),
            WalkTest(np.concatenate([other, evict, evict, other]), tuple(range(back, back + n))),
        ]
        hits, misses = self.run(tests, "calibrate", [(0, 0, n), (0, 1, n)])
        self.threshold = hit_threshold(hits, misses)

    def footprint_hits(self, k: int, n: int) -> bool:
        lines = np.arange(n, dtype=np.int64) * k
        passes = self.p.walk_passes
        timed = tuple(range((passes - 1) * n, passes * n))
        (lat,) = self.run([WalkTest(np.tile(lines, passes), timed)], "stride", [(k, n, n)])
        return walk_hits(lat, self.threshold, self.p.miss_tolerance)

    def stride_capacity(self, k: int) -> int:
        top = min(self.p.max_footprint_lines, self.window // (k * self.p.line_bytes))
        if top < 1:
            return 0
        if self.footprint_hits(k, top):
            return top
        lo, hi = 0, top  # lo hits (0 lines trivially), hi misses
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.footprint_hits(k, mid):
                lo = mid
            else:
                hi = mid
        return lo

    def eviction_set(self, j: int, pool_lines: int) -> np.ndarray | None:
        """A minimal overloaded set (W + 1 lines of one set) reduced from a random pool, or
        None when no pool up to `max_pool_lines` (and one timed pass of the shared buffer)
        overloads or the reduction runs out of tests."""
        p = self.p
        top = min(p.max_pool_lines, max_records(p.shared_buffer_bytes))
        size = min(pool_lines, top)
        while True:
            pool = self.random_lines(size, set())
            if self.overloads([pool], "pool", [(j, 0, len(pool))])[0]:
                break
            if size >= top:
                return None
            size = min(int(size * 1.5), top)
        s, groups, rnd = pool, p.initial_groups, 0
        first_test = self.tests
        while True:
            if self.tests - first_test > p.max_reduction_tests:
                log.info("l1_sets: target %d: reduction given up at %d lines", j, len(s))
                return None
            g = min(groups, len(s))
            parts = np.array_split(np.arange(len(s)), g)
            rest = [np.delete(s, part) for part in parts]
            res = self.overloads(
                rest, "reduce", [(j, rnd * 4096 + i, len(r)) for i, r in enumerate(rest)]
            )
            chosen = None
            for i in np.flatnonzero(res):
                if self.overloads([rest[i]], "confirm", [(j, rnd * 4096 + i, len(rest[i]))])[0]:
                    chosen = i
                    break
            if chosen is not None:
                s, rnd = rest[chosen], rnd + 1
            elif g == len(s):
                return s
            else:
                groups = min(2 * groups, len(s))

    def verify(self, j: int, s: np.ndarray) -> bool:
        full = self.overloads([s] * 3, "verify_full", [(j, 0, len(s))] * 3)
        drops = [np.delete(s, i) for i in range(len(s))]
        dropped = self.overloads(
            drops + drops,
            "verify_drop",
            [(j, i % len(s), len(s) - 1) for i in range(2 * len(s))],
        )
        return bool(full.all() and not dropped.any())

    def probe_stream(self, bits: list[int], basis: gf2.Basis, first: list[int]) -> Iterator[int]:
        yield from first
        for b in bits:
            yield 1 << b
        for a, b in combinations(bits, 2):
            yield (1 << a) | (1 << b)
        lo = min(bits)
        while True:
            yield int(self.rng.integers(1, 1 << len(bits))) << lo

    def membership(self, j, x0, members, vs, ways, kind) -> list[bool]:
        """Whether each x0 ^ v is in x0's set: it walked first, then `ways` known lines of the
        set other than it (taken in turn), overloads."""
        shift = self.p.line_bytes.bit_length() - 1
        sets = []
        for i, v in enumerate(vs):
            y = x0 ^ (v >> shift)
            pick = [m for m in members if m != y]
            sets.append(
                np.array([y, *(pick[(i + k) % len(pick)] for k in range(ways))], dtype=np.int64)
            )
        return self.overloads(sets, kind, [(j, v, ways + 1) for v in vs]).tolist()

    def kernel(self, x0: int, evset: np.ndarray) -> tuple[gf2.Basis, list[int]]:
        """The kernel's basis and the lines found (and confirmed) in x0's set (`evset`: a
        minimal overloaded set, x0 its first line)."""
        p = self.p
        shift = p.line_bytes.bit_length() - 1
        bits = list(range(shift, self.window.bit_length() - 1))
        basis = gf2.Basis()
        members = evset.tolist()
        ways = len(evset) - 1
        first = [(int(e) ^ x0) << shift for e in evset[1:]]
        stream = self.probe_stream(bits, basis, first)
        structured = len(first) + len(bits) + len(bits) * (len(bits) - 1) // 2
        probes = since_new = 0
        while probes < p.max_probes:
            batch: list[int] = []
            while len(batch) < p.probe_batch and probes < p.max_probes:
                v = next(stream)
                probes += 1
                if not basis.contains(v) and v not in batch:
                    batch.append(v)
            hits = self.membership(0, x0, members, batch, ways, "member")
            found = [v for v, h in zip(batch, hits, strict=True) if h]
            confirmed = self.membership(0, x0, members, found, ways, "member") if found else []
            for v, ok in zip(found, confirmed, strict=True):
                if ok:
                    members.append(x0 ^ (v >> shift))
                    if basis.insert(v):
                        since_new = 0
            since_new += len(batch) - len(found)
            if probes > structured and since_new >= p.stop_factor * 2 ** (len(bits) - basis.dim):
                break
        return basis, members

    def checks(self, basis, sets: list[tuple[int, int, np.ndarray]]) -> list[int]:
        """Predictions of the map at every verified target: members from the span, and (at the
        other targets) vectors outside it. Returns the lines of the first target's set that
        the checks found in it."""
        found: list[int] = []
        p = self.p
        shift = p.line_bytes.bit_length() - 1
        bits = self.window.bit_length() - 1 - shift
        for j, x, evset in sets:
            members = evset.tolist()
            vs = [basis.random_member(self.rng) for _ in range(p.check_probes)] if basis.dim else []
            if j > 0:
                while len(vs) < 2 * p.check_probes:
                    v = int(self.rng.integers(1, 1 << bits)) << shift
                    if not basis.contains(v):
                        vs.append(v)
            vs = [v for v in vs if v]
            if vs:
                hit = self.membership(j, x, members, vs, len(evset) - 1, "member_check")
                if j == 0:
                    found += [x ^ (v >> shift) for v, h in zip(vs, hit, strict=True) if h]
        return found

    def policy(self, ways: int, lines: list[int]) -> None:
        """`lines`: lines measured to be in one set (not lines a model predicts there)."""
        p = self.p
        lines = list(dict.fromkeys(lines))
        if len(lines) < 2 * ways + 1:
            log.info(
                "l1_sets: %d lines of one set known, the policy test needs %d",
                len(lines),
                2 * ways + 1,
            )
            return
        flush, a = lines[:ways], lines[ways : 2 * ways + 1]
        tests, meta = [], []
        for seq in (0, 1):
            fill = a[:ways] + ([a[0]] if seq else []) + [a[ways]]
            for i in range(ways + 1):
                for _ in range(p.policy_repeats):
                    walk = np.array(flush + flush + fill + [a[i]], dtype=np.int64)
                    tests.append(WalkTest(walk, (len(walk) - 1,)))
                    meta.append((seq, i, ways))
        if len(lines) >= 3 * ways:
            # sequence 2: a_0..a_{W-1}, a_0 again, then W new lines b_0..b_{W-1}, time a_0:
            # LRU, FIFO and tree-PLRU lose it; a policy that keeps a line that hit over lines
            # touched once (SRRIP) keeps it
            b = [a[ways], *lines[2 * ways + 1 : 3 * ways]]
            for _ in range(p.policy_repeats):
                walk = np.array(flush + flush + a[:ways] + [a[0]] + b + [a[0]], dtype=np.int64)
                tests.append(WalkTest(walk, (len(walk) - 1,)))
                meta.append((2, 0, ways))
        self.run(tests, "policy", meta)


def run(
    backend: Backend,
    p: L1SetsParams,
    *,
    device: DeviceEntry,
    inputs: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """The sweep (module docstring); stops early, keeping what it measured, when a phase finds
    no hit/miss threshold or no eviction set, or at `max_launches`."""
    d = _Driver(backend, p, progress)
    try:
        _phases(d, p, progress)
    except _OutOfLaunches:
        log.warning("l1_sets: stopped at max_launches = %d", p.max_launches)
    return _frame(d, p)


def _phases(d: _Driver, p: L1SetsParams, progress) -> None:
    steps = 4

    def done(i: int) -> None:
        if progress:
            progress(i, steps)

    d.calibrate()
    if d.threshold is None:
        log.warning("l1_sets: L1 hits and misses overlap; no eviction sets")
        return
    log.info(
        "l1_sets: probe window %d bytes (address bits 0-%d)", d.window, d.window.bit_length() - 2
    )
    capacity = {k: d.stride_capacity(k) for k in strides(p)}
    done(1)
    found: list[tuple[int, int, np.ndarray]] = []
    pool = max(int(p.pool_factor * capacity[1]), 16)
    for j in range(p.targets):
        s = d.eviction_set(j, pool)
        if s is not None and d.verify(j, s):
            found.append((j, int(s[0]), s))
    done(2)
    if not found:
        return
    _, x0, e0 = found[0]
    basis, members = d.kernel(x0, e0)
    members += d.checks(basis, found)
    done(3)
    d.policy(len(e0) - 1, members)
    done(4)


def _frame(d: _Driver, p: L1SetsParams) -> pd.DataFrame:
    if not d.frames:
        return pd.DataFrame({f.name: pd.Series(dtype=f.type.to_pandas_dtype()) for f in SCHEMA})
    sizes = np.array([len(lat) for _, _, lat in d.frames], np.int64)
    scalars = list(zip(*(s for s, _, _ in d.frames), strict=True))
    kinds = (np.int32, np.int32, object, np.int32, np.int64, np.int32, np.float32)
    names = ("point", "test", "kind", "subject", "detail", "set_lines", "sm_clock_mhz")
    per_test = {
        name: np.repeat(np.array(v, dtype=k), sizes)
        for name, v, k in zip(names, scalars, kinds, strict=True)
    }
    cols = {
        **{n: per_test[n] for n in names[:-1]},
        "access": np.concatenate([np.arange(n, dtype=np.int32) for n in sizes.tolist()]),
        "address_bytes": np.concatenate([a for _, a, _ in d.frames]),
        "latency_cycles": np.concatenate([lat for _, _, lat in d.frames]),
        "sm_clock_mhz": per_test["sm_clock_mhz"],
        "carveout_pct": np.full(
            int(sizes.sum()), -1 if d.carveout is None else d.carveout, np.int16
        ),
    }
    df = pd.DataFrame(cols)
    df["line_bytes"] = np.int32(p.line_bytes)
    df["window_bytes"] = np.int64(d.window)
    return df[[f.name for f in SCHEMA]]
