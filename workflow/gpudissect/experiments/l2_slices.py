"""L2 slice map: the latency of an L2 hit from every SM to each of `lines` 128-B lines of one
2 MiB-aligned region (kernels/l2slices.cu, header comment).

One repetition for an SM under test (the target) and a helper SM: the L2 is flushed, a block on
the helper walks every line once through ld.global.cg (the warm-up that brings them into the
L2), then a block on the target walks the same chain twice, every load timed: pass 0 reads each
line where the helper's walk left it, pass 1 what pass 0 left (on an L2 that copies far lines
into the reader's partition: the copies). Both walks are one-thread blocks of a grid of
one-thread blocks, each reading its SM id; only the block on the chosen SM walks (no contention:
the others leave at once).

The helper is first the first SM listed. Where the target's pass 0 shows no near and far groups
(it shares the helper's partition: the helper's walk left copies in it), the targets are walked
again with the helper whose own pass 0 split widest (`analysis.l2.l2_slices.first_touch_gap`, the
one question this sweep asks the analysis): phase 1.

The lines are a seeded random sample of the region's lines, walked in a seeded random order;
inside a 2 MiB-aligned region the low 21 address bits are the same virtual and physical (2 MiB
pages), so the analysis can solve the partition function over bits 7-20. Every sample is kept.

Then, on the same region (the same physical pages), the slice contention phase (phase 2; off
when `contention_lines` is 0): every warp of a full grid hammers one of two lines with atomics
(kernels/l2slices.cu, `l2_slice_hammer`), and the launch's duration says whether the two lines
share a slice (one slice's atomic unit serves both: as long as one line alone) or not (about
half). The lines are the first `contention_lines` of the chain's order (a random sample). The
first line not yet placed is the next class's reference: it is hammered beside every line not
yet placed, and beside itself first and after every 32 of them (the one-slice duration); the
lines that take as long join its class (`analysis.l2.l2_shares.contention_same`, the sweep's other
question), the rest wait for the next reference. A line whose share lay within 0.1 of the
threshold, or above 1.05 (a disturbed launch), is launched again beside the reference (twice at
most), and its median undisturbed share decides. Every line that joins is launched beside the
reference once more (one slow launch of two slices' lines can read like one slice), and the
median of its launches decides again; a line that leaves waits for a later reference.
So the launches number about the slices times half the lines, plus one per line. Then the merge
pass (`pass` 2): each class's reference beside the references of the classes after it, decided
the same way; two that contend are one slice the search split, and their classes merge. Then
each class of three lines or more is checked with two launches no search made: two of its lines
besides the reference (they should contend) and one of them beside a line of the next class
(they should not); `pass` 1 marks those rows. Every duration is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from ..config import DeviceEntry
from ..contract.backend import Backend
from ..exceptions import ConfigError

NAME = "l2_slices"
KERNELS = ("l2slices",)
LINE_BYTES = 128
PASSES = 2  # timed walks of the chain per repetition (pass 0: first touch; 1: again)
FLUSH_L2_MULTIPLE = 4  # the automatic flush reads this many L2 sizes
CONTENTION_PHASE = 2  # the trace's rows of the slice contention phase
CONTENTION_WARPS = 8  # warps per block of a contention launch (half on each line)
CONTENTION_SELF_EVERY = 32  # lines between two launches of the reference beside itself
CONTENTION_RETRIES = 2  # times a partner with an ambiguous share is launched again at most
SEARCH, CHECK, MERGE = 0, 1, 2  # the `pass` of a contention row

SCHEMA = pa.schema(
    [
        pa.field("phase", pa.int8()),  # 0: first helper; 1: the second helper
        pa.field("helper_sm", pa.int32()),  # SM that walked the warm-up
        pa.field("target_sm", pa.int32()),  # SM the timed walk asked for
        pa.field("sm", pa.int32()),  # SM the timed block read from %smid
        pa.field("repetition", pa.int16()),
        pa.field("pass", pa.int8()),
        pa.field("order", pa.int32()),  # position of the line in the chain
        pa.field("offset_bytes", pa.int64()),  # the line's offset inside the region
        pa.field("cycles", pa.uint32()),
        pa.field("region_bytes", pa.int64()),
        pa.field("sm_clock_mhz", pa.float32()),
        # the contention phase: the class's reference line hammered beside `offset_bytes`, and
        # the launch's duration (both -1 in the walks' rows)
        pa.field("reference_offset_bytes", pa.int64()),
        pa.field("elapsed_ns", pa.float64()),
    ]
)


@dataclass(frozen=True)
class L2SliceWork:
    """One repetition: flush `flush_bytes` through the L2, walk the chain once (untimed) on
    `helper_sm`, then `passes` timed walks on `target_sm`. The chain visits the lines at byte
    offsets `offsets_bytes` (inside a `region_bytes`-aligned region of `region_bytes`) in order
    and wraps. `grid_blocks` one-thread blocks per launch (0: twice the SM count)."""

    region_bytes: int
    offsets_bytes: np.ndarray  # int64, distinct multiples of 4 below region_bytes
    helper_sm: int
    target_sm: int
    passes: int
    flush_bytes: int
    grid_blocks: int = 0

    def __post_init__(self) -> None:
        o = self.offsets_bytes
        if o.ndim != 1 or o.size < 2 or len(np.unique(o)) != o.size:
            raise ValueError("offsets_bytes must hold at least 2 distinct offsets")
        if int(o.min()) < 0 or int(o.max()) >= self.region_bytes or np.any(o % 4):
            raise ValueError("offsets_bytes must be 4-byte aligned offsets inside the region")
        if self.passes < 1 or min(self.helper_sm, self.target_sm) < 0:
            raise ValueError("passes must be >= 1 and SM ids >= 0")

    @property
    def lines(self) -> int:
        return int(self.offsets_bytes.size)

    def region(self) -> np.ndarray:
        """The region's contents (uint32): the element at each listed line holds the index of
        the next line's element, the rest is 0."""
        out = np.zeros(self.region_bytes // 4, dtype=np.uint32)
        idx = self.offsets_bytes // 4
        out[idx] = np.roll(idx, -1).astype(np.uint32)
        return out

    def final_index(self) -> int:
        """The element the timed walks end on (`passes` rounds of the chain from its start)."""
        return int(self.offsets_bytes[0] // 4)


@dataclass(frozen=True)
class L2SliceResult:
    cycles: np.ndarray  # uint32, passes * lines, in chain order per pass
    sm: int  # the timed block's SM id (-1: no block of the grid ran on target_sm)
    helper_sm: int  # the warm-up block's SM id (-1: none ran on helper_sm)
    sm_clock_mhz: float


@dataclass(frozen=True)
class L2ContentionWork:
    """Launches of the contention kernel on the region the walks use (the same
    `region_bytes` and `flush_bytes`, so the same place in the backend's buffer): for each
    partner, one launch of `grid_blocks` blocks (0: twice the SM count) of `CONTENTION_WARPS`
    warps, the even warps hammering the line at `reference_bytes`, the odd ones the partner's,
    `iterations` atomics each."""

    region_bytes: int
    flush_bytes: int
    reference_bytes: int
    partners_bytes: np.ndarray  # int64 line offsets inside the region, in launch order
    iterations: int
    grid_blocks: int = 0

    def __post_init__(self) -> None:
        o = np.append(self.partners_bytes, self.reference_bytes)
        if self.partners_bytes.ndim != 1 or self.partners_bytes.size < 1:
            raise ValueError("partners_bytes must hold at least one offset")
        if int(o.min()) < 0 or int(o.max()) >= self.region_bytes or np.any(o % LINE_BYTES):
            raise ValueError("the offsets must be line-aligned offsets inside the region")
        if self.iterations < 1:
            raise ValueError("iterations must be >= 1")


@dataclass(frozen=True)
class L2ContentionResult:
    elapsed_ns: np.ndarray  # float64, one launch per partner, in order
    sm_clock_mhz: float


@dataclass(frozen=True)
class L2SliceParams:
    enabled: bool
    lines: int
    region_bytes: int
    repetitions: int
    sms: tuple[int, ...] | None  # None: every SM the driver reports
    flush_bytes: int | None  # None: FLUSH_L2_MULTIPLE L2 sizes
    line_seed: int
    contention_lines: int = 0  # 0: no contention phase
    contention_iterations: int = 16


def parse_params(section: dict, key: str) -> L2SliceParams:
    p = L2SliceParams(
        enabled=section["enabled"],
        lines=section["lines"],
        region_bytes=section["region_bytes"],
        repetitions=section["repetitions"],
        sms=None if section["sms"] == "auto" else tuple(section["sms"]),
        flush_bytes=None if section["flush_bytes"] == "auto" else section["flush_bytes"],
        line_seed=section["line_seed"],
        contention_lines=section["contention_lines"],
        contention_iterations=section["contention_iterations"],
    )
    region_lines = p.region_bytes // LINE_BYTES
    if p.region_bytes & (p.region_bytes - 1):
        raise ConfigError(
            f"{key}.region_bytes: {p.region_bytes}; allowed: a power of two (the region is "
            "aligned to its size)"
        )
    if p.lines > region_lines:
        raise ConfigError(
            f"{key}.lines: {p.lines}; allowed: at most the region's {region_lines} lines of "
            f"{LINE_BYTES} B (region_bytes {p.region_bytes})"
        )
    if p.sms is not None and len(set(p.sms)) != len(p.sms):
        raise ConfigError(f"{key}.sms: {list(p.sms)} repeats an SM; allowed: distinct SM ids")
    return p


def line_offsets(*, lines: int, region_bytes: int, seed: int) -> np.ndarray:
    """`lines` distinct line offsets of the region in the order the chain visits them (int64)."""
    rng = np.random.default_rng(seed)
    picked = rng.choice(region_bytes // LINE_BYTES, size=lines, replace=False)
    return picked.astype(np.int64) * LINE_BYTES


def _columns(phase, work: L2SliceWork, repetition: int, r: L2SliceResult) -> dict:
    """One repetition's rows, as SCHEMA's columns (one frame of all of them at the end)."""
    n = work.lines
    k = n * work.passes
    return {
        "phase": np.full(k, phase, np.int8),
        "helper_sm": np.full(k, r.helper_sm, np.int32),
        "target_sm": np.full(k, work.target_sm, np.int32),
        "sm": np.full(k, r.sm, np.int32),
        "repetition": np.full(k, repetition, np.int16),
        "pass": np.repeat(np.arange(work.passes, dtype=np.int8), n),
        "order": np.tile(np.arange(n, dtype=np.int32), work.passes),
        "offset_bytes": np.tile(work.offsets_bytes, work.passes),
        "cycles": np.asarray(r.cycles, dtype=np.uint32),
        "region_bytes": np.full(k, work.region_bytes, np.int64),
        "sm_clock_mhz": np.full(k, r.sm_clock_mhz, np.float32),
        "reference_offset_bytes": np.full(k, -1, np.int64),
        "elapsed_ns": np.full(k, -1.0),
    }


def _contention_frame(
    work: L2ContentionWork, klass: int, r: L2ContentionResult, kind: int = 0, first: int = 0
) -> pd.DataFrame:
    return pd.DataFrame(_contention_columns(work, klass, r, kind, first))


def _contention_columns(
    work: L2ContentionWork, klass: int, r: L2ContentionResult, kind: int = 0, first: int = 0
) -> dict:
    """One contention launch's rows, as SCHEMA's columns."""
    k = work.partners_bytes.size
    return {
        "phase": np.full(k, CONTENTION_PHASE, np.int8),
        "helper_sm": np.full(k, -1, np.int32),
        "target_sm": np.full(k, -1, np.int32),
        "sm": np.full(k, -1, np.int32),
        "repetition": np.full(k, klass, np.int16),
        # 0: a class search; 1: the check of a class; 2: the merge pass (class references)
        "pass": np.full(k, kind, np.int8),
        "order": np.arange(first, first + k, dtype=np.int32),
        "offset_bytes": work.partners_bytes.astype(np.int64),
        "cycles": np.zeros(k, np.uint32),
        "region_bytes": np.full(k, work.region_bytes, np.int64),
        "sm_clock_mhz": np.full(k, r.sm_clock_mhz, np.float32),
        "reference_offset_bytes": np.full(k, work.reference_bytes, np.int64),
        "elapsed_ns": np.asarray(r.elapsed_ns, dtype=np.float64),
    }


def _frame_of(parts: list[dict]) -> pd.DataFrame:
    """The rows of every part (walk repetition or launch), in order."""
    return pd.DataFrame({f.name: np.concatenate([p[f.name] for p in parts]) for f in SCHEMA})


def contention_partners(reference: int, rest: list[int]) -> np.ndarray:
    """The launch order of one class's search: the reference beside itself first and after
    every `CONTENTION_SELF_EVERY` lines not yet placed (one-slice durations near each launch,
    to compare it with where the clocks drift)."""
    order = [reference]
    for i in range(0, len(rest), CONTENTION_SELF_EVERY):
        order += [*rest[i : i + CONTENTION_SELF_EVERY], reference]
    if len(order) < 4:
        order += [reference] * (4 - len(order))  # at least three one-line launches
    return np.array(order, np.int64)


SHARE_COLUMNS = ("offset_bytes", "reference_offset_bytes", "order", "elapsed_ns")


def contention_phase(
    backend: Backend, p: L2SliceParams, offsets: np.ndarray, flush: int, progress=None
) -> list[dict]:
    """The slice classes of the first `contention_lines` lines, one reference at a time: the
    columns of each launch's rows (`_frame_of` makes them one frame)."""
    from ..analysis.l2.l2_shares import contention_ambiguous, contention_same
    from ..analysis.l2.l2_slices import merged_labels

    left = [int(o) for o in offsets[: p.contention_lines]]  # at most the walked lines
    lines = len(left)
    frames, classes = [], []

    def launch(reference: int, partners: np.ndarray, klass: int, kind: int, first: int = 0):
        work = L2ContentionWork(
            region_bytes=p.region_bytes,
            flush_bytes=flush,
            reference_bytes=reference,
            partners_bytes=partners,
            iterations=p.contention_iterations,
        )
        r = backend.run(work, seed=104729 + len(frames))
        frames.append(_contention_columns(work, klass, r, kind, first))
        return {c: frames[-1][c] for c in SHARE_COLUMNS}

    def again(search: dict, reference: int, partners: list[int], klass: int, kind: int) -> dict:
        """`partners` launched beside the reference once more (orders continue, so that the
        one-line launches nearest each stay its own). A search: the columns of its launches'
        rows that its questions read."""
        more = launch(
            reference, contention_partners(reference, partners), klass, kind,
            first=int(search["order"].max()) + 1,
        )  # fmt: skip
        return {c: np.concatenate([search[c], more[c]]) for c in SHARE_COLUMNS}

    def decide(reference: int, partners: list[int], klass: int, kind: int) -> dict[int, bool]:
        """Which `partners` share the reference's slice: one launch each, those whose share is
        ambiguous or disturbed again (`CONTENTION_RETRIES` times at most), and every partner
        that joins a second time: one slow launch of two lines of two slices (0.84-0.94 of the
        one-line time on an H100, where two slices take 0.5) reads like one slice; the median
        then decides."""
        search = launch(reference, contention_partners(reference, partners), klass, kind)
        for settling in (False, True):
            for _ in range(CONTENTION_RETRIES):
                ambiguous = contention_ambiguous(search)
                if not ambiguous:
                    break
                search = again(search, reference, ambiguous, klass, kind)
            joined = [o for o, same in contention_same(search).items() if same]
            if settling or not joined:
                break
            search = again(search, reference, joined, klass, kind)
        return contention_same(search)

    while left:
        reference, rest = left[0], left[1:]
        same = decide(reference, rest, len(classes), SEARCH)
        classes.append([reference] + [o for o in rest if same.get(o, False)])
        left = [o for o in rest if not same.get(o, False)]
        if progress:
            progress(lines - len(left), lines)
    # the merge pass: each class's reference beside the references of the classes after it; two
    # that contend are one slice the search split (a line left out on slow launches, which
    # then formed a class of its own beside its slice's)
    refs = [c[0] for c in classes]
    pairs = []
    for k in range(len(refs) - 1):
        same = decide(refs[k], refs[k + 1 :], k, MERGE)
        pairs += [(k, j) for j in range(k + 1, len(refs)) if same.get(refs[j], False)]
    merged: dict[int, list[int]] = {}
    for label, members in zip(
        merged_labels(list(range(len(classes))), pairs), classes, strict=True
    ):
        merged.setdefault(label, []).extend(members)
    classes = list(merged.values())
    # the check: two members of a class other than its reference (a pair no search launched)
    # should contend, and a member beside one of the next class should not
    for k, members in enumerate(classes):
        if len(members) < 3 or len(classes) < 2:
            continue
        a, b = members[1], members[2]
        other = classes[(k + 1) % len(classes)][-1]
        launch(a, np.array([a, b, a, other, a], np.int64), k, CHECK)
    return frames


def run(
    backend: Backend,
    p: L2SliceParams,
    *,
    device: DeviceEntry,
    inputs: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Phase 0 with the first SM as helper, then phase 1 for the SMs whose first touch did not
    split, with a helper whose first touch did."""
    from ..analysis.l2.l2_slices import first_touch_gap, partition_splits

    facts = backend.facts()
    sms = p.sms if p.sms is not None else tuple(range(facts.sm_count))
    flush = p.flush_bytes
    if flush is None:
        flush = FLUSH_L2_MULTIPLE * (facts.l2_bytes or 64 << 20)
    offsets = line_offsets(lines=p.lines, region_bytes=p.region_bytes, seed=p.line_seed)
    frames: list[list[dict]] = []  # per walked SM, the columns of its repetitions' rows
    total = [len(sms) * p.repetitions]

    def walk(phase: int, helper: int, target: int) -> dict | None:
        """The columns of the rows of one SM's repetitions (None: skipped)."""
        got = []
        work = L2SliceWork(  # the same work every repetition
            region_bytes=p.region_bytes,
            offsets_bytes=offsets,
            helper_sm=helper,
            target_sm=target,
            passes=PASSES,
            flush_bytes=flush,
        )
        for rep in range(p.repetitions):
            r = backend.run(work, seed=len(frames) * p.repetitions + rep + 7919 * phase)
            if progress:
                progress(len(frames) * p.repetitions + rep + 1, total[0])
            if r.sm < 0 or r.helper_sm < 0:
                return None  # no block of the grid landed on that SM: skip it
            got.append(_columns(phase, work, rep, r))
        frames.append(got)
        return {c: np.concatenate([g[c] for g in got]) for c in ("pass", "offset_bytes", "cycles")}

    first = {}
    for target in sms:
        f = walk(0, sms[0], target)
        if f is not None:
            first[target] = f
    gaps = {t: first_touch_gap(f) for t, f in first.items()}
    split = partition_splits(gaps)
    # the second helper: the SM whose first touches split widest (surely of the other partition)
    helpers = sorted((t for t in sms if split.get(t)), key=lambda t: -gaps[t])
    rest = [t for t in sms if t in split and not split[t]]
    if helpers and rest:
        total[0] += len(rest) * p.repetitions
        for target in rest:
            walk(1, helpers[0], target)
    parts = [part for got in frames for part in got]
    if p.contention_lines:
        parts += contention_phase(backend, p, offsets, flush, progress)  # lines placed
    if not parts:
        return pd.DataFrame({f.name: pd.Series(dtype=f.type.to_pandas_dtype()) for f in SCHEMA})
    return _frame_of(parts)
