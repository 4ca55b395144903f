"""L2 hit latencies (the `l2` analysis, `analysis.l2.l2`): one level, or two distances. Otsu's split
of the hit latencies into two groups is kept where the groups lie at least `min_separation`
robust (MAD) standard deviations apart and each holds at least `min_share` of the accesses; rare
timing outliers that Otsu would split off are set aside first. Sees only latencies.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..common.result import quantity, undetermined


def one_hit_level(
    hits: np.ndarray, evidence: str, *, trimmed: np.ndarray | None = None
) -> dict[str, Any]:
    """The median of the L2 hits as one latency (its confidence from the spread of the hits
    without the slow outliers, `trimmed`)."""
    t = hits if trimmed is None else trimmed
    return quantity(
        float(np.median(hits)),
        unit="cycles",
        confidence=1.0 / (1.0 + float(np.std(t)) / max(float(np.median(t)), 1.0)),
        method="median L2-hit latency",
        evidence=evidence,
    )


def otsu_split(values: np.ndarray) -> tuple[float, float]:
    """The threshold that maximises the between-group variance, and that variance's share of
    the total (1 = two point masses, 0 = no structure)."""
    v = np.sort(values.astype(float))
    n = v.size
    total_var = v.var()
    if n < 4 or total_var == 0:
        return float(v[-1]), 0.0
    csum = np.cumsum(v)
    k = np.arange(1, n)
    w0 = k / n
    m0 = csum[:-1] / k
    m1 = (csum[-1] - csum[:-1]) / (n - k)
    between = w0 * (1 - w0) * (m0 - m1) ** 2
    # only split between distinct values
    valid = v[1:] > v[:-1]
    if not valid.any():
        return float(v[-1]), 0.0
    between = np.where(valid, between, -1)
    i = int(np.argmax(between))
    return float((v[i] + v[i + 1]) / 2), float(between[i] / total_var)


def _robust_sd(x: np.ndarray) -> float:
    return 1.4826 * float(np.median(np.abs(x - np.median(x))))


def near_far(
    hits: np.ndarray, *, min_separation: float = 4.0, min_share: float = 0.1, max_peels: int = 3
) -> dict[str, Any]:
    """Quantities for L2 hits: one latency, or near and far partition latencies.

    Rare timing outliers (hundreds of cycles slow) can carry more between-group variance than
    two real groups do, and Otsu then splits them off: an upper group under `min_share` of the
    accesses is set aside as outliers and the rest split again (at most `max_peels` times).
    """
    all_hits, outliers = hits, 0
    threshold, explained = otsu_split(hits)
    for _ in range(max_peels):
        high = hits[hits > threshold]
        if high.size == 0 or high.size >= min_share * hits.size:
            break
        hits, outliers = hits[hits <= threshold], outliers + high.size
        threshold, explained = otsu_split(hits)
    low, high = hits[hits <= threshold], hits[hits > threshold]
    method = (
        "Otsu split of the L2-hit latencies of footprints that fit, separation test (two hit "
        "latencies by address, read as near and far partitions; an address-dependent distance "
        "inside one partition would look the same)"
    )
    share_far = high.size / hits.size
    if low.size and high.size:
        # robust spreads (MAD), so the tails of each group (timing outliers, a few misses) do
        # not hide two groups: a unimodal distribution split by Otsu gives about 2.3
        spread = np.sqrt((_robust_sd(low) ** 2 + _robust_sd(high) ** 2) / 2)
        separation = (np.median(high) - np.median(low)) / max(spread, 1.0)
    else:
        separation = 0.0
    set_aside = f" ({outliers} slow outliers set aside first)" if outliers else ""
    evidence = (
        f"{all_hits.size} accesses{set_aside}; split at {threshold:.0f} cycles explains "
        f"{explained:.0%} of the variance; groups {np.median(low) if low.size else 0:.0f}"
        f" / {np.median(high) if high.size else 0:.0f} cycles, separation "
        f"{separation:.1f} robust SD, far share {share_far:.0%}"
    )
    if separation >= min_separation and min(share_far, 1 - share_far) >= min_share:
        return {
            "hit_latency_cycles": quantity(
                float(np.median(low)),
                unit="cycles",
                confidence=min(1.0, explained),
                method=method,
                evidence="near partition: " + evidence,
            ),
            "far_hit_latency_cycles": quantity(
                float(np.median(high)),
                unit="cycles",
                confidence=min(1.0, explained),
                method=method,
                evidence="far partition: " + evidence,
            ),
            "far_share": quantity(
                round(share_far, 3),
                unit=None,
                confidence=min(1.0, explained),
                method=method,
                evidence=evidence,
            ),
        }
    return {
        "hit_latency_cycles": one_hit_level(all_hits, evidence, trimmed=hits),
        "far_hit_latency_cycles": undetermined(
            "L2 hits do not fall into two separated latency groups: one partition distance "
            f"({evidence})"
        ),
    }
