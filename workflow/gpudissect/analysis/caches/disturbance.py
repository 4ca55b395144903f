"""The statistics of the fill / disturb / re-walk test (Größler's thesis, Sec. 4.5 and 4.6):
did thread B's walk evict thread A's lines?

A's timed re-walk in a baseline launch (no B) gives its hit latency; an access is a miss when
it is slower than the baseline's median by more than `max(MISS_MAD_FACTOR` robust standard
deviations, `MISS_REL` of the median)` (a miss reaches the next level: tens to hundreds of cycles
more, where a hit varies by a few). The thesis compares mean latencies against the baseline;
here the misses are counted, and the excess over the baseline is tested: one-sided Fisher
exact test (more misses with B than without) at level `alpha`, and the excess share of A's
accesses must reach `min_excess_miss_fraction` (an array near a cache's size evicts most of
another near the same size in a shared cache; a few extra misses come from neighbours such as
a TLB). Where B does not disturb A, the confidence is 1 minus the probability of seeing as few
misses if B had evicted that minimal share (binomial).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

MISS_MAD_FACTOR = 10.0
MISS_REL = 0.2
MAD_TO_SD = 1.4826


@dataclass(frozen=True)
class Threshold:
    hit_latency_cycles: float
    threshold_cycles: float


def miss_threshold(baseline_latency: np.ndarray) -> Threshold:
    lat = np.asarray(baseline_latency, dtype=np.float64)
    med = float(np.median(lat))
    mad = float(np.median(np.abs(lat - med))) * MAD_TO_SD
    return Threshold(med, med + max(MISS_MAD_FACTOR * mad, MISS_REL * med))


@dataclass(frozen=True)
class Disturbance:
    misses_baseline: int
    accesses_baseline: int
    misses_disturbed: int
    accesses_disturbed: int
    excess_fraction: float
    p_value: float
    disturbed: bool
    confidence: float

    def evidence(self) -> str:
        return (
            f"{self.misses_disturbed}/{self.accesses_disturbed} misses with B against "
            f"{self.misses_baseline}/{self.accesses_baseline} without (excess "
            f"{self.excess_fraction:.3f}, Fisher p={self.p_value:.2g})"
        )

    def as_dict(self) -> dict:
        return {
            "misses_baseline": self.misses_baseline,
            "accesses_baseline": self.accesses_baseline,
            "misses_disturbed": self.misses_disturbed,
            "accesses_disturbed": self.accesses_disturbed,
            "excess_miss_fraction": round(self.excess_fraction, 4),
            "p_value": float(f"{self.p_value:.3g}"),
            "disturbed": self.disturbed,
            "confidence": round(self.confidence, 4),
        }


def disturbance(
    baseline_latency: np.ndarray,
    disturbed_latency: np.ndarray,
    *,
    alpha: float,
    min_excess: float,
) -> Disturbance:
    """Whether B's walk made A's re-walk miss beyond the baseline (rules: module docstring)."""
    th = miss_threshold(baseline_latency)
    k0 = int(np.sum(np.asarray(baseline_latency) > th.threshold_cycles))
    n0 = len(baseline_latency)
    k1 = int(np.sum(np.asarray(disturbed_latency) > th.threshold_cycles))
    n1 = len(disturbed_latency)
    excess = k1 / n1 - k0 / n0
    p = float(stats.fisher_exact([[k1, n1 - k1], [k0, n0 - k0]], alternative="greater").pvalue)
    yes = p < alpha and excess >= min_excess
    if yes:
        confidence = 1.0 - p
    else:
        rate = min(1.0, k0 / n0 + min_excess)
        confidence = 1.0 - float(stats.binom.cdf(k1, n1, rate))
    return Disturbance(k0, n0, k1, n1, excess, p, yes, confidence)


# --- what both result documents share -----------------------------------------------------

ELEMENT_OF_PATH = {"ca": "l1d", "tex": "texture", "nc": "readonly", "const": "constant_l1"}
NAMING_RULE = (
    "each load path's first cache is named by its path: ca -> l1d, tex -> texture, nc -> "
    "readonly, const -> constant_l1; whether two of them are one physical cache is decided "
    "from the traces (cache_sharing), not from the names"
)


def skipped_reasons(stage1_source: str | None, paths) -> dict[str, str]:
    """Why the sweep left a path out, from the device's cache_stage1 result (the sweep used the
    same document): the path is missing, served by the L2, or has no size or line."""
    return {p: reason for p, (reason, _) in _skipped(stage1_source, paths).items()}


def skipped_quantities(stage1_source: str | None, paths) -> dict[str, dict]:
    """The quantity of each path the sweep left out: not applicable where stage 1 found the
    device lacks the path or its cache (served by the L2), else undetermined."""
    from ..common.result import not_applicable, undetermined

    return {
        p: (not_applicable(reason) if lacking else undetermined(reason))
        for p, (reason, lacking) in _skipped(stage1_source, paths).items()
    }


def _skipped(stage1_source: str | None, paths) -> dict[str, tuple[str, bool]]:
    import json

    if not stage1_source:
        return {p: ("no cache_stage1 result to size the arrays from", False) for p in paths}
    with open(stage1_source) as f:
        stage1 = json.load(f)
    out = {}
    for p in paths:
        entry = stage1.get("paths", {}).get(p, {})
        levels = entry.get("levels") or []
        if not levels:
            reason = f"stage 1: {entry.get('reason', 'the path was not measured')}"
            out[p] = (reason, bool(entry.get("not_applicable")))
        elif levels[0].get("served_by"):
            out[p] = (f"stage 1: the {p} path is served by the {levels[0]['served_by']}", True)
        else:
            out[p] = ("stage 1 found no size (or no line) for the first cache of this path", False)
    return out


def walk_latencies(rows) -> dict:
    """A's timed latencies per launch group: {(test, path_a, path_b, warp_b): array}."""
    out = {}
    for key, grp in rows.groupby(["test", "path_a", "path_b", "warp_b"], sort=True):
        out[(key[0], key[1], key[2], int(key[3]))] = grp["latency_cycles"].to_numpy(np.float64)
    return out


def header_fields(analysis: str, provenance: dict, data) -> dict:
    carve = sorted(set(data["carveout_pct"].astype(int))) if len(data) else []
    return {
        "device": provenance["device"],
        "analysis": analysis,
        "trace": {k: provenance.get(k) for k in ("git_commit", "config_hash", "created_utc")},
        "device_info": provenance.get("device_info", {}),
        "backend": provenance.get("backend"),
        "carveout_pct": None if not carve or carve == [-1] else carve,
    }
