"""The size search of Größler's thesis (Sec. 3.2), shared by every sweep that looks for a size
with no range given: double the array from a size that surely fits until the first-miss test
fires, halve the bracket (binary search) until it is a few resolution steps wide, then sweep it
densely at the resolution (the line or stride) around the bound. Where the bracket is not
clear-cut (`settled`, a second narrow function of the analysis), its two sizes are measured
again, their samples pooled with the earlier ones, up to `confirm_rounds` times, and a bracket
that moves is narrowed again: where a cache starts missing on a few accesses in a thousand, one
launch's test may or may not call that size a miss, run by run; the pooled samples decide. The
two smallest sizes, whose slow accesses give the test its rate of timing outliers, are measured
again with them, or the pooled samples gain power against a yardstick that stays as rough as it
was (a GTX980 twin's references showed one outlier in 8192 accesses where its profile draws one
in 2000, and 14 slow accesses in 12288 at the cache's own size then passed for a miss).
Last, sizes off the search's ladder are measured below the bound, in the gap down to the largest
size measured under it (`below_probes` of them, evenly spaced): on a real GPU the misses need not
grow with the size, so a search that only doubles and halves can step over where they begin (an
H100's L1 at carveout 100 with a 16 KiB shared buffer, its array copied from the host: 28 of
1024 accesses missed at 12288 bytes in a dense sweep, while searches that tried no size between
8192 and 16384 read 16384 bytes, with 1 slow access in 1024 there, run after run). Where the
probes miss and the misses go on from there, the bound moves down and that bracket is narrowed
in turn; where they miss only here and there, the analysis names them (a gradual onset).

The sweep measures; the analysis decides: `decide(sizes, groups)` is the one narrow function
through which a sweep asks the analysis where the first miss lies (STYLE.md: adaptive sweeps ask
the analysis through one narrow function per decision). Every size measured is a launch the
caller records in its trace, so the analysis later sees all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

# (sizes, per-size latency groups) -> (largest size that fits, first size that misses) or None
Decide = Callable[[Sequence[int], Sequence[np.ndarray]], "tuple[int, int] | None"]
# (sizes, per-size latency groups) -> whether the bracket is clear-cut (no confirmation needed)
Settled = Callable[[Sequence[int], Sequence[np.ndarray]], bool]
MIN_DECIDE_SIZES = 3  # the first-miss test needs two reference sizes and one to test
REFERENCE_SIZES = 2  # the smallest sizes, whose slow accesses give the test its outlier rate
MAX_RESUMES = 2  # times the doubling goes on after the confirmation dismissed a first miss
MAX_BELOW_ROUNDS = 3  # times the sizes below the bound are probed (again below a bound moved down)


@dataclass(frozen=True)
class SearchPlan:
    """Where the search starts and stops, and how fine it ends.

    start_bytes: the first size; it and twice it must fit (they are the test's reference).
    limit_bytes: the largest size tried (a device limit, such as 64 KiB of constant memory).
    resolution_bytes: the step of the dense sweep around the bound (every size is a multiple).
    dense_steps: the binary search stops when the bracket is at most this many steps wide.
    confirm_rounds: how many times the bracket's two sizes are measured again at most.
    below_probes: sizes measured below the bound, in the gap down to the largest size measured
      under it, when that gap is wider than the dense sweep (0: none).
    """

    start_bytes: int
    limit_bytes: int
    resolution_bytes: int
    dense_steps: int = 8
    confirm_rounds: int = 3
    below_probes: int = 3

    def __post_init__(self) -> None:
        r = self.resolution_bytes
        if r <= 0 or self.start_bytes < r or self.start_bytes % r:
            raise ValueError(
                f"start_bytes {self.start_bytes} must be a positive multiple of "
                f"resolution_bytes {r}"
            )
        if self.limit_bytes < 4 * self.start_bytes:
            raise ValueError(
                f"limit_bytes {self.limit_bytes} leaves no room to double from "
                f"{self.start_bytes} (need at least four times the start)"
            )
        if self.dense_steps < 1:
            raise ValueError(f"dense_steps must be at least 1, got {self.dense_steps}")
        if self.confirm_rounds < 0:
            raise ValueError(f"confirm_rounds must be at least 0, got {self.confirm_rounds}")
        if self.below_probes < 0:
            raise ValueError(f"below_probes must be at least 0, got {self.below_probes}")

    def align(self, n: int) -> int:
        """`n` rounded down to the resolution, within the limit."""
        return min(self.limit_bytes, n - n % self.resolution_bytes)


@dataclass
class SearchOutcome:
    """The bracket [fits_bytes, misses_bytes) of the bound, or None with the reason."""

    fits_bytes: int | None
    misses_bytes: int | None
    reason: str | None
    sizes: list[int] = field(default_factory=list)  # every launch's size, in the order run


def search_size(
    measure: Callable[[int], np.ndarray],
    decide: Decide,
    plan: SearchPlan,
    settled: Settled | None = None,
) -> SearchOutcome:
    """Doubling, binary search, a dense sweep and the bracket's confirmation; `measure(n)` runs
    (and records) launches at size n and returns their per-access latencies (a size measured
    again adds its new samples to the earlier ones)."""
    measured: dict[int, np.ndarray] = {}
    order: list[int] = []

    def point(n: int) -> None:
        if n not in measured:
            again(n)

    def again(n: int) -> None:
        new = np.asarray(measure(n), dtype=np.float64)
        measured[n] = np.concatenate([measured[n], new]) if n in measured else new
        order.append(n)

    def pooled() -> tuple[list[int], list[np.ndarray]]:
        sizes = sorted(measured)
        return sizes, [measured[s] for s in sizes]

    def ask() -> tuple[int, int] | None:
        return decide(*pooled()) if len(measured) >= MIN_DECIDE_SIZES else None

    width = plan.dense_steps * plan.resolution_bytes

    def narrow(bracket: tuple[int, int]) -> tuple[tuple[int, int] | None, str]:
        """2. binary search of the bracket down to dense_steps resolution steps; 3. the dense
        sweep at the resolution inside it."""
        while bracket is not None and bracket[1] - bracket[0] > width:
            mid = plan.align((bracket[0] + bracket[1]) // 2)
            if mid in measured or mid <= bracket[0]:
                break
            point(mid)
            bracket = ask()
        if bracket is None:
            return None, "the first miss vanished as sizes were added"
        lo, hi = bracket
        for m in range(plan.align(lo) + plan.resolution_bytes, hi, plan.resolution_bytes):
            point(m)
        bracket = ask()
        return bracket, "the first miss vanished in the dense sweep"

    n = plan.start_bytes
    for _ in range(1 + MAX_RESUMES):
        # 1. doubling until the first miss (or the limit)
        bracket = None
        while bracket is None:
            point(n)
            bracket = ask()
            if n >= plan.limit_bytes:
                break
            n = min(2 * n, plan.limit_bytes)
        if bracket is None:
            reason = (
                f"no first miss from {plan.start_bytes} to {max(measured)} bytes: the bound "
                f"lies beyond {max(measured)} bytes (the search's limit), or the smallest sizes "
                "already miss (the analysis tells which)"
            )
            return SearchOutcome(None, None, reason, order)
        bracket, why = narrow(bracket)
        # 4. while the bracket is not clear-cut, its two sizes again, pooled, `confirm_rounds`
        # times at most; where that moves the bracket to sizes not swept densely, it is
        # narrowed again
        for _ in range(plan.confirm_rounds if settled is not None else 0):
            if bracket is None:
                break
            if settled(*pooled()):
                break
            for m in (*sorted(measured)[:REFERENCE_SIZES], *bracket):
                again(m)
            bracket = ask()
            why = "the first miss vanished when the bound's sizes were measured again"
            if bracket is not None:
                bracket, why = narrow(bracket)
        if bracket is not None or n >= plan.limit_bytes:
            break
        # a first miss the pooled samples call timing outliers: doubling goes on from where it
        # stopped
    if bracket is None:
        return SearchOutcome(None, None, why, order)
    # 5. off the doubling ladder below the bound; a bound that moves down is narrowed again
    for _ in range(MAX_BELOW_ROUNDS if plan.below_probes else 0):
        probes = _below(bracket[0], measured, plan)
        if not probes:
            break
        for m in probes:
            point(m)
        moved = ask()
        if moved is None or moved[0] >= bracket[0]:
            break
        moved, _ = narrow(moved)
        if moved is None:
            break
        bracket = moved
    return SearchOutcome(int(bracket[0]), int(bracket[1]), None, order)


def _below(bound: int, measured: dict[int, np.ndarray], plan: SearchPlan) -> list[int]:
    """`plan.below_probes` sizes evenly inside the gap from the largest size measured under
    `bound` up to it, aligned to the resolution and not measured yet; none where the gap is no
    wider than the dense sweep (or nothing under `bound` was measured: the references)."""
    under = [n for n in measured if n < bound]
    if len(under) < 2:
        return []
    floor = max(under)
    if bound - floor <= plan.dense_steps * plan.resolution_bytes:
        return []
    k = plan.below_probes
    sizes = {plan.align(floor + (bound - floor) * j // (k + 1)) for j in range(1, k + 1)}
    return sorted(n for n in sizes if floor < n < bound and n not in measured)


# (sizes, per-size latency groups) -> brackets (before, after) of every latency step
FindSteps = Callable[[Sequence[int], Sequence[np.ndarray]], "list[tuple[int, int]]"]


def refine_steps(
    measure: Callable[[int], np.ndarray],
    find_steps: FindSteps,
    *,
    grid_bytes: Sequence[int],
    resolution_bytes: int,
    align_bytes: int,
    max_rounds: int = 8,
) -> list[tuple[int, int]]:
    """A coarse grid, then the midpoint of every step's bracket wider than `resolution_bytes`,
    until each is that narrow (a binary search per step, all steps at once): several steps
    (the L2's near and far partitions, then DRAM) each to the resolution. `measure(n)` runs and
    records the launches at size n; every size is a multiple of `align_bytes`."""
    measured: dict[int, np.ndarray] = {}

    def point(n: int) -> None:
        if n not in measured:
            measured[n] = np.asarray(measure(n), dtype=np.float64)

    def steps() -> list[tuple[int, int]]:
        sizes = sorted(measured)
        return find_steps(sizes, [measured[s] for s in sizes])

    for n in grid_bytes:
        point(n)
    brackets = steps()
    for _ in range(max_rounds):
        mids = []
        for lo, hi in brackets:
            mid = (lo + hi) // 2
            mid -= mid % align_bytes
            if hi - lo > resolution_bytes and lo < mid < hi and mid not in measured:
                mids.append(mid)
        if not mids:
            break
        for m in mids:
            point(m)
        brackets = steps()
    return brackets
