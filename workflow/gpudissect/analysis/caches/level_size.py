"""The size C of one cache level and its hit/miss classification (stage 1 of the fine-grained
P-chase, TPDS Sec. 4.2 step 1; see `cache_levels`): C is the largest array before the first size
whose slow accesses the timing-outlier rate cannot explain; the hit latency and the miss band
come from the arrays either side. Sees only latencies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..common.misses import FirstMissDetector


@dataclass(frozen=True)
class Classifier:
    """Hit/miss classification of one level: hits below `threshold_cycles`; misses in the band
    up to `ceiling_cycles` (accesses above it are timing outliers, or a miss with an outlier)."""

    hit_latency_cycles: float
    threshold_cycles: float
    outlier_rate: float
    ceiling_cycles: float = float("inf")

    def slow(self, latency: np.ndarray) -> np.ndarray:
        return np.asarray(latency, dtype=np.float64) > self.threshold_cycles

    def miss(self, latency: np.ndarray) -> np.ndarray:
        lat = np.asarray(latency, dtype=np.float64)
        return (lat > self.threshold_cycles) & (lat <= self.ceiling_cycles)


@dataclass(frozen=True)
class SizeFinding:
    size_bytes: int | None  # largest size that fits; None when undetermined
    next_bytes: int | None  # first size that misses
    reason: str | None  # why undetermined
    classifier: Classifier | None
    detector: FirstMissDetector | None
    sizes_bytes: np.ndarray
    groups: list[np.ndarray]

    @property
    def resolution_bytes(self) -> int | None:
        if self.size_bytes is None or self.next_bytes is None:
            return None
        return self.next_bytes - self.size_bytes


def locate_size(sizes_bytes, groups, *, alpha: float = 0.01) -> SizeFinding:
    """The first array size that misses (TPDS step 1) over per-size latency groups."""
    order = np.argsort(sizes_bytes)
    sizes = np.asarray(sizes_bytes, dtype=np.int64)[order]
    groups = [np.asarray(groups[i], dtype=np.float64) for i in order]
    if len(sizes) < 3:
        return SizeFinding(
            None, None, f"only {len(sizes)} sizes swept; need >= 3", None, None, sizes, groups
        )
    det = FirstMissDetector(alpha=alpha).fit(sizes, groups)
    ref = np.concatenate(groups[: det.reference_sizes])
    # hits at two levels: the fastest level's latency (the band reaches to the slowest)
    hit = det.hit_levels_[0] if len(det.hit_levels_) > 1 else float(np.median(ref))
    threshold = getattr(det, "_threshold", None)
    rate = (
        det.result.outlier_rate
        if det.result
        else (np.sum(ref > threshold) + 1.0) / (ref.size + 2.0)
    )
    classifier = Classifier(hit, float(threshold), float(rate))
    if not det.reference_ok:
        reason = (
            f"the smallest arrays ({sizes[0]} bytes) are slower than larger ones: they already "
            "miss; the cache is smaller than the swept range"
        )
        return SizeFinding(None, None, reason, classifier, det, sizes, groups)
    if det.result is None:
        reason = (
            f"no size between {sizes[0]} and {sizes[-1]} bytes misses more often than timing "
            f"outliers explain: the cache holds at least {sizes[-1]} bytes, or no cache of this "
            f"latency level ({hit:.0f} cycles) sits on the path"
        )
        return SizeFinding(None, None, reason, classifier, det, sizes, groups)
    r = det.result
    # the miss band: misses of this level come back at the next level's latency; far slower
    # accesses are timing outliers (or a miss hit by one) and do not mark a granule
    after = np.concatenate(groups[r.index :])
    slow = after[after > r.threshold_cycles]
    ceiling = float("inf")
    if slow.size >= 8:
        level = float(np.median(slow))
        spread = 1.4826 * float(np.median(np.abs(slow - level)))
        ceiling = level + max(6.0 * spread, 0.25 * (level - hit), 8.0)
    classifier = Classifier(hit, r.threshold_cycles, r.outlier_rate, ceiling)
    return SizeFinding(int(r.x_before), int(r.x_after), None, classifier, det, sizes, groups)


def level_latencies(finding: SizeFinding) -> dict[str, Any]:
    """Hit latency (arrays that fit; with hits at two levels, the fastest level's) and miss
    latency (misses of the arrays past the size)."""
    c = finding.classifier
    i = int(np.searchsorted(finding.sizes_bytes, finding.next_bytes))
    fits = np.concatenate(finding.groups[:i])
    after = np.concatenate(finding.groups[i:])
    misses = after[c.miss(after)]
    levels = finding.detector.hit_levels_ if finding.detector is not None else ()
    hits = fits
    if len(levels) > 1:
        # hits at two levels (misses.hit_levels: a partitioned L2 that keeps no near copy of a
        # far line): the hit latency is the fastest level's, not a median between the levels
        hits = fits[fits <= (levels[0] + levels[1]) / 2]
    med = float(np.median(hits))
    iqr = float(np.subtract(*np.percentile(hits, [75, 25])))
    out: dict[str, Any] = {
        "hit": med,
        "hit_iqr": iqr,
        "hit_n": int(hits.size),
        "hit_levels": tuple(round(v, 1) for v in levels) if len(levels) > 1 else (),
        "slower_hit_share": 1.0 - hits.size / fits.size,
        "miss": None,
        "miss_iqr": None,
        "miss_n": int(misses.size),
    }
    if misses.size:
        out["miss"] = float(np.median(misses))
        out["miss_iqr"] = float(np.subtract(*np.percentile(misses, [75, 25])))
    return out


def size_groups(df: pd.DataFrame) -> tuple[np.ndarray, list[np.ndarray]]:
    """(sizes, latency group per size) of one level's size-search rows."""
    by = df.groupby("array_bytes", sort=True)["latency_cycles"]
    sizes = np.array(sorted(by.groups), dtype=np.int64)
    return sizes, [by.get_group(s).to_numpy(np.float64) for s in sizes]
