"""Level changes of a sweep: swept sizes `x` and, per size, the group of raw latency samples
measured there, segmented by `changepoint.Changepoints` (Größler's method: optimal partitioning
confirmed by a two-sample test). `find_steps` lists the confirmed steps; `first_rise` is the
first significant rise (where a sweep leaves a cache).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gpudissect.exceptions import AnalysisError

from .changepoint import SUMMARIES, Changepoints, as_groups


@dataclass(frozen=True)
class Step:
    """A confirmed level change in a sweep: the segment starting at `x_after` (= x[index]).

    `x_before` is the last x of the lower-index segment, `level_*` the medians of the per-x
    summary over the two segments, `p_value` the (adjusted) test's on the raw samples of the
    two segments, `confidence` = 1 - p_value, `method` how it was found.
    """

    index: int
    x_before: float
    x_after: float
    level_before: float
    level_after: float
    confidence: float
    p_value: float
    method: str

    @property
    def rise(self) -> float:
        """level_after - level_before (negative for a drop)."""
        return self.level_after - self.level_before


def find_steps(
    x,
    groups: Sequence,
    *,
    summary: str = "median",
    min_size: int = 2,
    penalty: float | None = None,
    max_breakpoints: int | None = None,
    cost: str = "l1",
    alpha: float = 0.01,
    test: str = "ks",
    test_window: int | None = None,
    min_relative_step: float = 0.0,
) -> list[Step]:
    """Steps in a sweep: segment the per-x `summary` of `groups`, test on the raw samples.

    `x` are the swept values (e.g. array sizes), strictly increasing; `groups[i]` the raw
    samples measured at `x[i]` (groups may differ in size). `summary` is "median" (robust to
    outliers) or "mean" (sees a cache that misses on only part of the accesses, which raises
    the mean before it moves the median). The other keywords are those of `Changepoints`.
    """
    if summary not in SUMMARIES:
        raise AnalysisError(f"unknown summary {summary!r}; choose one of {sorted(SUMMARIES)}")
    xs = np.asarray(x)
    if xs.ndim != 1 or xs.size == 0:
        raise AnalysisError(f"x must be a non-empty 1-D sequence, got shape {xs.shape}")
    if not np.all(np.isfinite(xs.astype(float))):
        raise AnalysisError("x has NaN/inf values; every swept value must be a finite number")
    if np.any(np.diff(xs) <= 0):
        raise AnalysisError(
            "x must be strictly increasing; sort the sizes (with their groups) and merge repeats"
        )
    arrays = as_groups(groups, len(xs))
    signal = np.array([SUMMARIES[summary](a) for a in arrays])
    detector = Changepoints(
        min_size=min_size,
        penalty=penalty,
        max_breakpoints=max_breakpoints,
        cost=cost,
        alpha=alpha,
        test=test,
        test_window=test_window,
        min_relative_step=min_relative_step,
    ).fit(signal, groups=arrays)
    method = f"{detector.method} on the per-x {summary}"
    return [
        Step(
            index=b.index,
            x_before=xs[b.index - 1].item(),
            x_after=xs[b.index].item(),
            level_before=b.level_before,
            level_after=b.level_after,
            confidence=b.confidence,
            p_value=b.p_value,
            method=method,
        )
        for b in detector.breakpoints_
    ]


def first_rise(
    x,
    groups: Sequence,
    *,
    min_relative_step: float = 0.05,
    summary: str = "median",
    min_size: int = 2,
    penalty: float | None = None,
    max_breakpoints: int | None = None,
    cost: str = "l1",
    alpha: float = 0.01,
    test: str = "ks",
    test_window: int | None = None,
) -> Step | None:
    """The first confirmed step up by at least `min_relative_step` of the level before it.

    None when no such step passes the test (the cache is larger than the largest x, or the
    sweep does not reach past it). Other keywords as in `find_steps`.
    """
    steps = find_steps(
        x,
        groups,
        summary=summary,
        min_size=min_size,
        penalty=penalty,
        max_breakpoints=max_breakpoints,
        cost=cost,
        alpha=alpha,
        test=test,
        test_window=test_window,
        min_relative_step=min_relative_step,
    )
    for step in steps:
        if step.rise > 0:
            return step
    return None
