"""Change points in latency staircases: optimal segmentation, confirmed by a two-sample test.

The method is Größler's (thesis, ch. 3.3): estimate change points with the exact dynamic
programme "Opt" (Truong, Oudre & Vayatis, "A review of change point detection methods") on a
robust cost, then confirm each one with a two-sample Kolmogorov-Smirnov test and drop those the
test cannot confirm. Unlike the thesis we allow any number of change points (a P-chase sweep over
L1, L2 and DRAM sizes has several) and choose their number with a penalty.

`Changepoints` is a ruptures-style estimator: keyword-only constructor, `fit(signal) -> self`,
`predict() -> breakpoints`, where a breakpoint is the index of the first sample of a new segment
and the list ends with `len(signal)`. `sweep_steps.find_steps` and `sweep_steps.first_rise` wrap
it for the usual input of the pipeline: swept sizes `x` and, per size, the group of raw latency
samples measured there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from gpudissect.exceptions import AnalysisError

# Multiplies sigma * log(n) (l1) or sigma**2 * log(n) (l2) in the default penalty. A split of
# pure Gaussian noise lowers the l1 cost by about 0.63 * sigma * chi2(1) and the l2 cost by
# sigma**2 * chi2(1), so these sit above the classical 2 * sigma**2 * log(n) (Yao's BIC for a
# change in mean). Checked on seeded flat signals of 20-300 points (Gaussian, Laplace, t3): with
# the test after it, under 1% of them get a change point.
_L1_PENALTY_FACTOR = 2.5
_L2_PENALTY_FACTOR = 4.0
# 1 / Phi^-1(3/4): turns a median absolute deviation into a Gaussian standard deviation.
_MAD_TO_SIGMA = 1.4826


def _cost_matrix_l1(signal: np.ndarray, min_size: int) -> np.ndarray:
    """cost[s, t] = sum |signal[s:t] - median(signal[s:t])|, inf where t - s < min_size."""
    n = len(signal)
    cost = np.full((n + 1, n + 1), np.inf)
    for length in range(min_size, n + 1):
        windows = np.sort(sliding_window_view(signal, length), axis=1)
        half = length // 2
        # Sum of absolute deviations from the median = top half minus bottom half (sorted).
        values = windows[:, length - half :].sum(axis=1) - windows[:, :half].sum(axis=1)
        starts = np.arange(n - length + 1)
        cost[starts, starts + length] = values
    return cost


def _cost_matrix_l2(signal: np.ndarray, min_size: int) -> np.ndarray:
    """cost[s, t] = sum (signal[s:t] - mean(signal[s:t]))**2, inf where t - s < min_size."""
    n = len(signal)
    sums = np.concatenate([[0.0], np.cumsum(signal)])
    squares = np.concatenate([[0.0], np.cumsum(signal**2)])
    start, end = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    length = end - start
    with np.errstate(divide="ignore", invalid="ignore"):
        cost = (squares[end] - squares[start]) - (sums[end] - sums[start]) ** 2 / length
    cost = np.maximum(cost, 0.0)  # rounding can make a constant segment slightly negative
    cost[length < min_size] = np.inf
    return cost


# Explicit registries, as in ruptures: the name a caller passes -> the implementation.
COSTS: dict[str, Callable[[np.ndarray, int], np.ndarray]] = {
    "l1": _cost_matrix_l1,
    "l2": _cost_matrix_l2,
}


def _ks_p_value(before: np.ndarray, after: np.ndarray) -> float:
    """Two-sample Kolmogorov-Smirnov test (Größler 3.3.4): any change of distribution."""
    # The exact distribution is slow for large unequal samples, where the asymptotic one is
    # accurate anyway.
    method = "exact" if len(before) * len(after) <= 10_000 else "asymp"
    # scipy.stats is imported here, not with the module: adaptive sweeps import this module
    # to decide where to sweep next, and scipy.stats costs a GPU sweep job over a second
    from scipy.stats import ks_2samp

    return float(ks_2samp(before, after, method=method).pvalue)


def _welch_p_value(before: np.ndarray, after: np.ndarray) -> float:
    """Welch's t-test: a change of the mean. More sensitive than KS to a small fraction of slow
    accesses (a cache that starts to miss), less robust to outliers."""
    if len(before) < 2 or len(after) < 2:
        return 1.0
    from scipy.stats import ttest_ind

    p_value = float(ttest_ind(before, after, equal_var=False).pvalue)
    if np.isnan(p_value):  # both samples constant
        return 0.0 if np.mean(before) != np.mean(after) else 1.0
    return p_value


TESTS: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "ks": _ks_p_value,
    "welch": _welch_p_value,
}
SUMMARIES: dict[str, Callable[[np.ndarray], float]] = {
    "median": lambda samples: float(np.median(samples)),
    "mean": lambda samples: float(np.mean(samples)),
}


def noise_sigma(signal: np.ndarray) -> float:
    """Robust noise scale of a piecewise-constant signal, from the MAD of its first differences.

    Differencing removes the levels, so steps and isolated outliers barely move the estimate.
    When more than half of the differences are equal (noise-free or coarsely quantised data)
    the MAD is 0; half the smallest non-zero difference (the data's resolution) is used then.
    """
    diffs = np.diff(np.asarray(signal, dtype=float))
    if diffs.size == 0 or not np.any(diffs):
        return 0.0
    mad = np.median(np.abs(diffs - np.median(diffs)))
    sigma = _MAD_TO_SIGMA * mad / np.sqrt(2.0)
    if sigma > 0:
        return float(sigma)
    return float(0.5 * np.min(np.abs(diffs[diffs != 0])))


def _median_standard_error(groups: Sequence[np.ndarray]) -> float:
    """The noise of a per-point median read from the points' own samples: the median over the
    points of 1.2533 * sigma / sqrt(m) (a median's standard error), sigma from each point's MAD;
    0 where the samples of most points do not spread."""
    errors = [
        1.2533 * _MAD_TO_SIGMA * float(np.median(np.abs(a - np.median(a)))) / np.sqrt(len(a))
        for a in groups
        if len(a) > 1
    ]
    return float(np.median(errors)) if errors else 0.0


def _default_penalty(
    signal: np.ndarray, cost: str, groups: Sequence[np.ndarray] | None = None
) -> float:
    n = len(signal)
    sigma = noise_sigma(signal)
    diffs = np.diff(signal)
    if groups is not None and diffs.size and np.median(np.abs(diffs - np.median(diffs))) == 0:
        # the differences do not spread (noise-free plateaus): their resolution would be the
        # smallest step, which hides steps as large; the samples behind each point say how
        # much a point's median can move
        within = _median_standard_error(groups)
        if 0.0 < within < sigma:
            sigma = within
    if sigma == 0.0:
        return 1.0  # constant signal: any positive penalty keeps it in one segment
    if cost == "l2":
        return _L2_PENALTY_FACTOR * sigma**2 * np.log(n)
    return _L1_PENALTY_FACTOR * sigma * np.log(n)


@dataclass(frozen=True)
class Breakpoint:
    """One confirmed change point of `Changepoints`: `index` is the first sample of the new segment.

    `level_*` are the medians of the signal over the neighbouring segments; `step` is
    `level_after - level_before`; `p_value` is the two-sample test's, Bonferroni-adjusted for
    the choice of the split; `confidence` is `1 - p_value`.
    """

    index: int
    level_before: float
    level_after: float
    step: float
    p_value: float
    confidence: float

    def is_relevant(self, min_relative_step: float) -> bool:
        return abs(self.step) >= min_relative_step * abs(self.level_before)


class Changepoints:
    """Optimal piecewise-constant segmentation of a 1-D signal, each change point tested.

    Parameters (keyword-only):
        min_size: fewest samples in a segment.
        penalty: cost of one more change point; None for a robust BIC-like default
            (2.5 * sigma * log(n) for l1, 4 * sigma**2 * log(n) for l2, sigma from the MAD
            of the first differences), so that a flat noisy signal has no change point.
        max_breakpoints: most change points to consider; None for no limit. With `penalty=0`
            this gives exactly that many candidates, which the test then confirms or drops
            (Größler's single change point is `max_breakpoints=1, penalty=0`).
        cost: "l1" (sum of absolute deviations from the segment median; robust to outliers)
            or "l2" (squared deviations from the segment mean).
        alpha: significance level; change points whose p-value, multiplied by the number of
            positions the split could have taken between its neighbours (Bonferroni), exceeds
            alpha are dropped.
        test: "ks" (two-sample Kolmogorov-Smirnov, as in Größler) or "welch" (Welch's t-test
            on the means; sees a small fraction of slow samples sooner, but is not robust).
        test_window: when set, the test compares the samples of at most this many points on
            each side of a change point instead of those of the whole neighbouring segments.
        min_relative_step: change points whose |step| is below this fraction of the level
            before them are dropped like insignificant ones (0: keep every significant one).
            With thousands of raw samples per point the test confirms even changes of a cycle.

    After `fit`, `breakpoints_` holds the confirmed `Breakpoint`s, `candidates_` the indices
    the segmentation proposed before testing, `penalty_` the penalty used.
    """

    def __init__(
        self,
        *,
        min_size: int = 2,
        penalty: float | None = None,
        max_breakpoints: int | None = None,
        cost: str = "l1",
        alpha: float = 0.01,
        test: str = "ks",
        test_window: int | None = None,
        min_relative_step: float = 0.0,
    ) -> None:
        _check_int("min_size", min_size, minimum=1)
        if penalty is not None and not (np.isfinite(penalty) and penalty >= 0):
            raise AnalysisError(f"penalty must be a finite number >= 0 or None, got {penalty!r}")
        if max_breakpoints is not None:
            _check_int("max_breakpoints", max_breakpoints, minimum=0)
        if cost not in COSTS:
            raise AnalysisError(f"unknown cost {cost!r}; choose one of {sorted(COSTS)}")
        if not 0 < alpha < 1:
            raise AnalysisError(f"alpha must lie strictly between 0 and 1, got {alpha!r}")
        if test not in TESTS:
            raise AnalysisError(f"unknown test {test!r}; choose one of {sorted(TESTS)}")
        if test_window is not None:
            _check_int("test_window", test_window, minimum=1)
        if not min_relative_step >= 0:
            raise AnalysisError(f"min_relative_step must be >= 0, got {min_relative_step!r}")
        self.min_size = int(min_size)
        self.penalty = penalty
        self.max_breakpoints = max_breakpoints
        self.cost = cost
        self.alpha = alpha
        self.test = test
        self.test_window = test_window
        self.min_relative_step = min_relative_step

    @property
    def method(self) -> str:
        """How the change points were found, for result records."""
        return f"opt/{self.cost} + {self.test} test (alpha={self.alpha:g})"

    def fit(self, signal, *, groups: Sequence | None = None) -> Changepoints:
        """Segment `signal` and test each change point; return self.

        `groups[i]`, if given, are the raw samples behind `signal[i]`: the test then compares the
        pooled raw samples of the neighbouring segments, otherwise their signal values.
        """
        self._signal = _as_signal(signal)
        n = len(self._signal)
        if groups is None:
            self._samples, self._offsets = self._signal, np.arange(n + 1)
        else:
            arrays = as_groups(groups, n)
            self._samples = np.concatenate(arrays)
            self._offsets = np.concatenate([[0], np.cumsum([len(a) for a in arrays])])
        self.penalty_ = (
            _default_penalty(self._signal, self.cost, None if groups is None else arrays)
            if self.penalty is None
            else self.penalty
        )
        self.candidates_ = self._segment()
        self.breakpoints_ = tuple(self._confirm(self.candidates_))
        return self

    def predict(self) -> list[int]:
        """Confirmed breakpoints, ruptures-style: first index of each new segment, then n."""
        if not hasattr(self, "breakpoints_"):
            raise AnalysisError("call fit(signal) before predict()")
        return [b.index for b in self.breakpoints_] + [len(self._signal)]

    def _segment(self) -> list[int]:
        n, min_size = len(self._signal), self.min_size
        most = n // min_size - 1
        if most < 1:
            return []
        cost = COSTS[self.cost](self._signal, min_size)
        if self.max_breakpoints is None:
            return _optimal_partitioning(cost, self.penalty_)
        return _opt(cost, min(self.max_breakpoints, most), self.penalty_)

    def _confirm(self, candidates: list[int]) -> list[Breakpoint]:
        """Backward elimination: drop the weakest failing change point, merge, re-test the rest.

        Dropping one at a time matters: the neighbours of a dropped change point are tested
        again against the merged, larger segment.
        """
        n = len(self._signal)
        kept = list(candidates)
        tested: dict[tuple[int, int, int], Breakpoint] = {}
        while kept:
            bounds = [0, *kept, n]
            results = []
            for lo, index, hi in zip(bounds, bounds[1:], bounds[2:], strict=False):
                if (lo, index, hi) not in tested:
                    tested[lo, index, hi] = self._test(lo, index, hi)
                results.append(tested[lo, index, hi])
            failing = [
                i
                for i, b in enumerate(results)
                if b.p_value > self.alpha or not b.is_relevant(self.min_relative_step)
            ]
            if not failing:
                return results
            weakest = max(failing, key=lambda i: (results[i].p_value, -abs(results[i].step)))
            del kept[weakest]
        return []

    def _test(self, lo: int, index: int, hi: int) -> Breakpoint:
        """Test the change at `index` between the segments [lo, index) and [index, hi)."""
        near_lo, near_hi = lo, hi
        if self.test_window is not None:
            near_lo, near_hi = max(lo, index - self.test_window), min(hi, index + self.test_window)
        before = self._samples[self._offsets[near_lo] : self._offsets[index]]
        after = self._samples[self._offsets[index] : self._offsets[near_hi]]
        # The segmentation chose this split as the best of `positions` admissible ones, so a
        # test on the same data gives a far too optimistic raw p-value (on pure noise a raw KS
        # test at 0.01 confirms the best single split ~15% of the time). Bonferroni over those
        # positions bounds the false-alarm rate again.
        positions = max(1, hi - lo - 2 * self.min_size + 1)
        p_value = min(1.0, TESTS[self.test](before, after) * positions)
        level_before = float(np.median(self._signal[lo:index]))
        level_after = float(np.median(self._signal[index:hi]))
        return Breakpoint(
            index=index,
            level_before=level_before,
            level_after=level_after,
            step=level_after - level_before,
            p_value=p_value,
            confidence=float(np.clip(1.0 - p_value, 0.0, 1.0)),
        )


def _check_int(name: str, value, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise AnalysisError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _optimal_partitioning(cost: np.ndarray, penalty: float) -> list[int]:
    """Exact minimiser of sum(segment costs) + penalty * (number of change points). O(n^2)."""
    n = cost.shape[0] - 1
    best = np.full(n + 1, np.inf)
    best[0] = -penalty  # the first segment is free
    previous = np.zeros(n + 1, dtype=int)
    for end in range(1, n + 1):
        totals = best[:end] + cost[:end, end]
        start = int(np.argmin(totals))  # ties go to the earliest start: fewer change points
        best[end], previous[end] = totals[start] + penalty, start
    return _backtrack(previous, n)


def _opt(cost: np.ndarray, max_breakpoints: int, penalty: float) -> list[int]:
    """Opt (Truong et al.): best segmentation with k = 0..max_breakpoints change points; the k
    minimising cost + penalty * k wins (ties to the smaller k)."""
    n = cost.shape[0] - 1
    best = np.full((max_breakpoints + 1, n + 1), np.inf)
    previous = np.zeros((max_breakpoints + 1, n + 1), dtype=int)
    best[0] = cost[0]
    for k in range(1, max_breakpoints + 1):
        totals = best[k - 1][:, None] + cost  # totals[s, t]: k-1 change points before s
        previous[k] = np.argmin(totals, axis=0)
        best[k] = totals[previous[k], np.arange(n + 1)]
    scores = best[:, n] + penalty * np.arange(max_breakpoints + 1)
    k = int(np.argmin(scores))
    breakpoints, end = [], n
    for level in range(k, 0, -1):
        end = int(previous[level, end])
        breakpoints.append(end)
    return sorted(breakpoints)


def _backtrack(previous: np.ndarray, n: int) -> list[int]:
    breakpoints, end = [], n
    while end > 0:
        end = int(previous[end])
        if end > 0:
            breakpoints.append(end)
    return sorted(breakpoints)


def _as_signal(signal) -> np.ndarray:
    array = np.asarray(signal, dtype=float)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    if array.ndim != 1:
        raise AnalysisError(
            f"signal must be 1-D, got shape {array.shape}; reduce each point to one number first "
            "(e.g. the median latency per array size)"
        )
    if array.size == 0:
        raise AnalysisError("signal is empty; a change point needs at least two samples")
    bad = np.flatnonzero(~np.isfinite(array))
    if bad.size:
        raise AnalysisError(
            f"signal has {bad.size} NaN/inf value(s), first at index {bad[0]}; drop or re-measure "
            "those points"
        )
    return array


def as_groups(groups: Sequence, n: int) -> list[np.ndarray]:
    if len(groups) != n:
        raise AnalysisError(
            f"got {len(groups)} sample groups for {n} points; pass one group of raw samples per x"
        )
    arrays = []
    for i, group in enumerate(groups):
        array = np.asarray(group, dtype=float).ravel()
        if array.size == 0:
            raise AnalysisError(f"sample group {i} is empty; every x needs at least one sample")
        if not np.all(np.isfinite(array)):
            raise AnalysisError(
                f"sample group {i} has NaN/inf values; drop them or re-measure that point"
            )
        arrays.append(array)
    return arrays
