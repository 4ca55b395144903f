"""Sets and ways of the constant L1 from the capacity of cyclic walks (`experiments.constant_sets`).

Every decision is taken again from the trace. The hit/miss threshold is the midpoint of the
calibration's hit and miss medians. A walk fits when at most `miss_share` of its timed loads
miss; a walk's capacity (per stride, per start offset) is the largest N such that every walk of
1..N lines fits. The sweep ends a series after a few overflows or where constant memory ends; a
series that never overflowed is censored (the capacity is at least its largest walk).

The model: S sets, the set of a line its number modulo S (contiguous index bits where S is a
power of two), set s with `free[s]` ways for the walk's data. A walk of N lines at a stride of k
lines puts line i in set (i * k) mod S; with least-recently-used order inside a set (or any
policy that keeps a set's lines while they fit), it fits while no set receives more lines than
it has free ways. The offset walks, at a stride K that is a multiple of every power-of-two S up
to K, stay in one set each, so their capacities are the free ways of the sets in order; their
period is S. Where every offset reads the same, S is the one set count whose predictions agree
with every stride. The ways are the most free ways of a set; the lines the kernel itself keeps
cached (its parameters, the driver's constants) are the ways minus the free ones, summed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..common.result import header, quantity, undetermined

CALIBRATE, STRIDE, OFFSET = 0, 1, 2
MIN_GAP_CYCLES = 5.0  # a hit/miss gap below this is timing noise, not two levels
AGREE_REL = 0.10  # a prediction agrees within max(1 line, 10 %)


def threshold(data: pd.DataFrame) -> float | None:
    """Midpoint of the calibration's hit and miss medians; None when they are not apart."""
    cal = data[data["kind"] == CALIBRATE]
    hits = cal.loc[cal["detail"] == 0, "latency_cycles"]
    misses = cal.loc[cal["detail"] == 1, "latency_cycles"]
    if hits.empty or misses.empty:
        return None
    h, m = float(np.median(hits)), float(np.median(misses))
    return (h + m) / 2 if m - h >= MIN_GAP_CYCLES else None


def walk_fits(latency_cycles: Any, cut: float, miss_share: float) -> bool:
    """A walk fits when at most `miss_share` of its timed loads read above `cut`, one miss
    always allowed (a timing outlier, about one load in 16,000 on an H200)."""
    lat = np.asarray(latency_cycles)
    return bool(lat.size) and int(np.sum(lat > cut)) <= max(1.0, miss_share * lat.size)


def capacities(data: pd.DataFrame, kind: int, key: str, cut: float, share: float) -> pd.DataFrame:
    """Per series (`key`: stride_lines or offset_lines) the capacity, the largest walk tried
    and whether the series was censored (no walk overflowed)."""
    rows = []
    walks = data[data["kind"] == kind]
    for value, g in walks.groupby(key, sort=True):
        fits = {
            int(n): walk_fits(w["latency_cycles"].to_numpy(), cut, share)
            for n, w in g.groupby("walk_lines")
        }
        cap = 0
        while fits.get(cap + 1, False):
            cap += 1
        top = max(fits)
        rows.append(
            {
                key: int(value),
                "stride_lines": int(g["stride_lines"].iloc[0]),
                "capacity_lines": cap,
                "top_lines": top,
                "censored": cap >= top,
            }
        )
    cols = list(dict.fromkeys([key, "stride_lines", "capacity_lines", "top_lines", "censored"]))
    return pd.DataFrame(rows, columns=cols)


def predict(free: list[int], stride_lines: int, offset_lines: int = 0, limit: int = 4096) -> int:
    """The largest walk that fits: lines i = 0, 1, ... in sets (offset + i * stride) mod S, each
    set holding at most free[s] of them."""
    sets = len(free)
    load = [0] * sets
    for n in range(limit):
        s = (offset_lines + n * stride_lines) % sets
        load[s] += 1
        if load[s] > free[s]:
            return n
    return limit


def agrees(measured: int, predicted: int, censored: bool) -> bool:
    """A prediction agrees within max(1 line, 10 %); a censored capacity (at least `measured`)
    agrees with any prediction from `measured` minus that margin up."""
    margin = max(1, round(AGREE_REL * max(measured, predicted)))
    if censored:
        return predicted >= measured - margin
    return abs(predicted - measured) <= margin


def _periods(offsets: pd.DataFrame) -> list[int]:
    """Every period of the offset capacities that shows at least twice."""
    if offsets.empty or offsets["censored"].any():
        return []
    caps = offsets.sort_values("offset_lines")["capacity_lines"].to_list()
    return [
        p
        for p in range(1, len(caps) // 2 + 1)
        if all(caps[i] == caps[i % p] for i in range(len(caps)))
    ]


def _models(strides: pd.DataFrame, offsets: pd.DataFrame, max_sets: int) -> list[list[int]]:
    """Every model (free ways per set) that predicts every stride and every offset: one per
    period of the offset capacities where they vary, S sets of equal ways (S * ways the
    stride-1 capacity, S = 1..max_sets) where they do not."""
    periods = _periods(offsets)
    caps = offsets.sort_values("offset_lines")["capacity_lines"].to_list()
    candidates = [caps[:p] for p in periods] if periods and periods[0] > 1 else []
    one = strides.loc[strides["stride_lines"] == 1]
    if not candidates and not one.empty and not bool(one["censored"].iloc[0]):
        total = int(one["capacity_lines"].iloc[0])
        candidates = [[total // s] * s for s in range(1, max_sets + 1) if total % s == 0]
    series = [(r, 0) for r in strides.itertuples()] + [
        (r, int(r.offset_lines)) for r in offsets.itertuples()
    ]
    return [
        free
        for free in candidates
        if all(
            agrees(int(r.capacity_lines), predict(free, int(r.stride_lines), off), bool(r.censored))
            for r, off in series
        )
    ]


def analyse(
    data: pd.DataFrame, *, provenance: dict[str, Any], inputs: dict | None = None
) -> dict[str, Any]:
    """The `constant_sets` result document for one device."""
    doc = header("constant_sets", provenance)
    doc["path"] = "const"
    c: dict[str, Any] = {}
    doc["elements"] = {"constant_l1": c}
    names = ("sets", "ways_per_set", "set_index_bits", "index_kind", "reserved_lines")
    cut = threshold(data) if len(data) else None
    if cut is None:
        why = "empty trace" if data.empty else "the calibration's hits and misses are not apart"
        for q in names:
            c[q] = undetermined(why)
        doc["strides"] = []
        return doc
    params = provenance.get("config", {}).get("parameters", {})
    share = float(params.get("miss_share", 0.02))
    line = int(data["line_bytes"].iloc[0])
    cal = data[data["kind"] == CALIBRATE]
    doc["threshold_cycles"] = quantity(
        cut,
        unit="cycles",
        confidence=1.0,
        method="midpoint of the median hit (one line again and again) and the median miss (a "
        "walk over all of constant memory at one line's stride)",
        evidence=f"{len(cal)} timed loads",
    )
    strides = capacities(data, STRIDE, "stride_lines", cut, share)
    offsets = capacities(data, OFFSET, "offset_lines", cut, share)
    k_offset = int(offsets["stride_lines"].iloc[0]) if not offsets.empty else None
    max_sets = max(1, int(strides["capacity_lines"].max())) if not strides.empty else 1
    models = _models(strides, offsets, max_sets)
    key = ["kind", "stride_lines", "offset_lines", "walk_lines"]
    walks = f"{len(data.loc[data['kind'] != CALIBRATE, key].drop_duplicates())} walks"
    evidence = (
        f"{len(strides)} strides, {len(offsets)} offsets at a stride of {k_offset} lines; "
        f"{walks}; a walk fits when at most {share:.0%} of its timed loads (or one) read "
        f"above {cut:.1f} cycles"
    )
    method = (
        "capacity of cyclic walks per stride and per start offset against S sets indexed by "
        "the line number modulo S, each set with its free ways (`analysis.caches.constant_sets`)"
    )
    free = models[0] if len(models) == 1 else None
    rows = []
    for r in strides.itertuples():
        pred = predict(free, int(r.stride_lines)) if free else None
        rows.append(
            {
                "stride_lines": int(r.stride_lines),
                "measured_lines": int(r.capacity_lines),
                "top_lines": int(r.top_lines),
                "predicted_lines": pred,
                "agree": None if pred is None else agrees(int(r.capacity_lines), pred, r.censored),
            }
        )
    doc["strides"] = rows
    doc["offsets"] = offsets.drop(columns="stride_lines").to_dict("records")
    doc["offset_stride_lines"] = k_offset
    if free is None:
        why = (
            "no S sets of free ways (S = 1.."
            f"{max_sets}) predicts every stride: not a set-associative cache indexed by the "
            "line number modulo S, or a stride read too noisy"
            if not models
            else f"{len(models)} models agree with every stride: "
            + ", ".join(f"{len(m)} sets of {max(m)} ways" for m in models[:4])
        )
        if strides.empty or bool(strides.loc[strides["stride_lines"] == 1, "censored"].all()):
            why = "the stride-1 walk never overflowed: the capacity is not bounded"
        for q in names:
            c[q] = undetermined(f"{why} ({evidence})")
        return doc
    sets, ways = len(free), max(free)
    conf = 1.0 if len(strides) >= 2 * sets else 0.7
    agreed = sum(1 for r in rows if r["agree"])
    detail = (
        f"{evidence}; free ways per set {free} (sum {sum(free)} lines = {sum(free) * line} B); "
        f"{agreed} of {len(rows)} strides as predicted"
    )
    c["sets"] = quantity(sets, unit=None, confidence=conf, method=method, evidence=detail)
    # a list, as every cache's ways_per_set (one entry, or one per set where they differ)
    c["ways_per_set"] = quantity([ways], unit=None, confidence=conf, method=method, evidence=detail)
    c["free_ways_per_set"] = quantity(
        free,
        unit=None,
        confidence=conf,
        method="per set, from the array's first line on, the ways a walk's data can use: the "
        "capacity of the offset walks (each in one set)",
        evidence=detail,
    )
    c["reserved_lines"] = quantity(
        sets * ways - sum(free),
        unit="lines",
        confidence=conf,
        method="ways times sets minus the free ways the offset walks read: lines the kernel "
        "itself keeps in the constant cache (parameters, driver constants)",
        evidence=detail,
    )
    c["capacity_bytes"] = quantity(
        sets * ways * line,
        unit="bytes",
        confidence=conf,
        method="sets x ways x line",
        evidence=detail,
    )
    one = next((r for r in rows if r["stride_lines"] == 1), None)
    if one is not None:
        c["walk_capacity_bytes"] = quantity(
            one["measured_lines"] * line,
            unit="bytes",
            confidence=conf,
            method="the largest cyclic walk at one line's stride that hits (what a size sweep "
            "over a contiguous array reads), beside the model's prediction",
            evidence=f"{one['measured_lines']} lines measured, {one['predicted_lines']} predicted: "
            f"the first set with fewer than {ways} free ways overflows first",
        )
    if sets == 1:
        c["set_index_bits"] = quantity(
            [], unit=None, confidence=conf, method=method, evidence=detail
        )
        c["index_kind"] = quantity(
            "fully_associative", unit=None, confidence=conf, method=method, evidence=detail
        )
    elif sets & (sets - 1) == 0:
        low = line.bit_length() - 1
        c["set_index_bits"] = quantity(
            list(range(low, low + sets.bit_length() - 1)),
            unit=None,
            confidence=conf,
            method=method,
            evidence=detail,
        )
        c["index_kind"] = quantity(
            "bits", unit=None, confidence=conf, method=method, evidence=detail
        )
    else:
        c["set_index_bits"] = undetermined(
            f"{sets} sets: the index is the line number modulo {sets}"
        )
        c["index_kind"] = quantity(
            "modulo", unit=None, confidence=conf, method=method, evidence=detail
        )
    return doc


def figure_table(data: pd.DataFrame, doc: dict[str, Any]) -> pd.DataFrame:
    """Predicted beside measured capacity per stride (the figure draws it)."""
    cols = ["stride_lines", "measured_lines", "predicted_lines", "top_lines"]
    rows = doc.get("strides") or []
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})
    return pd.DataFrame(rows)[cols].astype({"predicted_lines": "float64"})
