"""L2 footprint sweep: where latency steps up, and whether L2 hits come at two distances.

- Steps: change points (Opt + KS test, `changepoint.find_steps`) of the median per-access latency
  against footprint; each is reported with the footprints it lies between.
- Near and far: the accesses of the footprints below the first step all hit in L2. If their
  latencies fall into two well separated groups (Otsu's split of the 1-D distribution, then a
  separation of at least `min_separation` robust (MAD) standard deviations and at least
  `min_share` of the accesses on each side), the GPU serves L2 hits from two distances (a near
  and a far partition); otherwise one L2 hit latency is reported.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .changepoint import find_steps
from .misses import FirstMissDetector
from .result import header, no_path_reason, quantity, undetermined


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
    hits: np.ndarray, *, min_separation: float = 4.0, min_share: float = 0.1
) -> dict[str, Any]:
    """Quantities for L2 hits: one latency, or near and far partition latencies."""
    threshold, explained = otsu_split(hits)
    low, high = hits[hits <= threshold], hits[hits > threshold]
    method = "Otsu split of the L2-hit latencies of footprints that fit, separation test"
    share_far = high.size / hits.size
    if low.size and high.size:
        # robust spreads (MAD), so the tails of each group (timing outliers, a few misses) do
        # not hide two groups: a unimodal distribution split by Otsu gives about 2.3
        spread = np.sqrt((_robust_sd(low) ** 2 + _robust_sd(high) ** 2) / 2)
        separation = (np.median(high) - np.median(low)) / max(spread, 1.0)
    else:
        separation = 0.0
    evidence = (
        f"{hits.size} accesses; split at {threshold:.0f} cycles explains "
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
        "hit_latency_cycles": quantity(
            float(np.median(hits)),
            unit="cycles",
            confidence=1.0 / (1.0 + float(np.std(hits)) / max(float(np.median(hits)), 1.0)),
            method="median L2-hit latency",
            evidence=evidence,
        ),
        "far_hit_latency_cycles": undetermined(
            "L2 hits do not fall into two separated latency groups: one partition distance "
            f"({evidence})"
        ),
    }


def analyse(
    data: pd.DataFrame, *, provenance: dict[str, Any], inputs: dict | None = None
) -> dict[str, Any]:
    if data.empty:
        return header("l2", provenance) | {
            "elements": {"l2": {"size_bytes": undetermined(no_path_reason(provenance))}},
            "steps": [],
            "median_latency_by_footprint": {},
        }
    by = data.groupby("array_bytes")["latency_cycles"]
    sizes = np.array(sorted(by.groups), dtype=np.int64)
    groups = [by.get_group(n).to_numpy(dtype=float) for n in sizes]
    steps = [
        s for s in find_steps(sizes, groups, summary="median", min_relative_step=0.05) if s.rise > 0
    ]
    step_list = [
        {
            "footprint_before_bytes": int(s.x_before),
            "footprint_after_bytes": int(s.x_after),
            "median_before_cycles": float(s.level_before),
            "median_after_cycles": float(s.level_after),
            "confidence": s.confidence,
        }
        for s in steps
    ]
    first = steps[0].index if steps else len(sizes)
    if first == 0:
        l2 = {
            "hit_latency_cycles": undetermined(
                "latency already steps up after the smallest footprint; sweep smaller footprints"
            )
        }
    else:
        l2 = near_far(np.concatenate(groups[:first]))
    det = FirstMissDetector().fit(sizes, groups)
    hit = det.result
    if not det.reference_ok:
        l2["size_bytes"] = undetermined("the smallest footprints already miss")
    elif hit is None:
        l2["size_bytes"] = undetermined(
            f"no footprint up to {sizes[-1]} bytes misses more often than outliers explain"
        )
    else:
        l2["size_bytes"] = quantity(
            int(hit.x_before),
            unit="bytes",
            confidence=hit.confidence,
            method="first footprint whose accesses miss (binomial test against the outlier "
            "rate of the smallest footprints)",
            evidence=(
                f"{hit.miss_counts[hit.index]}/{hit.accesses[hit.index]} accesses slower "
                f"than {hit.threshold_cycles:.0f} cycles at {int(hit.x_after)} bytes; "
                f"the size is in [{int(hit.x_before)}, {int(hit.x_after)}) at this "
                "sweep's resolution"
            ),
        )
    l2["latency_steps_bytes"] = (
        quantity(
            [int(s.x_before) for s in steps],
            unit="bytes",
            confidence=min(s.confidence for s in steps),
            method="change points of median latency against footprint (Opt + KS test)",
            evidence="; ".join(
                f"{int(s.x_before)} -> {int(s.x_after)} B: "
                f"{s.level_before:.0f} -> {s.level_after:.0f} cycles"
                for s in steps
            ),
        )
        if steps
        else undetermined(f"no latency step between {sizes[0]} and {sizes[-1]} bytes")
    )
    return {
        "device": provenance["device"],
        "analysis": "l2",
        "path": str(data["path"].iloc[0]),
        "trace": {k: provenance.get(k) for k in ("git_commit", "config_hash", "created_utc")},
        "device_info": provenance.get("device_info", {}),
        "elements": {"l2": l2},
        "steps": step_list,
        "median_latency_by_footprint": {
            str(int(n)): float(np.median(g)) for n, g in zip(sizes, groups, strict=True)
        },
    }
