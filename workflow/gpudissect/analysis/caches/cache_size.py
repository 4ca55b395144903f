"""Cache size from a fine-grained P-chase size sweep.

For every (carveout, shared buffer) series, the per-access latencies of each array size form one
group. The first size whose accesses miss (more slow accesses than timing outliers explain, see
`misses`) bounds the cache: the largest size before it fits entirely. The mean-latency change
point (Opt + Kolmogorov-Smirnov, see `changepoint`) is reported beside it as corroboration.
Sees only the trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ...exceptions import AnalysisError
from ..common.misses import FirstMissDetector
from ..common.result import header, no_path_reason, not_applicable, quantity, undetermined
from ..common.sweep_steps import first_rise

ELEMENT_OF_PATH = {"ca": "l1d", "nc": "readonly", "cg": "l2", "tex": "texture"}
METHOD = (
    "fine-grained P-chase size sweep: per-access hit/miss against the smallest arrays' latency; "
    "first size whose misses the outlier rate cannot explain (binomial test)"
)


@dataclass(frozen=True)
class SeriesResult:
    carveout_pct: int
    shared_buffer_bytes: int
    quantities: dict[str, dict[str, Any]]
    sizes_bytes: np.ndarray
    mean_latency_cycles: np.ndarray
    step_bytes: int | None  # first size past the step (None when no step)
    resolution_bytes: int | None = None  # the sweep's step at the bound
    gradual: bool = False  # significant misses below the bound: its place depends on sampling


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
        for (carveout, buffer_bytes), df in data.groupby(
            ["carveout_pct", "shared_buffer_bytes"], sort=False
        ):
            self.series.append(self._fit_series(int(carveout), int(buffer_bytes), df))
        return self

    def _fit_series(self, carveout: int, buffer_bytes: int, df: pd.DataFrame) -> SeriesResult:
        by_size = df.groupby("array_bytes")["latency_cycles"]
        sizes = np.array(sorted(by_size.groups), dtype=np.int64)
        groups = [by_size.get_group(s).to_numpy(dtype=np.float64) for s in sizes]
        means = np.array([g.mean() for g in groups])
        q: dict[str, dict[str, Any]] = {}
        if len(sizes) < 4:
            q["size_bytes"] = undetermined(f"only {len(sizes)} array sizes swept; need >= 4")
            return SeriesResult(carveout, buffer_bytes, q, sizes, means, None)
        det = FirstMissDetector(alpha=self.alpha).fit(sizes, groups)
        resolution = int(np.min(np.diff(sizes)))
        if not det.reference_ok:
            q["size_bytes"] = undetermined(
                f"latency at the smallest arrays ({sizes[0]} bytes) is above the lowest level of "
                "the sweep: the smallest arrays already miss, the cache is smaller than the range"
            )
            return SeriesResult(carveout, buffer_bytes, q, sizes, means, None)
        hit = det.result
        if hit is None:
            q["size_bytes"] = undetermined(
                f"no size between {sizes[0]} and {sizes[-1]} bytes misses more often than timing "
                f"outliers explain: the cache holds at least {sizes[-1]} bytes, or does not "
                "cache this path"
            )
            return SeriesResult(carveout, buffer_bytes, q, sizes, means, None)
        i = hit.index
        step = first_rise(
            sizes,
            groups,
            alpha=self.alpha,
            min_relative_step=self.min_relative_step,
            summary="mean",
        )
        corroboration = (
            f"; the mean-latency change point (Opt + KS test) lies between "
            f"{int(step.x_before)} and {int(step.x_after)} bytes"
            if step is not None
            else "; no mean-latency change point passes the KS test (misses are rare at first)"
        )
        q["size_bytes"] = quantity(
            int(hit.x_before),
            unit="bytes",
            confidence=hit.confidence,
            method=METHOD,
            evidence=(
                f"hit latency {hit.hit_latency_cycles:.0f} cycles, miss threshold "
                f"{hit.threshold_cycles:.0f}; {hit.miss_counts[i - 1]}/"
                f"{hit.accesses[i - 1]} slow accesses at {int(hit.x_before)} bytes, "
                f"{hit.miss_counts[i]}/{hit.accesses[i]} at {int(hit.x_after)} bytes "
                f"(binomial p={hit.p_value:.2g} against the outlier rate "
                f"{hit.outlier_rate:.2g}); sweep resolution {resolution} bytes, so the "
                f"size is in [{int(hit.x_before)}, {int(hit.x_after)})"
                + hit.earlier_note(sizes)
                + corroboration
            ),
        )
        q["size_bytes"]["resolution_bytes"] = int(hit.x_after - hit.x_before)
        fits = np.concatenate(groups[:i])
        med = float(np.median(fits))
        iqr = float(np.subtract(*np.percentile(fits, [75, 25])))
        q["hit_latency_cycles"] = quantity(
            round(med, 1),
            unit="cycles",
            confidence=1.0 / (1.0 + iqr / max(med, 1.0)),
            method="median per-access latency of the arrays that fit",
            evidence=f"{fits.size} accesses, IQR {iqr:.1f} cycles",
        )
        return SeriesResult(
            carveout, buffer_bytes, q, sizes, means, int(hit.x_after),
            resolution_bytes=int(hit.x_after - hit.x_before), gradual=bool(hit.earlier),
        )  # fmt: skip


def analyse(
    data: pd.DataFrame, *, provenance: dict[str, Any], inputs: dict | None = None
) -> dict[str, Any]:
    """The `l1_size` result document for one device."""
    if data.empty:
        doc = header("l1_size", provenance)
        element = ELEMENT_OF_PATH.get(doc["path"], doc["path"])
        return doc | {
            "elements": {element: {"size_bytes": not_applicable(no_path_reason(provenance))}},
            "series": [],
            "shared_buffer_check": [],
        }
    path = str(provenance.get("config", {}).get("parameters", {}).get("path", "ca"))
    element = ELEMENT_OF_PATH.get(path, path)
    est = CacheSizeEstimator().fit(data)
    series = [
        {
            "carveout_pct": None if s.carveout_pct < 0 else s.carveout_pct,
            "shared_buffer_bytes": s.shared_buffer_bytes,
            element: s.quantities,
        }
        for s in est.series
    ]
    buffer_check = _buffer_check(est.series)
    return {
        "device": provenance["device"],
        "analysis": "l1_size",
        "path": path,
        "trace": {k: provenance.get(k) for k in ("git_commit", "config_hash", "created_utc")},
        "device_info": provenance.get("device_info", {}),
        "clocks_before": provenance.get("clocks_before"),
        "clocks_after": provenance.get("clocks_after"),
        "elements": {
            element: est.series[0].quantities
            | (
                {"carveout_pct": est.series[0].carveout_pct}
                if est.series[0].carveout_pct >= 0
                else {}
            )
        },
        "series": series,
        "shared_buffer_check": buffer_check,
    }


def _buffer_check(series: list[SeriesResult]) -> list[dict[str, Any]]:
    """Per carveout swept with several shared buffers: whether the size moves with the buffer.
    Two sizes whose brackets lie within one sweep step of each other are one size (where a cache
    starts missing on a few accesses in a thousand, its first miss moves by a step from launch
    to launch); a gradual onset (significant misses below a bound) cannot tell: its bound
    depends on the sizes sampled."""
    out = []
    by_carveout: dict[int, list[SeriesResult]] = {}
    for s in series:
        by_carveout.setdefault(s.carveout_pct, []).append(s)
    for carveout, group in by_carveout.items():
        if len(group) < 2:
            continue
        sizes = {s.shared_buffer_bytes: s.quantities["size_bytes"].get("value") for s in group}
        known = [s for s in group if s.quantities["size_bytes"].get("value") is not None]
        values = [s.quantities["size_bytes"]["value"] for s in known]
        step = max((s.resolution_bytes or 0 for s in known), default=0)
        moves: bool | None
        if len(known) < 2:
            moves, why = None, "a size is undetermined"
        elif max(values) - min(values) <= step:
            moves, why = False, f"the sizes lie within one sweep step, {step} bytes"
        elif any(s.gradual for s in known):
            names = " and ".join(
                f"the {s.shared_buffer_bytes} B buffer's" for s in known if s.gradual
            )
            moves, why = (
                None,
                (
                    f"{names} series has a gradual onset (significant misses below its bound), so "
                    "where its bound falls depends on the sizes sampled"
                ),
            )
        else:
            moves, why = True, f"the sizes differ by {max(values) - min(values)} bytes"
        out.append(
            {
                "carveout_pct": None if carveout < 0 else carveout,
                "size_bytes_by_shared_buffer_bytes": {str(k): v for k, v in sizes.items()},
                "size_moves_with_buffer": moves,
                "reason": why,
            }
        )
    return out


def figure_table(data: pd.DataFrame, doc: dict) -> pd.DataFrame:
    """The table the size-sweep figure draws (`summary_table`)."""
    return summary_table(data)


def summary_table(data: pd.DataFrame) -> pd.DataFrame:
    """Tidy per-size summary (for figures): mean/median/p95 latency and miss share proxy."""
    g = data.groupby(["carveout_pct", "shared_buffer_bytes", "array_bytes"])["latency_cycles"]
    out = g.agg(
        mean_latency_cycles="mean",
        median_latency_cycles="median",
        p95_latency_cycles=lambda s: float(np.percentile(s, 95)),
        accesses="size",
    )
    return out.reset_index()
