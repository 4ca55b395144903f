"""Per-access hit/miss classification and the first array size that misses.

A cache that replaces at random (the Fermi L1) misses only now and then when the array is a line
or two larger than the cache, so the mean latency hardly moves while the per-access latencies
already show misses. This detector works on the accesses themselves: it learns the hit latency
and the rate of timing outliers from the smallest arrays (which fit), calls every slower access a
miss, and finds the first size whose miss count the outlier rate cannot explain (one-sided
binomial test), and after which every larger size misses too.

Hits may come at more than one latency level: an L2 in partitions that keeps no near copy of a
far line serves every footprint that fits from both partitions, by address, so the smallest
sizes hold near and far hits side by side (`hit_levels`). A level of the reference sizes is a
hit level when a gap wider than the miss margin separates it from the level below and it holds
at least `min_level_share` of every reference size's accesses (a timing outlier, or a miss, is
rare there). With more than one hit level, the hit band reaches to the slowest one (its median
plus the margin); a latency level that the reference sizes lack is a miss (DRAM), however close
the far hits came to it. With one level the band is the old one (the median plus the margin).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...exceptions import AnalysisError

_MAD_TO_SIGMA = 1.4826


def binom_sf(k, n, p):
    """P(X > k) for X ~ Binomial(n, p) (scipy.stats.binom.sf), imported lazily: scipy.stats
    costs most of a short job's start-up and the sweeps import this module too."""
    from scipy.special import bdtrc

    return bdtrc(k, n, p)


def hit_levels(
    reference: Sequence[np.ndarray],
    *,
    min_margin_cycles: float,
    min_relative_margin: float,
    min_share: float,
) -> list[np.ndarray]:
    """The latency levels of the reference sizes' accesses, fastest first: the sorted
    latencies split where a gap exceeds the miss margin above the latency below it (the gap a
    miss must clear), keeping the groups that hold at least `min_share` of every reference
    size's accesses. A faster group that fails the share is dropped; one at most, where there
    is no gap, the whole reference."""
    pooled = np.sort(np.concatenate(reference))
    gaps = np.diff(pooled)
    margin = np.maximum(min_margin_cycles, min_relative_margin * pooled[:-1])
    cuts = np.flatnonzero(gaps > margin) + 1
    bounds = [0, *cuts.tolist(), pooled.size]
    kept = []
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        low, high = pooled[lo], pooled[hi - 1]
        shares = [np.mean((g >= low) & (g <= high)) for g in reference]
        if min(shares) >= min_share:
            kept.append(pooled[lo:hi])
    return kept if len(kept) > 1 else [pooled]


@dataclass(frozen=True)
class FirstMiss:
    index: int  # position in x of the first size that misses
    x_before: float  # largest size with no significant misses
    x_after: float  # first size with significant misses
    hit_latency_cycles: float
    threshold_cycles: float
    outlier_rate: float  # share of slow accesses among the reference (all-hit) sizes
    miss_counts: tuple[int, ...]  # per size
    accesses: tuple[int, ...]  # per size
    p_value: float  # binomial test at x_after (Bonferroni-corrected over the sizes tested)
    # tested sizes below the bound whose misses were significant too (positions in x), and how
    # many sizes below the bound were tested: a sustained first miss after isolated ones is a
    # gradual onset, whose bound depends on which sizes were sampled
    earlier: tuple[int, ...] = ()
    tested_before: int = 0

    @property
    def confidence(self) -> float:
        gradual = len(self.earlier) / self.tested_before if self.tested_before else 0.0
        return float(max(0.0, 1.0 - self.p_value) * (1.0 - gradual))

    def earlier_note(self, x: Sequence[float], unit: str = " bytes") -> str:
        """Evidence text for the significant misses below the bound ("" if none)."""
        if not self.earlier:
            return ""
        shown = ", ".join(
            f"{self.miss_counts[j]}/{self.accesses[j]} at {int(x[j])}{unit}"
            for j in self.earlier[:3]
        )
        return (
            f"; but {len(self.earlier)} of the {self.tested_before} smaller sizes tested also miss "
            f"more often than outliers explain ({shown}{', ...' if len(self.earlier) > 3 else ''}"
            "), not sustained: a gradual onset, whose first sustained miss depends on the sizes "
            "sampled (confidence lowered by their share)"
        )


@dataclass
class FirstMissDetector:
    """`fit(x, groups) -> self`; `.result` is a FirstMiss or None (no size misses).

    reference_sizes: how many of the smallest sizes define the hit latency and outlier rate.
    min_level_share: the least share of each reference size's accesses a second hit level
    holds (module docstring); `.hit_levels_` are the medians of the hit levels after `fit`.
    min_margin_cycles / min_relative_margin: the least a miss must exceed the hit latency by.
    alpha: significance of the binomial test, Bonferroni-corrected over the sizes.
    """

    reference_sizes: int = 2
    min_margin_cycles: float = 8.0
    min_relative_margin: float = 0.2
    alpha: float = 0.01
    min_level_share: float = 0.1
    result: FirstMiss | None = None
    reference_ok: bool = True
    hit_levels_: tuple[float, ...] = ()

    def fit(self, x: Sequence[float], groups: Sequence[np.ndarray]) -> FirstMissDetector:
        x = np.asarray(x, dtype=np.float64)
        if len(x) != len(groups) or len(x) < self.reference_sizes + 1:
            raise AnalysisError(
                f"need more sizes than the {self.reference_sizes} reference "
                f"sizes and one group per size (got {len(x)} sizes, "
                f"{len(groups)} groups)"
            )
        if np.any(np.diff(x) <= 0):
            raise AnalysisError("sizes must be strictly increasing")
        groups = [np.asarray(g, dtype=np.float64) for g in groups]
        if any(g.size == 0 for g in groups):
            raise AnalysisError("every size needs at least one sample")
        ref = np.concatenate(groups[: self.reference_sizes])
        levels = hit_levels(
            groups[: self.reference_sizes],
            min_margin_cycles=self.min_margin_cycles,
            min_relative_margin=self.min_relative_margin,
            min_share=self.min_level_share,
        )
        self.hit_levels_ = tuple(float(np.median(lv)) for lv in levels)
        # one level: the median of the reference; more: the slowest hit level bounds the band
        top = levels[-1] if len(levels) > 1 else ref
        hit = float(np.median(ref)) if len(levels) < 2 else self.hit_levels_[0]
        top_hit = float(np.median(top))
        sigma = _MAD_TO_SIGMA * float(np.median(np.abs(top - top_hit)))
        threshold = top_hit + max(
            6.0 * sigma, self.min_margin_cycles, self.min_relative_margin * top_hit
        )
        # Reference sizes should be at the lowest latency level of the sweep; if larger arrays
        # are markedly faster, the smallest arrays already missed and the detector cannot tell.
        # (With hits at two levels a size's median may fall on either: the lowest level is
        # compared.)
        medians = np.array([np.median(g) for g in groups])
        self.reference_ok = bool(hit <= medians.min() + max(self.min_margin_cycles, 0.1 * hit))
        outlier_rate = (np.sum(ref > threshold) + 1.0) / (ref.size + 2.0)
        counts = np.array([int(np.sum(g > threshold)) for g in groups])
        sizes = np.array([g.size for g in groups])
        tested = len(x) - self.reference_sizes
        # P(X >= k) under the outlier rate alone, Bonferroni over the tested sizes
        p = np.minimum(1.0, binom_sf(counts - 1, sizes, outlier_rate) * tested)
        significant = p < self.alpha
        significant[: self.reference_sizes] = False
        first = None
        for i in range(self.reference_sizes, len(x)):
            if significant[i] and significant[i:].mean() >= 0.9:
                first = i
                break
        self.result = (
            None
            if first is None
            else FirstMiss(
                index=first,
                x_before=float(x[first - 1]),
                x_after=float(x[first]),
                hit_latency_cycles=hit,
                threshold_cycles=float(threshold),
                outlier_rate=float(outlier_rate),
                miss_counts=tuple(int(c) for c in counts),
                accesses=tuple(int(s) for s in sizes),
                p_value=float(p[first]),
                earlier=tuple(int(j) for j in np.flatnonzero(significant[:first])),
                tested_before=first - self.reference_sizes,
            )
        )
        self._hit, self._threshold = hit, float(threshold)
        return self


def first_miss_bracket(sizes, groups, *, alpha: float = 0.01) -> tuple[int, int] | None:
    """The decision an adaptive size sweep asks for (`sizesearch.search_size`): the largest
    size that fits and the first that misses, by `FirstMissDetector`; None while no size misses
    (or while the smallest sizes are not a clean reference of hits)."""
    det = FirstMissDetector(alpha=alpha).fit(sizes, groups)
    if not det.reference_ok or det.result is None:
        return None
    return int(det.result.x_before), int(det.result.x_after)


# The first-miss bracket is clear-cut when the last size that fits shows no more slow accesses
# than timing outliers explain at this probability, and the first that misses is significant at
# this share of the test's alpha.
SETTLED_FIT_P = 0.5
SETTLED_MISS_SHARE = 0.01


def bound_settled(sizes, groups, *, alpha: float = 0.01) -> bool:
    """The decision an adaptive size sweep asks for after its dense sweep
    (`sizesearch.search_size`): whether the first-miss bracket is clear-cut, or its two sizes
    should be measured again (a cache that starts missing on a few accesses in a thousand: one
    launch may or may not call that size a miss). True where there is no bracket."""
    det = FirstMissDetector(alpha=alpha).fit(sizes, groups)
    r = det.result
    if not det.reference_ok or r is None:
        return True
    i = r.index
    fit_p = float(binom_sf(r.miss_counts[i - 1] - 1, r.accesses[i - 1], r.outlier_rate))
    return fit_p >= SETTLED_FIT_P and r.p_value < SETTLED_MISS_SHARE * alpha
