"""Stage 1 of the two-stage fine-grained P-chase (Mei & Chu, TPDS Sec. 4.2, Fig. 6; NPC 2014
Sec. 3): the size C, the miss granule (MT4G's fetch granularity), the sector, the line size b and
the hit and miss latencies of one cache level on one load path. Sees only traces.

The rules, each applied to per-access latencies:

- **Size C** (TPDS step 1): arrays of growing size N at a small stride; C is the largest N
  before the first size whose slow accesses the timing-outlier rate cannot explain
  (`misses.FirstMissDetector`: binomial test). The sweep's resolution bounds C.
- **Miss granule g** (TPDS step 2, "the distance between missing accesses"): at stride one
  element (4 bytes) only the first access into a granule (a line, or a sector of a sectored line)
  can miss; the others hit the granule just loaded. g is the largest power of two that divides
  all missed addresses but a few (5%, or as many as the timing-outlier rate explains), bounded
  by misses at its odd multiples. First a cold walk: a
  fresh launch with no warm-up over 4 x `record_steps` bytes (the chain was just copied, so the
  level holds none of it: GPU caches in front of the L2 start every launch empty), where every
  granule misses once whatever the replacement policy. A level the copy fills (the L2 on a
  GPU) shows no cold misses; then TPDS's warm walk decides: arrays of C + 4 and C + C/8 bytes
  after one warm-up pass (at C + 4 an LRU cache with bit-indexed sets misses only in one set,
  whose lines lie a whole way apart; hence C + C/8 too). A cache that keeps most of a slightly
  too large array (the Hopper L1) hardly misses there: the cold walk is the one that works.
- **Line b, separate from the sector** (capacity against stride, `analysis.caches.cache_line`): the
  count of elements that fit falls as C / s while the stride s is below the line and stops
  falling at s = b. Walks of 7/8 C / P elements at strides 2P and 3P/2 (then 5P/2) for P = g,
  2g, ...: b is the smallest P at which one of them fits; on a cache without sectors b = g, on a
  sectored one (Hopper L1: 128 B lines, 32 B sectors) b > g.
- **Sector, apart from the fetch granularity** (`sector_quantity`): loads see only what one miss
  fills (g). Where a line of b > g bytes is filled g bytes at a time from a cache behind it (the
  L1s over the L2), the line holds b / g sectors of g bytes. Where the misses go to DRAM (the L2)
  one fill may bring several sectors, and where g = b the line fills whole: the sector is
  undetermined there (at most g).
- **Latencies**: the hit latency is the median of the accesses of the arrays that fit; the miss
  latency the median of the accesses classified as misses at the larger arrays; the miss
  penalty their difference.

The size rule and the hit/miss classification are in `level_size`, the granule rule in
`level_granule`, the line rule in `cache_line`; this module reads a level from its rows and
writes the stage-1 document.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import cache_line
from .level_granule import (
    COLD_PHASE,
    GRANULE_ALPHA,
    GRANULE_TOLERANCE,
    WARM_PHASE,
    GranuleFinding,
    cold_granule,
    cold_granule_bytes,
    granule_sizes,
    level_granule,
    miss_granule,
    warm_granule,
)
from .level_size import Classifier, SizeFinding, level_latencies, locate_size, size_groups

CONST_LIMIT_BYTES = 65536  # constant memory holds at most 64 KiB: the const path's arrays
DEFAULT_MAX_LINE_BYTES = 512  # the schema's default of cache_stage1.max_line_bytes


LINE_PHASE = "line"  # capacity against stride: the test walk of 7/8 C / P elements
LINE_CHECK_PHASE = "line_check"  # and the check walk of 5/4 C / P elements
# the rules the stage-1 sweep asks where to walk next, by the names it has always used
__all__ = [
    "COLD_PHASE",
    "LINE_CHECK_PHASE",
    "LINE_PHASE",
    "WARM_PHASE",
    "Classifier",
    "GranuleFinding",
    "SizeFinding",
    "analyse",
    "cold_granule",
    "cold_granule_bytes",
    "granule_sizes",
    "level_granule",
    "level_latencies",
    "level_line",
    "locate_size",
    "miss_granule",
    "path_limit_bytes",
    "size_groups",
    "warm_granule",
]


def path_limit_bytes(path: str) -> int | None:
    """Largest array a load path can address (constant memory: 64 KiB), or None."""
    return CONST_LIMIT_BYTES if path == "const" else None


# --- the stage-1 result document -------------------------------------------------------------

ELEMENTS = {
    ("ca", 1): "l1d",
    ("cg", 1): "l2",
    ("nc", 1): "readonly",
    ("tex", 1): "texture",
    ("const", 1): "constant_l1",
    ("const", 2): "constant_l15",
}
SAME_LEVEL = 0.10  # hit latencies within 10% are one latency level
SIZE_METHOD = (
    "fine-grained P-chase (TPDS Sec. 4.2 step 1): growing arrays at a small stride; the first "
    "size whose slow accesses the timing-outlier rate cannot explain (binomial test), refined "
    "inside its bracket"
)
_GRANULE_RULE = (
    f"largest power of two dividing {100 * (1 - GRANULE_TOLERANCE):g}% of the missed addresses, "
    "or all but as many as the level's timing-outlier rate explains (binomial tests at "
    f"p >= {GRANULE_ALPHA:g})"
)
FETCH_METHOD = "the bytes one miss brings in (MT4G's fetch granularity), by a "
# the elements whose misses go to DRAM: the last cache before it
FILLED_FROM_DRAM = frozenset({"l2"})
SECTOR_METHOD = (
    "the part of a line filled on its own: a miss fills one fetch granule g of a longer line b "
    "(capacity against stride) from the next cache, where the data hit, so the line holds "
    "b / g sectors of g bytes; loads resolve no smaller part"
)
GRANULE_METHOD = {
    COLD_PHASE: (
        "cold walk at stride 4 bytes (TPDS step 2, from an empty cache): " + _GRANULE_RULE
    ),
    WARM_PHASE: (
        "stride 4 bytes at C + 4 and C + C/8 after a warm-up pass (TPDS step 2; the cold walk "
        "saw no misses): " + _GRANULE_RULE
    ),
}
LINE_METHOD = (
    "capacity against stride: at most C / min(s, b) elements fit at stride s, so a walk of "
    f"{cache_line.LINE_FILL:g} C / P elements at stride 2P or 3P/2 overflows while P is below "
    "the line and fits at P = b; the line is the smallest candidate P (from the miss granule up) "
    "whose walk fits (misses insignificant, or below "
    f"{cache_line.LINE_RATIO:g} of the miss share of {cache_line.LINE_CHECK:g} C / P elements "
    "at the same stride, which must overflow)"
)


def _element(path: str, level: int) -> str:
    return ELEMENTS.get((path, level), f"{path}_level{level}")


def analyse_level(
    df: pd.DataFrame,
    *,
    path: str = "",
    level: int = 1,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> dict:
    """Quantities of one (path, level) from its rows (phases size, granule_cold, granule, line,
    line_check); `max_line_bytes`: the largest candidate line the sweep tried."""
    from ..common.result import quantity, undetermined

    size_rows = df[df["phase"] == "size"]
    stride = int(size_rows["stride_bytes"].iloc[0]) if len(size_rows) else None
    out: dict = {"size_search_stride_bytes": stride}
    names = (
        "size_bytes",
        "fetch_granularity_bytes",
        "sector_bytes",
        "line_bytes",
        "hit_latency_cycles",
        "miss_latency_cycles",
        "miss_penalty_cycles",
    )
    if size_rows.empty:
        return out | {k: undetermined("no size search in the trace") for k in names}
    sizes, groups = size_groups(size_rows)
    finding = locate_size(sizes, groups)
    hit_ref = finding.classifier.hit_latency_cycles if finding.classifier else None
    out["reference_hit_latency_cycles"] = hit_ref
    if finding.size_bytes is None:
        out |= {k: undetermined(finding.reason) for k in names}
        det = finding.detector
        if det is not None and det.reference_ok and det.result is None:
            out |= _no_miss_quantities(path, finding, stride)
        return out
    c, r, det = finding.size_bytes, finding.detector.result, finding.detector
    i = r.index
    out["size_bytes"] = quantity(
        c,
        unit="bytes",
        confidence=r.confidence,
        method=SIZE_METHOD,
        evidence=(
            f"stride {stride} B; {r.miss_counts[i - 1]}/{r.accesses[i - 1]} slow accesses at "
            f"{c} B, {r.miss_counts[i]}/{r.accesses[i]} at {finding.next_bytes} B (binomial "
            f"p={r.p_value:.2g} against the outlier rate {r.outlier_rate:.2g}); resolution "
            f"{finding.resolution_bytes} B: the size is in [{c}, {finding.next_bytes})"
            + r.earlier_note(sizes, " B")
        ),
    )
    del det
    lat = level_latencies(finding)
    out["hit_latency_cycles"] = quantity(
        round(lat["hit"], 1),
        unit="cycles",
        confidence=1.0 / (1.0 + lat["hit_iqr"] / max(lat["hit"], 1.0)),
        method="median latency of the accesses of the arrays that fit",
        evidence=f"{lat['hit_n']} accesses, IQR {lat['hit_iqr']:.1f} cycles"
        + (
            f"; the smallest arrays hit at {len(lat['hit_levels'])} levels (medians "
            f"{', '.join(f'{v:.0f}' for v in lat['hit_levels'])} cycles; "
            f"{lat['slower_hit_share']:.0%} of the hits slower): the fastest level's"
            if lat["hit_levels"]
            else ""
        ),
    )
    if lat["miss"] is None:
        out["miss_latency_cycles"] = undetermined("no access past the size fell in the miss band")
        out["miss_penalty_cycles"] = undetermined("no miss latency")
    else:
        ev = (
            f"{lat['miss_n']} misses (latency in ({finding.classifier.threshold_cycles:.0f}, "
            f"{finding.classifier.ceiling_cycles:.0f}]), IQR {lat['miss_iqr']:.1f} cycles"
        )
        conf = 1.0 / (1.0 + lat["miss_iqr"] / max(lat["miss"], 1.0))
        out["miss_latency_cycles"] = quantity(
            round(lat["miss"], 1),
            unit="cycles",
            confidence=conf,
            method="median latency of the accesses classified as misses past the size",
            evidence=ev,
        )
        out["miss_penalty_cycles"] = quantity(
            round(lat["miss"] - lat["hit"], 1),
            unit="cycles",
            confidence=conf,
            method="miss latency minus hit latency",
            evidence=ev,
        )
    g, phase = level_granule(df, finding.classifier)
    if g.granule_bytes is None:
        out["fetch_granularity_bytes"] = undetermined(g.reason)
    else:
        arrays = sorted(df[df["phase"] == phase]["array_bytes"].unique().tolist())
        out["fetch_granularity_bytes"] = quantity(
            g.granule_bytes,
            unit="bytes",
            confidence=1.0 - g.off_granule / g.misses,
            method=FETCH_METHOD + GRANULE_METHOD[phase],
            evidence=(
                f"{g.misses} misses at arrays of {arrays} B; {g.misses - g.off_granule} on "
                f"multiples of {g.granule_bytes} B, {g.odd_multiples} on odd multiples; "
                f"{g.off_granule} elsewhere (outliers)"
            ),
        )
    first = g.granule_bytes or stride
    out["line_bytes"] = _line_quantity(
        df,
        finding,
        first,
        from_granule=g.granule_bytes is not None,
        path=path,
        max_line_bytes=max_line_bytes,
    )
    out["sector_bytes"] = sector_quantity(
        out["fetch_granularity_bytes"], out["line_bytes"], element=_element(path, level)
    )
    return out


def sector_quantity(fetch: dict, line: dict, *, element: str) -> dict:
    """The sector (the part of a line that is valid on its own) from the fetch granularity g
    and the line b of one level: loads see only what one miss fills, so a sector shows where a
    line of b > g bytes is filled in g-byte parts from a cache behind it; where the misses go to
    DRAM (the L2) a fill may hold several sectors, and where g = b the line fills whole."""
    from ..common.result import quantity, undetermined

    g, b = fetch.get("value"), line.get("value")
    if g is None:
        return undetermined(f"no fetch granularity: {fetch.get('undetermined')}")
    if b is None:
        return undetermined(
            f"the line is undetermined, so whether a line fills in {g}-B parts is not known "
            f"(a sector is at most the {g}-B fetch granularity)"
        )
    if g >= b:
        return undetermined(
            f"a miss fills the whole {b}-B line (fetch granularity {g} B): the loads see no "
            "part of a line filled on its own, so the line is one sector or its sectors are "
            "always filled together"
        )
    if element in FILLED_FROM_DRAM:
        return undetermined(
            f"a miss fills {g} B of the {b}-B line from DRAM: the line is sectored, but one "
            f"fill may bring several sectors at once (a DRAM access of {g} B), which loads "
            f"cannot tell apart: the sector divides {g} B (at most {g} B)"
        )
    return quantity(
        int(g),
        unit="bytes",
        confidence=min(fetch.get("confidence", 1.0), line.get("confidence", 1.0)),
        method=SECTOR_METHOD,
        evidence=f"line {b} B, fetch granularity {g} B: {b // g} parts of {g} B per line",
    )


def _no_miss_quantities(path: str, finding: SizeFinding, stride: int | None) -> dict:
    """Where no swept size misses, the size has a lower bound, the largest size swept (on the
    const path the 64 KiB of constant memory bound the sweep: Thesis Sec. 4.2.4 reports the
    constant L1.5 that way), and every access is a hit of this level."""
    from ..common.result import quantity

    largest = int(finding.sizes_bytes[-1])
    limit = path_limit_bytes(path)
    why = (
        f"no array up to {largest} bytes misses"
        + (f" and constant memory holds {limit} bytes" if limit else "")
        + f": larger than {largest} bytes"
    )
    fits = np.concatenate(finding.groups)
    med = float(np.median(fits))
    iqr = float(np.subtract(*np.percentile(fits, [75, 25])))
    return {
        "size_bytes": {"value": None, "undetermined": why, "lower_bound": largest, "unit": "bytes"},
        "hit_latency_cycles": quantity(
            round(med, 1),
            unit="cycles",
            confidence=1.0 / (1.0 + iqr / max(med, 1.0)),
            method="median latency of every access of the size search (no array missed)",
            evidence=f"{fits.size} accesses at stride {stride} B, IQR {iqr:.1f} cycles",
        ),
    }


def line_walks(
    df: pd.DataFrame, classifier: Classifier
) -> dict[cache_line.WalkKey, cache_line.LineWalk]:
    """The capacity-against-stride walks of one level's rows, pooled over their windows."""
    rows = df[df["phase"].isin([LINE_PHASE, LINE_CHECK_PHASE])]
    out: dict[cache_line.WalkKey, cache_line.LineWalk] = {}
    if rows.empty:
        return out
    keys = ["line_candidate_bytes", "stride_bytes", "phase"]
    for (p, s, phase), grp in rows.groupby(keys, sort=True):
        check = phase == LINE_CHECK_PHASE
        out[(int(p), int(s), check)] = cache_line.line_walk(
            classifier.slow(grp["latency_cycles"]),
            outlier_rate=classifier.outlier_rate,
            candidate_bytes=int(p),
            stride_bytes=int(s),
            check=check,
            elements=int(grp["array_bytes"].iloc[0]) // int(s),
        )
    return out


def level_line(
    df: pd.DataFrame, finding: SizeFinding, first_bytes: int, *, path: str, max_line_bytes: int
) -> cache_line.LineFinding:
    """The line rule (`analysis.caches.cache_line`) over one level's line walks."""
    limit = path_limit_bytes(path)
    return cache_line.locate_line(
        line_walks(df, finding.classifier),
        size_bytes=finding.size_bytes,
        first_bytes=first_bytes,
        max_line_bytes=max_line_bytes,
        runnable=lambda n, s: limit is None or n * s <= limit,
    )


def _line_quantity(df, finding, first, *, from_granule, path, max_line_bytes) -> dict:
    from ..common.result import quantity, undetermined

    line = level_line(df, finding, first, path=path, max_line_bytes=max_line_bytes)
    if line.line_bytes is None:
        return undetermined(f"capacity against stride: {line.reason}")
    c, b, s = finding.size_bytes, line.line_bytes, line.stride_bytes
    lo = cache_line.walk_elements(c, b, check=False)
    hi = cache_line.walk_elements(c, b, check=True)
    start = (
        f"candidates from the miss granule {first} B"
        if from_granule
        else f"candidates from the size search's stride {first} B (no miss granule: assumes the "
        "line is at least that stride)"
    )
    if line.checked:
        count = (
            f"between {lo} and {hi} elements fit: C / count in ({c / hi:.0f}, {c / lo:.0f}] B per "
            "element"
        )
    else:
        count = f"at least {lo} elements fit: C / count <= {c / lo:.0f} B per element"
    return quantity(
        b,
        unit="bytes",
        confidence=line.confidence * (1.0 if from_granule else 0.5),
        method=LINE_METHOD,
        evidence=(
            f"C = {c} B; {start}; " + "; ".join(line.log) + f"; so at stride {s} B {count}, not "
            f"the {s} B of a line longer than the stride"
        ),
    )


def analyse(data: pd.DataFrame, *, provenance: dict, inputs: dict | None = None) -> dict:
    """The `cache_stage1` result document for one device."""
    from ..common.result import not_applicable

    params = provenance.get("config", {}).get("parameters", {}) or {}
    enabled = [p for p, e in (params.get("paths") or {}).items() if e.get("enabled", True)]
    paths: dict = {}
    for path in dict.fromkeys(list(data["path"].unique()) + enabled):
        rows = data[data["path"] == path]
        if rows.empty:
            paths[path] = {
                "measured": False,
                "not_applicable": True,
                "reason": "the device has no such load path",
            }
            continue
        levels = []
        for level, df in rows.groupby("level", sort=True):
            q = analyse_level(
                df,
                path=path,
                level=int(level),
                max_line_bytes=params.get("max_line_bytes", DEFAULT_MAX_LINE_BYTES),
            )
            levels.append({"level": int(level), "element": _element(path, int(level))} | q)
        paths[path] = {"measured": True, "levels": levels}
    _name_by_latency_level(paths)
    elements: dict = {}
    for path, entry in paths.items():
        for lv in entry.get("levels", []):
            served = lv.get("served_by")
            if served:
                reason = (
                    f"the {path} path is served at the {served} latency level "
                    f"({lv['reference_hit_latency_cycles']:.0f} cycles): no {lv['element']} "
                    "caches it"
                )
                elements.setdefault(lv["element"], {"path": path, "level": lv["level"]})
                elements[lv["element"]] |= {"served_by": served, "note": reason}
                continue
            keys = [k for k in lv if k.endswith(("_bytes", "_cycles")) and isinstance(lv[k], dict)]
            elements[lv["element"]] = {"path": path, "level": lv["level"]} | {
                k: lv[k] for k in keys
            }
    for el in elements.values():
        if "note" in el:
            for k in (
                "size_bytes",
                "line_bytes",
                "fetch_granularity_bytes",
                "sector_bytes",
                "hit_latency_cycles",
            ):
                el.setdefault(k, not_applicable(el["note"]))
    carve = sorted(set(data["carveout_pct"].astype(int))) if len(data) else []
    return {
        "device": provenance["device"],
        "analysis": "cache_stage1",
        "trace": {k: provenance.get(k) for k in ("git_commit", "config_hash", "created_utc")},
        "device_info": provenance.get("device_info", {}),
        "backend": provenance.get("backend"),
        "clocks_before": provenance.get("clocks_before"),
        "clocks_after": provenance.get("clocks_after"),
        "carveout_pct": None if not carve or carve == [-1] else carve,
        "shared_buffer_bytes": (int(data["shared_buffer_bytes"].iloc[0]) if len(data) else None),
        "paths": paths,
        "elements": elements,
        "naming_rule": (
            "ca -> l1d, cg -> l2, nc -> readonly, tex -> texture, const -> constant_l1 then "
            "constant_l15; a path whose first level hits within 10% of the cg path's hit "
            "latency is served by the L2 (no cache of its own on that path)"
        ),
    }


def _name_by_latency_level(paths: dict) -> None:
    cg = paths.get("cg", {}).get("levels", [])
    l2_hit = cg[0].get("reference_hit_latency_cycles") if cg else None
    if not l2_hit:
        return
    for path, entry in paths.items():
        if path == "cg" or not entry.get("levels"):
            continue
        first = entry["levels"][0]
        hit = first.get("reference_hit_latency_cycles")
        if hit is not None and abs(hit - l2_hit) <= SAME_LEVEL * l2_hit:
            first["served_by"] = "l2"
