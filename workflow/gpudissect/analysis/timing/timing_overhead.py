"""The timing overhead of the per-access timed window, from the `timing_overhead` trace alone.

Per path, over the same cache-resident lines (config/README.md, `experiments.timing_overhead`):
- raw latency: the per-access timed window's latency, the mean over the lines of each line's
  median (on an L1, where every line hits alike, the median of all accesses);
- latency per load of a chain timed as a whole, from two chain lengths N and 2N: (median of the
  2N chains - median of the N chains) / N, so the window's store and clock read at the end of
  each chain cancel; over 32-bit indices (`index_chase_latency_cycles`: the load and its index
  arithmetic) and over 64-bit pointers (`load_to_use_latency_cycles`: the load alone);
- `window_overhead_cycles` = raw - pointer chase: everything the timed window reads beyond the
  load (its store and clock read, the index arithmetic); the calibrated latency of any raw
  latency is the raw one minus it;
- `index_arithmetic_cycles` = index chase - pointer chase; `store_clock_cycles` = raw - index
  chase.
- On `tex` (a texture fetch `j = tex1Dfetch(t, j)` takes the index as its coordinate: no address
  arithmetic between two fetches, and no pointer form) the index chase is the load-to-use
  latency: `window_overhead_cycles` = raw - index chase, and no index arithmetic.
Once: `empty_window_cycles` and `clock_read_cycles`, the medians of their samples.

A difference lies within the noise of its inputs when it is at most their spreads added (the IQR
of the raw accesses about their line's median; the IQRs of the two chain lengths over N): it is
then undetermined, as is a difference that is not positive. Its confidence is
1 / (1 + spreads / difference). Sees only the trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..common.result import header, not_applicable, quantity, undetermined

CALIBRATION_PATHS = ("ca", "cg")  # the first measured gives the calibration (ca: an L1 hit)
# paths whose chain fetches by index with no arithmetic between two loads (no pointer chase)
FETCH_BY_INDEX = frozenset({"tex"})
FETCH_NOTE = (
    "texture fetch chain j = tex1Dfetch(t, j): the fetch takes the index as its coordinate, so "
    "no address arithmetic sits between two fetches"
)
RAW_METHOD = (
    "per-access timed P-chase window (kernels/pchase.cu: clock, load, store of the index, "
    "clock) over lines that stay in the cache; mean over the lines of each line's median"
)


@dataclass(frozen=True)
class Estimate:
    value: float
    spread: float  # the IQR the noise rule adds
    evidence: str


def _iqr(x: np.ndarray) -> float:
    return float(np.subtract(*np.percentile(x, [75, 25]))) if len(x) else 0.0


def raw_estimate(window: pd.DataFrame) -> Estimate:
    """The raw latency: the mean of the lines' medians, and the spread of the accesses about
    their own line's median."""
    cycles = window["cycles"].astype(np.float64)
    line_median = cycles.groupby(window["index"]).transform("median")
    medians = cycles.groupby(window["index"]).median()
    return Estimate(
        value=float(medians.mean()),
        spread=_iqr((cycles - line_median).to_numpy()),
        evidence=(
            f"{len(cycles)} timed accesses over {len(medians)} lines; line medians "
            f"{medians.min():.0f}-{medians.max():.0f}, median of all {cycles.median():.1f} cycles"
        ),
    )


def per_load_estimate(chains: pd.DataFrame) -> Estimate | None:
    """Latency per load from chains of two lengths (None without two lengths)."""
    lengths = sorted(int(n) for n in chains["loads"].unique())
    if len(lengths) < 2:
        return None
    short, long = lengths[0], lengths[-1]
    a = chains.loc[chains["loads"] == short, "cycles"].astype(np.float64).to_numpy()
    b = chains.loc[chains["loads"] == long, "cycles"].astype(np.float64).to_numpy()
    n = long - short
    return Estimate(
        value=float((np.median(b) - np.median(a)) / n),
        spread=(_iqr(a) + _iqr(b)) / n,
        evidence=(
            f"{len(a)} chains of {short} loads (median {np.median(a):.0f} cycles) and {len(b)} "
            f"of {long} (median {np.median(b):.0f}); whole chains over their loads: "
            f"{np.median(a) / short:.2f} and {np.median(b) / long:.2f} cycles"
        ),
    )


def _latency(e: Estimate | None, *, method: str, timing: str, why_missing: str) -> dict:
    if e is None:
        return undetermined(why_missing)
    if e.value <= 0:
        return undetermined(f"{e.value:.2f} cycles is not a latency ({e.evidence})")
    q = quantity(
        round(e.value, 2),
        unit="cycles",
        confidence=1.0 / (1.0 + e.spread / e.value),
        method=method,
        evidence=f"{e.evidence}; spread (IQR) {e.spread:.2f} cycles",
    )
    return {**q, "timing": timing}


def difference(a: Estimate | None, b: Estimate | None, *, names: tuple[str, str], method: str):
    """a - b as a quantity, or undetermined where it is not positive or within the noise."""
    if a is None or b is None:
        return undetermined(f"{names[0] if a is None else names[1]} was not measured")
    d, noise = a.value - b.value, a.spread + b.spread
    what = f"{names[0]} {a.value:.2f} - {names[1]} {b.value:.2f} = {d:.2f} cycles"
    if d <= 0:
        return undetermined(f"{what}: not positive, so the data show no overhead")
    if d <= noise:
        return undetermined(f"{what}: within the noise of its inputs ({noise:.2f} cycles)")
    return quantity(
        round(d, 2),
        unit="cycles",
        confidence=1.0 / (1.0 + noise / d),
        method=method,
        evidence=f"{what}; spreads added {noise:.2f} cycles",
    )


def _samples(data: pd.DataFrame, kind: str, *, method: str) -> dict:
    x = data.loc[data["kind"] == kind, "cycles"].astype(np.float64).to_numpy()
    if not len(x):
        return undetermined(f"no {kind} samples in the trace")
    med, iqr = float(np.median(x)), _iqr(x)
    if med <= 0:
        return undetermined(f"the median of {len(x)} {kind} samples is {med:.0f} cycles")
    return quantity(
        med,
        unit="cycles",
        confidence=1.0 / (1.0 + iqr / med),
        method=method,
        evidence=f"{len(x)} samples: median {med:.0f}, IQR {iqr:.1f}, "
        f"p10-p90 {np.percentile(x, 10):.0f}-{np.percentile(x, 90):.0f} cycles",
    )


def analyse_path(data: pd.DataFrame, path: str = "") -> dict[str, Any]:
    """The quantities of one path's rows."""
    window = data[data["kind"] == "window"]
    raw = raw_estimate(window) if len(window) else None
    index = per_load_estimate(data[data["kind"] == "amortized_index"])
    pointer = per_load_estimate(data[data["kind"] == "amortized_pointer"])
    amortized = "chains of N and 2N dependent loads timed as a whole (kernels/clock_overhead.cu); "
    if path in FETCH_BY_INDEX:
        return _fetch_path(raw, index, amortized)
    return {
        "raw_latency_cycles": _latency(
            raw, method=RAW_METHOD, timing="raw", why_missing="no timed window in the trace"
        ),
        "index_chase_latency_cycles": _latency(
            index,
            method=amortized + "32-bit index chase j = A[j]: (median 2N - median N) / N",
            timing="amortized",
            why_missing="no 32-bit chains of two lengths in the trace",
        ),
        "load_to_use_latency_cycles": _latency(
            pointer,
            method=amortized + "64-bit pointer chase p = *p: (median 2N - median N) / N",
            timing="calibrated",
            why_missing="no pointer chains of two lengths in the trace",
        ),
        "window_overhead_cycles": difference(
            raw,
            pointer,
            names=("raw", "pointer chase"),
            method="raw latency - load-to-use latency of the pointer chase over the same lines",
        ),
        "index_arithmetic_cycles": difference(
            index,
            pointer,
            names=("index chase", "pointer chase"),
            method="latency per load of the 32-bit index chase - of the 64-bit pointer chase",
        ),
        "store_clock_cycles": difference(
            raw,
            index,
            names=("raw", "index chase"),
            method="raw latency - latency per load of the 32-bit index chase (the window's "
            "store of the index and second clock read)",
        ),
    }


def _fetch_path(raw: Estimate | None, index: Estimate | None, amortized: str) -> dict[str, Any]:
    """A path that fetches by index (`FETCH_BY_INDEX`): its index chase is the load-to-use
    latency, and the window's overhead is the raw latency minus it."""
    method = amortized + FETCH_NOTE + ": (median 2N - median N) / N"
    lacks = "a texture fetch takes the index as its coordinate: no pointer chase, no arithmetic"
    return {
        "raw_latency_cycles": _latency(
            raw, method=RAW_METHOD, timing="raw", why_missing="no timed window in the trace"
        ),
        "index_chase_latency_cycles": _latency(
            index,
            method=method,
            timing="amortized",
            why_missing="no 32-bit chains of two lengths in the trace",
        ),
        "load_to_use_latency_cycles": _latency(
            index,
            method=method + " (the fetch chain is the load-to-use latency)",
            timing="calibrated",
            why_missing="no 32-bit chains of two lengths in the trace",
        ),
        "window_overhead_cycles": difference(
            raw,
            index,
            names=("raw", "fetch chain"),
            method="raw latency - latency per fetch of the texture chain over the same lines",
        ),
        "index_arithmetic_cycles": not_applicable(lacks),
        "store_clock_cycles": difference(
            raw,
            index,
            names=("raw", "fetch chain"),
            method="raw latency - latency per fetch of the texture chain (the window's store "
            "of the index and second clock read)",
        ),
    }


def analyse(
    data: pd.DataFrame, *, provenance: dict[str, Any], inputs: dict | None = None
) -> dict[str, Any]:
    """The `timing_overhead` result document for one device."""
    doc = header("timing_overhead", provenance)
    doc["clocks_before"] = provenance.get("clocks_before")
    doc["clocks_after"] = provenance.get("clocks_after")
    paths = [p for p in dict.fromkeys(data["path"]) if p]
    doc["paths"] = {p: analyse_path(data[data["path"] == p], p) for p in paths}
    calibration = next((p for p in CALIBRATION_PATHS if p in doc["paths"]), None)
    timing: dict[str, Any] = {"calibration_path": calibration}
    for name in ("window_overhead_cycles", "index_arithmetic_cycles", "store_clock_cycles"):
        if calibration is None:
            timing[name] = undetermined("the trace holds no chase on ca or cg")
        else:
            timing[name] = doc["paths"][calibration][name]
    timing["empty_window_cycles"] = _samples(
        data,
        "empty_window",
        method="median of empty timed windows (clock, store of the index, clock; no load)",
    )
    timing["clock_read_cycles"] = _samples(
        data, "clock_pair", method="median of two consecutive clock reads"
    )
    doc["timing"] = timing
    return doc
