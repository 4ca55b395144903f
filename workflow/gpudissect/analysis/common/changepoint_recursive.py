"""Several change points by Größler's single-change-point method, applied recursively.

The thesis (Sec. 3.3) maps a sweep to one optimal change point ("Opt" with one breakpoint) and
confirms it with a two-sample Kolmogorov-Smirnov test on the per-access latencies at a level
alpha. A curve with several steps (L1, L2, DRAM) has several change points: here each confirmed
one splits the sweep in two and the same test runs on each part (binary segmentation), until no
part has a confirmed change point or `max_depth` is reached. Every change point keeps its own
p-value (Bonferroni-adjusted for the choice of the split, `changepoint.Changepoints`) and its
confidence 1 - p. `changepoint.find_steps` finds several change points at once with a penalty
instead; this is the thesis's own procedure, for callers that want it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .changepoint import Changepoints
from .sweep_steps import Step


def recursive_steps(
    x: Sequence[float],
    groups: Sequence,
    *,
    alpha: float = 0.01,
    min_size: int = 2,
    min_relative_step: float = 0.0,
    max_depth: int = 8,
) -> list[Step]:
    """Confirmed level changes of the sweep (x, per-x raw samples), in order of x."""
    xs = np.asarray(x, dtype=float)
    groups = [np.asarray(g, dtype=float).ravel() for g in groups]
    summary = np.array([np.median(g) for g in groups])
    steps: list[Step] = []
    todo = [(0, len(xs), 0)]
    while todo:
        lo, hi, depth = todo.pop()
        if hi - lo < 2 * min_size or depth >= max_depth:
            continue
        est = Changepoints(
            min_size=min_size,
            penalty=0.0,
            max_breakpoints=1,
            alpha=alpha,
            test="ks",
            min_relative_step=min_relative_step,
        ).fit(summary[lo:hi], groups=groups[lo:hi])
        if not est.breakpoints_:
            continue
        b = est.breakpoints_[0]
        i = lo + b.index
        steps.append(
            Step(
                index=i,
                x_before=float(xs[i - 1]),
                x_after=float(xs[i]),
                level_before=b.level_before,
                level_after=b.level_after,
                confidence=b.confidence,
                p_value=b.p_value,
                method=f"recursive single change point (Opt, 1 breakpoint) + ks test "
                f"(alpha={alpha:g}), depth {depth}",
            )
        )
        todo += [(lo, i, depth + 1), (i, hi, depth + 1)]
    return sorted(steps, key=lambda s: s.index)
