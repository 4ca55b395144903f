"""The `cache_sharing` result (Größler's thesis, Sec. 4.5): per L1-level cache, the caches of
other load paths that are the same physical cache.

Each ordered pair (A's path, B's path) is one test (`analysis.caches.disturbance`): B's walk
disturbs A's re-walk or not. B's walk can evict A's lines only where the two paths fill one storage,
so two paths reach one cache when either direction disturbs (the thesis counts misses of either
thread). A pair whose directions disagree is named in the evidence and halves the confidence:
an array near one cache's size need not overflow a larger cache it shares with a smaller one,
and a cache may keep one path's lines against the other's (an H100 keeps `ld.global.nc` lines
against a walk through `ld.global.ca` of the same size, while the reverse evicts them all).
"""

from __future__ import annotations

import pandas as pd

from ..common.result import quantity, undetermined
from .disturbance import (
    ELEMENT_OF_PATH,
    NAMING_RULE,
    disturbance,
    header_fields,
    skipped_quantities,
    walk_latencies,
)

METHOD = (
    "two-thread eviction test (Thesis Sec. 4.5): thread A fills its cache with an array near "
    "its size, thread B (the same warp) walks an array near its own cache's size on the other "
    "path, A re-walks timed; misses beyond A's baseline (one-sided Fisher test, and a minimum "
    "excess share) in either direction mean one physical cache"
)


def pair_tests(data: pd.DataFrame, *, alpha: float, min_excess: float) -> list[dict]:
    """One entry per ordered pair (A's path, B's path) with its test."""
    walks = walk_latencies(data)
    out = []
    for (test, a, b, _), lat in walks.items():
        if test != "disturbed":
            continue
        base = walks[("baseline", a, "", -1)]
        d = disturbance(base, lat, alpha=alpha, min_excess=min_excess)
        out.append({"path_a": a, "path_b": b} | d.as_dict() | {"evidence": d.evidence()})
    return out


def _shared_with(path: str, pairs: list[dict]) -> dict:
    by = {(p["path_a"], p["path_b"]): p for p in pairs}
    others = sorted({p["path_b"] for p in pairs if p["path_a"] == path})
    if not others:
        return undetermined("no other load path with a cache of its own was measured")
    shared, notes, confidence = [], [], 1.0
    for q in others:
        ab, ba = by.get((path, q)), by.get((q, path))
        if ab is None or ba is None:
            continue
        confidence = min(confidence, ab["confidence"], ba["confidence"])
        if ab["disturbed"] or ba["disturbed"]:
            shared.append(ELEMENT_OF_PATH[q])
        if ab["disturbed"] != ba["disturbed"]:
            confidence *= 0.5
            evicts = q if ab["disturbed"] else path
            notes.append(
                f"{path}/{q}: only the walk on {evicts} evicts the other's lines (one storage; "
                "its replacement keeps one path's lines against the other's)"
            )
    evidence = "; ".join(
        f"B on {q}: {by[(path, q)]['evidence']}; reverse: {by[(q, path)]['evidence']}"
        for q in others
        if (path, q) in by and (q, path) in by
    )
    return quantity(
        shared,
        unit=None,
        confidence=confidence,
        method=METHOD,
        evidence=evidence + ("; " + "; ".join(notes) if notes else ""),
    )


def analyse(data: pd.DataFrame, *, provenance: dict, inputs: dict | None = None) -> dict:
    """The `cache_sharing` result document for one device."""
    params = provenance.get("config", {}).get("parameters", {}) or {}
    paths = list(params.get("paths") or ELEMENT_OF_PATH)
    pairs = []
    if len(data):
        pairs = pair_tests(
            data,
            alpha=params.get("alpha", 0.01),
            min_excess=params.get("min_excess_miss_fraction", 0.25),
        )
    measured = sorted(set(data["path_a"])) if len(data) else []
    skipped = skipped_quantities((inputs or {}).get("cache_stage1"), set(paths) - set(measured))
    elements = {}
    for path in paths:
        element = ELEMENT_OF_PATH[path]
        if path in measured:
            elements[element] = {"path": path, "shared_with": _shared_with(path, pairs)}
        else:
            elements[element] = {"path": path, "shared_with": skipped[path]}
    return header_fields("cache_sharing", provenance, data) | {
        "pairs": pairs,
        "elements": elements,
        "naming_rule": NAMING_RULE,
    }
