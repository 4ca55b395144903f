"""Latency levels of TLB walks and per-launch miss counts (the `tlbs` analysis, TPDS Sec. 4.4):
the discrete levels of a latency histogram, which level a latency falls in, and the slow
accesses per traversal of a cyclic walk. Sees only latencies and addresses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_MAD_TO_SIGMA = 1.4826
ELEMENT_BYTES = 4  # the chase's element (the trace's positions count these)


@dataclass(frozen=True)
class Level:
    center: float  # median latency of the samples in the level
    lo: float  # samples in [lo, hi) belong to it
    hi: float
    count: int


def robust_sigma(values: np.ndarray) -> float:
    """Gaussian-equivalent spread (1.4826 MAD), at least 0.5 cycle (latencies are integers)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return 0.5
    return max(0.5, _MAD_TO_SIGMA * float(np.median(np.abs(v - np.median(v)))))


def find_levels(
    values: np.ndarray,
    *,
    sigma: float,
    min_count: int = 8,
    min_share: float = 0.002,
    valley_ratio: float = 0.6,
) -> list[Level]:
    """The discrete latency levels of `values` (ascending): peaks of the 1-cycle histogram,
    lightly smoothed, separated by valleys below `valley_ratio` of the smaller peak; levels with
    fewer than max(min_count, min_share * n) samples (timing outliers) are dropped."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return []
    # far outliers (preemption on a GPU) would make the histogram huge: ignore beyond 50x median
    v = v[v <= 50 * max(np.median(v), 1.0)]
    lo = np.floor(v.min()) - 8
    bins = np.floor(v - lo).astype(np.int64)
    hist = np.bincount(bins, minlength=int(bins.max()) + 9).astype(np.float64)
    width = max(0.6, 0.45 * sigma)
    half = int(np.ceil(4 * width))
    kernel = np.exp(-0.5 * (np.arange(-half, half + 1) / width) ** 2)
    smooth = np.convolve(hist, kernel / kernel.sum(), mode="same")
    mid = smooth[1:-1]
    peaks = (np.flatnonzero((mid > smooth[:-2]) & (mid >= smooth[2:]) & (mid > 1e-9)) + 1).tolist()
    if not peaks:
        return []
    # basins: [edge_k, edge_k+1) around each peak, edges at the lowest point between peaks
    edges = [0]
    for a, b in zip(peaks[:-1], peaks[1:], strict=True):
        edges.append(a + int(np.argmin(smooth[a : b + 1])))
    edges.append(len(smooth))
    basins = [[p, edges[k], edges[k + 1]] for k, p in enumerate(peaks)]
    merged = True
    while merged and len(basins) > 1:  # merge peaks that no clear valley separates
        merged = False
        for k in range(len(basins) - 1):
            a, b = basins[k], basins[k + 1]
            valley = smooth[a[2]] if a[2] < len(smooth) else 0.0
            if valley > valley_ratio * min(smooth[a[0]], smooth[b[0]]):
                top = a[0] if smooth[a[0]] >= smooth[b[0]] else b[0]
                basins[k : k + 2] = [[top, a[1], b[2]]]
                merged = True
                break
    need = max(min_count, min_share * v.size)
    # the samples of a basin or a level are a slice of the sorted values (the bins rise with
    # the values): one sort instead of a pass over all samples per basin
    v = np.sort(v)
    bins = np.floor(v - lo).astype(np.int64)
    kept = []
    for _, a, b in basins:
        inside = v[np.searchsorted(bins, a, "left") : np.searchsorted(bins, b, "left")]
        if inside.size >= need:
            kept.append((float(np.median(inside)), lo + a, lo + b))
    # between two levels the boundary is the midpoint of their medians: the valley of the
    # pooled histogram leans towards the smaller level, which would count its tail as the other
    levels = []
    for k, (center, a, b) in enumerate(kept):
        lower = a if k == 0 else (kept[k - 1][0] + center) / 2
        upper = b if k == len(kept) - 1 else (center + kept[k + 1][0]) / 2
        count = np.searchsorted(v, upper, "left") - np.searchsorted(v, lower, "left")
        levels.append(Level(center, float(lower), float(upper), int(count)))
    return levels


def assign(values: np.ndarray, levels: list[Level]) -> np.ndarray:
    """Index of the level each value falls in (-1: in none, e.g. a timing outlier)."""
    v = np.asarray(values, dtype=np.float64)
    out = np.full(v.shape, -1, dtype=np.int64)
    for k, lev in enumerate(levels):
        out[(v >= lev.lo) & (v < lev.hi)] = k
    return out


def level_containing(levels: list[Level], value: float) -> int | None:
    for k, lev in enumerate(levels):
        if lev.lo <= value < lev.hi:
            return k
    return None


# --- per-launch statistics --------------------------------------------------------------------
def misses_per_traversal(slow: np.ndarray, elements: int) -> tuple[float, float]:
    """Median and spread (max - min) of the slow accesses per full traversal of a cyclic walk
    of `elements` elements (consecutive windows of `elements` recorded steps). The median
    ignores a traversal with a stray timing outlier."""
    n = len(slow) // elements
    if n == 0:
        return float(np.sum(slow)) * elements / max(len(slow), 1), float("nan")
    per = np.asarray(slow[: n * elements]).reshape(n, elements).sum(axis=1)
    return float(np.median(per)), float(per.max() - per.min())


def at_or_above(values: np.ndarray, levels: list[Level], k: int) -> np.ndarray:
    """Whether each value lies in level k or a higher one (values in no level, such as timing
    outliers between levels, do not count)."""
    idx = assign(values, levels)
    return idx >= k


def miss_spacing(addresses: np.ndarray, slow: np.ndarray) -> tuple[int | None, float]:
    """The most common positive address distance between consecutive slow accesses, and the
    share of distances equal to it."""
    a = np.asarray(addresses)[np.asarray(slow, dtype=bool)]
    d = np.diff(a)
    d = d[d > 0]
    if d.size == 0:
        return None, 0.0
    values, counts = np.unique(d, return_counts=True)
    k = int(np.argmax(counts))
    return int(values[k]), float(counts[k] / d.size)


def merged_level(parts: list[Level], center: float) -> Level:
    """One level spanning `parts` (their samples together), centred at `center`."""
    return Level(
        center,
        min(lv.lo for lv in parts),
        max(lv.hi for lv in parts),
        sum(lv.count for lv in parts),
    )
