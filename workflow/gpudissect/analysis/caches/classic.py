"""What the classic P-chase methods conclude (TPDS Sec. 3.1, Eqs. (1)-(2), Fig. 5).

Saavedra1992 and Wong2010 read cache parameters off the average latency under Assumptions 1-3
of TPDS (one-level LRU set-associative cache, bits-defined sets, whole-line fills). This module
draws each method's conclusions from the trace, as the method prescribes, and reports whether
they agree. The conclusions are inferences under those assumptions, not measured quantities: the
fine-grained analyses (`cache_size`, `caches`) measure the cache.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..common.result import header, no_path_reason, not_applicable, quantity, undetermined
from ..common.sweep_steps import find_steps

TRIM = 0.01  # share of accesses trimmed from each end before averaging (timing outliers)
HIT_BAND = 0.05  # share of the hit-to-miss range still read as "all hits"
MISS_BAND = 0.95  # share read as "all misses"


def _avg(x: pd.Series) -> float:
    """The classic methods' average latency per access, 1%-trimmed so a handful of timing
    outliers (interrupts, page-table walks on a first touch) cannot fake a level."""
    from scipy.stats import trim_mean

    return float(trim_mean(x.to_numpy(dtype=float), TRIM))


def _rate(mean: np.ndarray, hit: float, miss: float) -> np.ndarray:
    return (mean - hit) / max(miss - hit, 1e-9)


def saavedra(df: pd.DataFrame, hit: float, miss: float) -> dict[str, Any]:
    """Eq. (1): C = the largest N that never misses; for the largest N, b = the smallest stride
    at which every access misses, and a = N / (the stride at which the array fits again)."""
    means = df.groupby(["array_bytes", "stride_bytes"])["latency_cycles"].agg(_avg)
    out: dict[str, Any] = {}
    sizes = sorted(means.index.get_level_values(0).unique())
    fits = [n for n in sizes if (_rate(means.loc[n].to_numpy(), hit, miss) <= HIT_BAND).all()]
    method = "Saavedra1992: average latency against stride at fixed array sizes (TPDS Eq. (1))"
    out["size_bytes"] = (
        quantity(
            int(max(fits)),
            unit="bytes",
            confidence=1.0,
            method=method,
            evidence=f"no stride misses at N={max(fits)}",
        )
        if fits
        else undetermined("every swept array size misses at some stride")
    )
    big = means.loc[sizes[-1]]
    rate = _rate(big.to_numpy(), hit, miss)
    strides = big.index.to_numpy()
    full = np.flatnonzero(rate >= MISS_BAND)
    if full.size == 0:
        out["line_bytes"] = undetermined(f"no stride makes every access miss at N={sizes[-1]}")
        out["ways"] = undetermined("needs the line size first")
        return out
    b = int(strides[full[0]])
    out["line_bytes"] = quantity(
        b,
        unit="bytes",
        confidence=1.0,
        method=method,
        evidence=f"at N={sizes[-1]} every access misses from stride {b}",
    )
    drop = [i for i in range(full[0], len(strides)) if rate[i] <= HIT_BAND]
    if drop:
        s_fit = int(strides[drop[0]])
        out["ways"] = quantity(
            int(sizes[-1] // s_fit),
            unit=None,
            confidence=1.0,
            method=method,
            evidence=f"at N={sizes[-1]} the array fits again from stride {s_fit}: a = N / s",
        )
    else:
        out["ways"] = undetermined(f"at N={sizes[-1]} no stride brings the latency back to hits")
    return out


def wong(df: pd.DataFrame, hit: float, miss: float) -> dict[str, Any]:
    """Eq. (2): C = the largest N that never misses; the latency climbs in plateaus, one per way,
    each one line wide."""
    by = df.groupby("array_bytes")["latency_cycles"]
    sizes = np.array(sorted(by.groups), dtype=np.int64)
    groups = [by.get_group(n).to_numpy(dtype=float) for n in sizes]
    mean = np.array([_avg(pd.Series(g)) for g in groups])
    rate = _rate(mean, hit, miss)
    method = "Wong2010: average latency against array size at a fixed stride (TPDS Eq. (2))"
    out: dict[str, Any] = {}
    fits = sizes[rate <= HIT_BAND]
    if fits.size == 0 or fits[0] != sizes[0]:
        out["size_bytes"] = undetermined("the smallest array already misses")
        return out
    c = int(fits.max())
    out["size_bytes"] = quantity(
        c,
        unit="bytes",
        confidence=1.0,
        method=method,
        evidence=f"average latency at hit level up to N={c}",
    )
    steps = find_steps(sizes, groups, summary="mean", min_relative_step=0.02)
    edges = [int(s.x_after) for s in steps if s.rise > 0]
    if len(edges) < 2:
        out["ways"] = undetermined("fewer than two latency steps: no plateaus to count")
        out["line_bytes"] = undetermined("no plateaus")
        return out
    widths = np.diff(edges)
    out["ways"] = quantity(
        len(edges),
        unit=None,
        confidence=1.0,
        method=method,
        evidence=f"{len(edges)} latency steps at N = {edges}",
    )
    out["line_bytes"] = quantity(
        int(np.median(widths)),
        unit="bytes",
        confidence=1.0,
        method=method,
        evidence=f"plateau widths {widths.tolist()} bytes",
    )
    return out


def analyse(
    data: pd.DataFrame, *, provenance: dict[str, Any], inputs: dict | None = None
) -> dict[str, Any]:
    if data.empty:
        reason = no_path_reason(provenance)
        return header("pchase_classic", provenance) | {
            "inferences": {
                "saavedra": {"size_bytes": not_applicable(reason)},
                "wong": {"size_bytes": not_applicable(reason)},
            },
            "contradiction": undetermined(reason),
        }
    path = str(data["path"].iloc[0])
    levels = data.groupby(["method", "array_bytes", "stride_bytes"])["latency_cycles"].agg(_avg)
    hit, miss = float(levels.min()), float(levels.max())
    s = saavedra(data[data["method"] == "saavedra"], hit, miss)
    w = wong(data[data["method"] == "wong"], hit, miss)
    keys = ("size_bytes", "line_bytes", "ways")
    disagree = [
        k
        for k in keys
        if s.get(k, {}).get("value") is not None
        and w.get(k, {}).get("value") is not None
        and s[k]["value"] != w[k]["value"]
    ]
    decided = [
        k
        for k in keys
        if s.get(k, {}).get("value") is not None and w.get(k, {}).get("value") is not None
    ]
    return {
        "device": provenance["device"],
        "analysis": "pchase_classic",
        "path": path,
        "trace": {k: provenance.get(k) for k in ("git_commit", "config_hash", "created_utc")},
        "device_info": provenance.get("device_info", {}),
        "hit_latency_cycles": hit,
        "miss_latency_cycles": miss,
        "inferences": {"saavedra": s, "wong": w},
        "contradiction": (
            {
                "value": bool(disagree),
                "unit": None,
                "confidence": 1.0,
                "method": "compare the two methods' conclusions",
                "evidence": f"they disagree on {disagree}"
                if disagree
                else f"they agree on {decided}",
            }
            if decided
            else undetermined("neither method decides a common parameter")
        ),
    }
