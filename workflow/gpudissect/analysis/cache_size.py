"""Cache size from a fine-grained P-chase size sweep.

For every (carveout, shared buffer) series, the per-access latencies of each array size form one
group; the first upward step of the latency against array size (change-point detection, each step
confirmed by a Kolmogorov-Smirnov test on the raw samples) bounds the cache: the largest size
still below the step holds entirely in the cache. Sees only the trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..exceptions import AnalysisError
from .changepoint import first_rise
from .result import quantity, undetermined

ELEMENT_OF_PATH = {"ca": "l1d", "nc": "readonly", "cg": "l2", "tex": "texture"}
METHOD = "fine-grained P-chase size sweep; first latency rise by change-point detection + KS test"


@dataclass(frozen=True)
class SeriesResult:
    carveout_pct: int
    shared_buffer_bytes: int
    quantities: dict[str, dict[str, Any]]
    sizes_bytes: np.ndarray
    mean_latency_cycles: np.ndarray
    step_bytes: int | None  # first size past the step (None when no step)


@dataclass
class CacheSizeEstimator:
    """`fit(trace_df) -> self`; results in `.series` (one per carveout and buffer size)."""

    alpha: float = 0.01
    min_relative_step: float = 0.05
    series: list[SeriesResult] = field(default_factory=list)

    def fit(self, data: pd.DataFrame) -> CacheSizeEstimator:
        need = {"carveout_pct", "shared_buffer_bytes", "array_bytes", "latency_cycles"}
        if not need <= set(data.columns):
            raise AnalysisError(f"trace lacks columns {sorted(need - set(data.columns))}")
        if data.empty:
            raise AnalysisError("trace has no rows")
        self.series = []
        for (carveout, buffer_bytes), df in data.groupby(["carveout_pct", "shared_buffer_bytes"],
                                                         sort=False):
            self.series.append(self._fit_series(int(carveout), int(buffer_bytes), df))
        return self

    def _fit_series(self, carveout: int, buffer_bytes: int, df: pd.DataFrame) -> SeriesResult:
        by_size = df.groupby("array_bytes")["latency_cycles"]
        sizes = np.array(sorted(by_size.groups), dtype=np.int64)
        groups = [by_size.get_group(s).to_numpy(dtype=np.float64) for s in sizes]
        means = np.array([g.mean() for g in groups])
        q: dict[str, dict[str, Any]] = {}
        if len(sizes) < 3:
            q["size_bytes"] = undetermined(f"only {len(sizes)} array sizes swept; need >= 3")
            return SeriesResult(carveout, buffer_bytes, q, sizes, means, None)
        step = first_rise(sizes, groups, alpha=self.alpha,
                          min_relative_step=self.min_relative_step)
        resolution = int(np.min(np.diff(sizes)))
        if step is None:
            q["size_bytes"] = undetermined(
                f"no significant latency rise between {sizes[0]} and {sizes[-1]} bytes: the cache "
                f"holds at least {sizes[-1]} bytes, or does not cache this path")
            return SeriesResult(carveout, buffer_bytes, q, sizes, means, None)
        if step.index == 0 or step.x_before < sizes[0]:
            q["size_bytes"] = undetermined(
                f"latency already high at the smallest array ({sizes[0]} bytes): the cache is "
                "smaller than the swept range")
            return SeriesResult(carveout, buffer_bytes, q, sizes, means, int(step.x_after))
        hits = np.concatenate([g for s, g in zip(sizes, groups, strict=True)
                               if s <= step.x_before])
        q["size_bytes"] = quantity(
            int(step.x_before), unit="bytes", confidence=step.confidence, method=METHOD,
            evidence=(f"mean latency {step.level_before:.1f} -> {step.level_after:.1f} cycles "
                      f"between {int(step.x_before)} and {int(step.x_after)} bytes "
                      f"(KS p={step.p_value:.2g}); sweep resolution {resolution} bytes, so the "
                      f"size is in [{int(step.x_before)}, {int(step.x_after)})"))
        med = float(np.median(hits))
        iqr = float(np.subtract(*np.percentile(hits, [75, 25])))
        q["hit_latency_cycles"] = quantity(
            round(med, 1), unit="cycles", confidence=1.0 / (1.0 + iqr / max(med, 1.0)),
            method="median per-access latency of the arrays that fit",
            evidence=f"{hits.size} accesses, IQR {iqr:.1f} cycles")
        return SeriesResult(carveout, buffer_bytes, q, sizes, means, int(step.x_after))


def analyse(data: pd.DataFrame, *, provenance: dict[str, Any]) -> dict[str, Any]:
    """The `l1_size` result document for one device."""
    path = str(provenance.get("config", {}).get("parameters", {}).get("path", "ca"))
    element = ELEMENT_OF_PATH.get(path, path)
    est = CacheSizeEstimator().fit(data)
    series = [{"carveout_pct": None if s.carveout_pct < 0 else s.carveout_pct,
               "shared_buffer_bytes": s.shared_buffer_bytes, element: s.quantities}
              for s in est.series]
    by_carveout: dict[int, dict[int, Any]] = {}
    for s in est.series:
        by_carveout.setdefault(s.carveout_pct, {})[s.shared_buffer_bytes] = (
            s.quantities["size_bytes"].get("value"))
    buffer_check = []
    for carveout, sizes in by_carveout.items():
        if len(sizes) > 1:
            values = [v for v in sizes.values() if v is not None]
            buffer_check.append({
                "carveout_pct": None if carveout < 0 else carveout,
                "size_bytes_by_shared_buffer_bytes": {str(k): v for k, v in sizes.items()},
                "size_moves_with_buffer": (None if len(values) < 2
                                           else bool(max(values) != min(values)))})
    return {
        "device": provenance["device"],
        "analysis": "l1_size",
        "path": path,
        "trace": {k: provenance.get(k) for k in ("git_commit", "config_hash", "created_utc")},
        "device_info": provenance.get("device_info", {}),
        "clocks_before": provenance.get("clocks_before"),
        "clocks_after": provenance.get("clocks_after"),
        "elements": {element: est.series[0].quantities | (
            {"carveout_pct": est.series[0].carveout_pct} if est.series[0].carveout_pct >= 0
            else {})},
        "series": series,
        "shared_buffer_check": buffer_check,
    }


def summary_table(data: pd.DataFrame) -> pd.DataFrame:
    """Tidy per-size summary (for figures): mean/median/p95 latency and miss share proxy."""
    g = data.groupby(["carveout_pct", "shared_buffer_bytes", "array_bytes"])["latency_cycles"]
    out = g.agg(mean_latency_cycles="mean", median_latency_cycles="median",
                p95_latency_cycles=lambda s: float(np.percentile(s, 95)), accesses="size")
    return out.reset_index()
