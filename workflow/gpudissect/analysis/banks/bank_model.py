"""Shared-memory banks from a strided-access latency sweep: the gcd bank model, fitted.

The experiment (TPDS Sec. 6.2, Listing 4; NPC Sec. 3.1, Listing 1): one warp, thread ``t`` reads
element ``t * stride`` 64 times in a dependent chain; the mean latency per load is recorded for
every stride, in every bank mode the device offers. This module explains those latencies by a
hypothesised bank structure and picks the structure the data support.

**The mapping of a hypothesis** (``B`` banks, each ``W`` bytes wide, device in mode ``M``) and
its conflict degree for each stride, with the closed forms the papers give, are in
`bank_mapping`.

**The fit.** For every hypothesis ``(B, W)`` with ``B`` in {16, 32, 64} and ``W`` in {4, 8}:
ordinary least squares ``latency = base + slope * (degree - 1)`` over every (mode, element size,
stride) point (median over repetitions), and its BIC ``n ln(RSS / n) + k ln n``; the smallest
BIC wins, and the BIC weights ``exp(-dBIC / 2)`` (normalised) are the confidences. The no-conflict
latency is the median of the points the selected model gives degree 1 (the papers' "latency
without bank conflict"), the per-degree medians are Table VIII, and the points that the model
does not explain are listed: those whose latency lies nearer another degree's median than their
own (the degree model misses them), and those off the linear law by more than 5 % and 3
standard deviations of a point's repetitions (the latency law misses them).

Sees only the trace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import stdtrit

from ..common.result import quantity, undetermined
from .bank_mapping import hypothesis_degree

BANK_CANDIDATES = (16, 32, 64)
WIDTH_CANDIDATES = (4, 8)
PARAMS = 3  # base, slope, noise variance
METHOD = (
    "gcd bank model (TPDS Sec. 6.2): conflict degree of each stride from hypothesised banks x "
    "width, latency = base + slope (degree - 1) by least squares, banks and width by BIC over "
    f"{len(BANK_CANDIDATES) * len(WIDTH_CANDIDATES)} hypotheses"
)


def point_latencies(data: pd.DataFrame) -> pd.DataFrame:
    """One row per (mode, element size, stride): the median over repetitions of the mean latency
    per load (elapsed cycles of the timed chain / loads), and its spread."""
    per_load = data.assign(latency_cycles=data["elapsed_cycles"] / data["loads"])
    g = per_load.groupby(["bank_mode_bytes", "element_bytes", "stride_elements"])["latency_cycles"]
    out = g.agg(
        latency_cycles="median",
        iqr_cycles=lambda s: float(np.subtract(*np.percentile(s, [75, 25]))),
        repetitions="size",
    )
    return out.reset_index()


@dataclass(frozen=True)
class Hypothesis:
    banks: int
    bank_width_bytes: int
    base_cycles: float
    slope_cycles: float
    rss: float
    r2: float
    bic: float
    degrees: np.ndarray = field(repr=False)


def _ols(degree: np.ndarray, y: np.ndarray) -> tuple[float, float, float, np.ndarray]:
    x = np.column_stack([np.ones_like(y), degree - 1.0])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ coef
    return float(coef[0]), float(coef[1]), float(resid @ resid), x


@dataclass
class BankModelFit:
    """`fit(points) -> self` on `point_latencies(trace)`; results in attributes."""

    banks_candidates: tuple[int, ...] = BANK_CANDIDATES
    width_candidates: tuple[int, ...] = WIDTH_CANDIDATES
    hypotheses: list[Hypothesis] = field(default_factory=list)
    best: Hypothesis | None = None
    weights: dict[tuple[int, int], float] = field(default_factory=dict)
    base_ci: tuple[float, float] = (math.nan, math.nan)
    slope_ci: tuple[float, float] = (math.nan, math.nan)
    n: int = 0

    def fit(self, points: pd.DataFrame) -> BankModelFit:
        y = points["latency_cycles"].to_numpy(dtype=np.float64)
        self.n = n = len(y)
        tss = float(((y - y.mean()) ** 2).sum())
        # a floor under the RSS: noiseless data would otherwise give ln(0)
        floor = n * 1e-4
        self.hypotheses = []
        for banks in self.banks_candidates:
            for width in self.width_candidates:
                deg = np.array(
                    [
                        hypothesis_degree(
                            int(r.stride_elements),
                            banks=banks,
                            bank_width_bytes=width,
                            mode_bytes=int(r.bank_mode_bytes),
                            element_bytes=int(r.element_bytes),
                        )
                        for r in points.itertuples()
                    ],
                    dtype=np.float64,
                )
                base, slope, rss, _ = _ols(deg, y)
                bic = n * math.log(max(rss, floor) / n) + PARAMS * math.log(n)
                r2 = 1.0 - rss / tss if tss > 0 else 1.0
                self.hypotheses.append(Hypothesis(banks, width, base, slope, rss, r2, bic, deg))
        self.hypotheses.sort(key=lambda h: h.bic)
        self.best = self.hypotheses[0]
        rel = np.array([h.bic - self.best.bic for h in self.hypotheses])
        w = np.exp(-0.5 * np.minimum(rel, 1400.0))
        w /= w.sum()
        self.weights = {
            (h.banks, h.bank_width_bytes): float(wi)
            for h, wi in zip(self.hypotheses, w, strict=True)
        }
        self._intervals(y)
        return self

    def _intervals(self, y: np.ndarray) -> None:
        best = self.best
        _, _, rss, x = _ols(best.degrees, y)
        dof = self.n - 2
        if dof < 1 or np.linalg.matrix_rank(x) < 2:
            return
        cov = rss / dof * np.linalg.inv(x.T @ x)
        t = stdtrit(dof, 0.975)  # scipy.stats.t.ppf(0.975, dof), without importing scipy.stats
        se_b, se_s = math.sqrt(cov[0, 0]), math.sqrt(cov[1, 1])
        self.base_ci = (best.base_cycles - t * se_b, best.base_cycles + t * se_b)
        self.slope_ci = (best.slope_cycles - t * se_s, best.slope_cycles + t * se_s)

    def marginal(self, *, banks: int | None = None, width: int | None = None) -> float:
        """BIC weight of every hypothesis with these banks (or width)."""
        return sum(
            w
            for (b, wd), w in self.weights.items()
            if (banks is None or b == banks) and (width is None or wd == width)
        )


def degree_table(points: pd.DataFrame, degrees: np.ndarray) -> pd.DataFrame:
    """Per predicted degree: median latency over its points, their count and strides (Table
    VIII's rows)."""
    df = points.assign(degree=degrees.astype(int))
    g = df.groupby("degree")
    return pd.DataFrame(
        {
            "degree": list(g.groups),
            "latency_cycles": g["latency_cycles"].median().to_numpy(),
            "points": g.size().to_numpy(),
            "strides": [sorted(set(map(int, s))) for _, s in g["stride_elements"]],
        }
    )


def misses(points: pd.DataFrame, best: Hypothesis, table: pd.DataFrame) -> list[dict[str, Any]]:
    """Points the selected model does not explain (module docstring)."""
    y = points["latency_cycles"].to_numpy(dtype=np.float64)
    deg = best.degrees.astype(int)
    linear = best.base_cycles + best.slope_cycles * (deg - 1)
    resid = y - linear
    # measurement noise of one point: the spread of its repetitions (IQR -> SD)
    noise_sd = float(np.median(points["iqr_cycles"])) / 1.349 if "iqr_cycles" in points else 0.0
    medians = dict(zip(table["degree"], table["latency_cycles"], strict=True))
    levels = np.array(sorted(medians))
    out = []
    for i, r in enumerate(points.itertuples()):
        nearest = int(levels[np.argmin(np.abs(np.array([medians[d] for d in levels]) - y[i]))])
        degree_miss = nearest != deg[i]
        law_miss = abs(resid[i]) > max(LAW_TOLERANCE * linear[i], 3 * noise_sd, 1.0)
        if degree_miss or law_miss:
            out.append(
                {
                    "bank_mode_bytes": int(r.bank_mode_bytes),
                    "element_bytes": int(r.element_bytes),
                    "stride_elements": int(r.stride_elements),
                    "latency_cycles": round(float(y[i]), 2),
                    "predicted_degree": int(deg[i]),
                    "linear_law_cycles": round(float(linear[i]), 2),
                    "nearest_degree_by_latency": nearest,
                    "degree_model_misses": bool(degree_miss),
                    "linear_law_misses": bool(law_miss),
                }
            )
    return out


# the linear latency law holds where it misses (by more than LAW_TOLERANCE) no more than this
# share of the points
LAW_TOLERANCE = 0.05
LAW_MISS_SHARE = 0.1


def linear_law(model: dict[str, Any], missed: list[dict[str, Any]], hit: float | None) -> dict:
    """The linear fit's own acceptance as the latency law: it misses no more than
    `LAW_MISS_SHARE` of the points, and its intercept is the measured no-conflict latency `hit`
    (the intercept's 95% CI holds it, or it lies within `LAW_TOLERANCE` of it). The report and
    the figures state the fit with this verdict."""
    n, points = sum(bool(x["linear_law_misses"]) for x in missed), model["points"]
    reasons = []
    if n > LAW_MISS_SHARE * points:
        reasons.append(
            f"the linear law misses {n} of {points} points by more than {LAW_TOLERANCE:.0%}"
        )
    base, (lo, hi) = model["base_cycles"], model["base_ci95_cycles"]
    off = hit is not None and abs(base - hit) > LAW_TOLERANCE * abs(hit)
    if off and not (lo is not None and hi is not None and lo <= hit <= hi):
        ci = "" if lo is None or hi is None else f" (95% CI [{lo:g}, {hi:g}])"
        reasons.append(
            f"its intercept {base:g} cycles{ci} is not the measured no-conflict latency "
            f"{hit:g} cycles"
        )
    return {"accepted": not reasons, "misses": n, "points": points, "reasons": reasons}


def _fmt_ci(ci: tuple[float, float]) -> list[float | None]:
    return [None if math.isnan(v) else round(float(v), 3) for v in ci]


def analyse(
    data: pd.DataFrame, *, provenance: dict[str, Any], inputs: dict | None = None
) -> dict[str, Any]:
    """The `bank_conflicts` result document for one device."""
    doc: dict[str, Any] = {
        "device": provenance["device"],
        "analysis": "bank_conflicts",
        "trace": {k: provenance.get(k) for k in ("git_commit", "config_hash", "created_utc")},
        "device_info": provenance.get("device_info", {}),
        "clocks_before": provenance.get("clocks_before"),
        "clocks_after": provenance.get("clocks_after"),
    }
    if data.empty:
        reason = "the sweep ran no point: the device offers no shared memory (no bank modes)"
        doc["elements"] = {"shared": {"banks": undetermined(reason)}}
        return doc
    points = point_latencies(data)
    modes = sorted(int(m) for m in points["bank_mode_bytes"].unique())
    strides = points["stride_elements"].nunique()
    if strides < 8:
        reason = f"only {strides} strides swept; the bank model needs >= 8 (e.g. 0..128)"
        doc["elements"] = {"shared": {"banks": undetermined(reason)}}
        return doc
    fit = BankModelFit().fit(points)
    best = fit.best
    table = degree_table(points, best.degrees)
    runner_up = fit.hypotheses[1]
    d_bic = runner_up.bic - best.bic
    evidence = (
        f"{fit.n} points ({strides} strides, modes {modes} bytes); selected {best.banks} banks x "
        f"{best.bank_width_bytes} B: R^2 {best.r2:.4f}, BIC {best.bic:.1f}; next best "
        f"{runner_up.banks} x {runner_up.bank_width_bytes} B by dBIC {d_bic:.1f} (R^2 "
        f"{runner_up.r2:.4f})"
    )
    one = table[table["degree"] == 1]
    shared: dict[str, Any] = {
        "banks": quantity(
            best.banks,
            unit="banks",
            confidence=fit.marginal(banks=best.banks),
            method=METHOD,
            evidence=evidence,
        ),
        "bank_width_bytes": quantity(
            best.bank_width_bytes,
            unit="bytes",
            confidence=fit.marginal(width=best.bank_width_bytes),
            method=METHOD + "; the width of one bank row (the widest mode)",
            evidence=evidence,
        ),
        "modes_bytes": quantity(
            modes,
            unit="bytes",
            confidence=1.0,
            method="bank modes the device offered the sweep (cudaDeviceSetSharedMemConfig)",
            evidence=f"the trace holds modes {modes}",
        ),
    }
    if len(one):
        lat = float(one["latency_cycles"].iloc[0])
        n1 = int(one["points"].iloc[0])
        shared["hit_latency_cycles"] = quantity(
            round(lat, 2),
            unit="cycles",
            confidence=best.r2 if best.r2 > 0 else 0.0,
            method="median latency per load of the strides without bank conflict (degree 1)",
            evidence=f"{n1} points; fitted intercept {best.base_cycles:.2f} cycles, 95% CI "
            f"{_fmt_ci(fit.base_ci)}",
        )
    else:
        shared["hit_latency_cycles"] = undetermined("no stride without bank conflict was swept")
    shared["conflict_latency_cycles"] = quantity(
        round(best.slope_cycles, 3),
        unit="cycles",
        confidence=best.r2 if best.r2 > 0 else 0.0,
        method="least-squares slope of latency per extra way of conflict (degree - 1)",
        evidence=f"95% CI {_fmt_ci(fit.slope_ci)}, R^2 {best.r2:.4f}",
    )
    missed = misses(points, best, table)
    doc["elements"] = {"shared": shared}
    doc["model"] = {
        "selected": {"banks": best.banks, "bank_width_bytes": best.bank_width_bytes},
        "base_cycles": round(best.base_cycles, 3),
        "base_ci95_cycles": _fmt_ci(fit.base_ci),
        "slope_cycles": round(best.slope_cycles, 3),
        "slope_ci95_cycles": _fmt_ci(fit.slope_ci),
        "r2": round(best.r2, 6),
        "points": fit.n,
        "candidates": [
            {
                "banks": h.banks,
                "bank_width_bytes": h.bank_width_bytes,
                "bic": round(h.bic, 3),
                "delta_bic": round(h.bic - best.bic, 3),
                "weight": round(fit.weights[(h.banks, h.bank_width_bytes)], 6),
                "r2": round(h.r2, 6),
                "base_cycles": round(h.base_cycles, 3),
                "slope_cycles": round(h.slope_cycles, 3),
            }
            for h in fit.hypotheses
        ],
    }
    hit = shared["hit_latency_cycles"].get("value")
    doc["model"]["linear_law"] = linear_law(doc["model"], missed, hit)
    doc["per_mode"] = _per_mode(points)
    doc["degree_latency"] = [
        {
            "degree": int(r.degree),
            "latency_cycles": round(float(r.latency_cycles), 2),
            "points": int(r.points),
            "strides": r.strides[:12],
        }
        for r in table.itertuples()
    ]
    doc["points"] = [
        {
            "bank_mode_bytes": int(r.bank_mode_bytes),
            "element_bytes": int(r.element_bytes),
            "stride_elements": int(r.stride_elements),
            "latency_cycles": round(float(r.latency_cycles), 2),
            "degree": int(d),
        }
        for r, d in zip(points.itertuples(), best.degrees, strict=True)
    ]
    doc["misses"] = missed
    return doc


def _per_mode(points: pd.DataFrame) -> list[dict[str, Any]]:
    """The model selected from each bank mode's points alone."""
    out = []
    for mode, df in points.groupby("bank_mode_bytes"):
        if df["stride_elements"].nunique() < 8:
            continue
        fit = BankModelFit().fit(df.reset_index(drop=True))
        out.append(
            {
                "bank_mode_bytes": int(mode),
                "banks": fit.best.banks,
                "bank_width_bytes": fit.best.bank_width_bytes,
                "weight": round(fit.weights[(fit.best.banks, fit.best.bank_width_bytes)], 6),
                "r2": round(fit.best.r2, 6),
                "base_cycles": round(fit.best.base_cycles, 3),
                "slope_cycles": round(fit.best.slope_cycles, 3),
            }
        )
    return out
