"""The `cache_instances` result (Größler's thesis, Sec. 4.6): copies of each L1-level cache
per SM.

Per path, the base thread (warp 0) against a test thread in each warp w = 1 .. W - 1
(`analysis.caches.disturbance`): the warps whose walk disturbs the base thread's re-walk use its
copy. With S = {0} and those warps, copies repeating every k warps (the warp schedulers take warps
round robin, Thesis Sec. 4.6) make S = {w < W: w mod k = 0}: the SM has k copies. When no warp
shares warp 0's copy, there are at least W copies (a lower bound); when S is not periodic, W /
|S| copies at half the confidence (warps spread evenly over the copies).
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
    "base thread against test threads in other warps (Thesis Sec. 4.6): warp 0 fills its cache "
    "with an array near its size, a thread of warp w walks another array near the size on the "
    "same path, warp 0 re-walks timed; warps that disturb it (one-sided Fisher test and a "
    "minimum excess share) share its copy; copies = the period of the sharing warps"
)


def warp_tests(data: pd.DataFrame, path: str, *, alpha: float, min_excess: float) -> list[dict]:
    walks = walk_latencies(data[data["path_a"] == path])
    base = walks[("baseline", path, "", -1)]
    out = []
    for (test, _, _, warp), lat in sorted(walks.items(), key=lambda kv: kv[0][3]):
        if test == "disturbed":
            d = disturbance(base, lat, alpha=alpha, min_excess=min_excess)
            out.append({"warp": warp} | d.as_dict())
    return out


def instances(tests: list[dict]) -> dict:
    """Copies per SM from the per-warp tests (rules: module docstring)."""
    warps = 1 + max(t["warp"] for t in tests)
    sharing = [0] + [t["warp"] for t in tests if t["disturbed"]]
    confidence = min(t["confidence"] for t in tests)
    evidence = f"warps sharing warp 0's copy: {sharing} of 0..{warps - 1}; " + "; ".join(
        f"warp {t['warp']}: {t['misses_disturbed']}/{t['accesses_disturbed']} misses "
        f"(baseline {t['misses_baseline']}/{t['accesses_baseline']}, p={t['p_value']:.2g})"
        for t in tests
    )
    if sharing == [0]:
        return undetermined(
            f"no warp of 1..{warps - 1} shares warp 0's copy: at least {warps} copies "
            f"(raise warps to see the pattern repeat); {evidence}"
        ) | {"lower_bound": warps, "unit": "copies"}
    k = sharing[1]
    if sharing == list(range(0, warps, k)):
        return quantity(k, unit="copies", confidence=confidence, method=METHOD, evidence=evidence)
    return quantity(
        max(1, round(warps / len(sharing))),
        unit="copies",
        confidence=0.5 * confidence,
        method=METHOD + "; the sharing warps are not periodic: W / |S|",
        evidence=evidence,
    )


def analyse(data: pd.DataFrame, *, provenance: dict, inputs: dict | None = None) -> dict:
    """The `cache_instances` result document for one device."""
    params = provenance.get("config", {}).get("parameters", {}) or {}
    paths = list(params.get("paths") or ELEMENT_OF_PATH)
    alpha = params.get("alpha", 0.01)
    min_excess = params.get("min_excess_miss_fraction", 0.25)
    measured = sorted(set(data["path_a"])) if len(data) else []
    skipped = skipped_quantities((inputs or {}).get("cache_stage1"), set(paths) - set(measured))
    elements = {}
    for path in paths:
        element = ELEMENT_OF_PATH[path]
        if path not in measured:
            elements[element] = {"path": path, "instances_per_sm": skipped[path]}
            continue
        tests = warp_tests(data, path, alpha=alpha, min_excess=min_excess)
        elements[element] = {
            "path": path,
            "instances_per_sm": instances(tests)
            if tests
            else undetermined("no test warp was run (warps < 2)"),
            "warps": tests,
        }
    return header_fields("cache_instances", provenance, data) | {
        "elements": elements,
        "naming_rule": NAMING_RULE,
    }
