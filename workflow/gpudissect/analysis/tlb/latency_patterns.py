"""Latency patterns P1-P6 (TPDS Sec. 5.2, Fig. 14; NPC Table 3) from the addresses of a cold
non-uniform-stride P-chase and the translation capacities measured by `tlbs`.

Each access is classified from the address sequence of its launch alone:
- page walk miss: the first touch of a page in the launch (of an L2-TLB unit, where the two
  levels translate units of different sizes); window switch: a first touch whose page-table
  window (address // W) differs from that of the previous first touch;
- TLB: the page's reuse distance d (distinct other pages since its last use, i.e. its depth in
  an LRU stack, counted in each level's own unit): L1-TLB hit if d1 < E1, L2-TLB hit if
  d2 < E2 (fully associative LRU reading of the measured entries; within 10% of a capacity an
  access is left out as ambiguous);
- data cache: hit if its 32-byte sector was read before in the launch (the chain keeps sector
  reuse far below every data cache of the papers' GPUs), else miss.

  P1 data hit, L1-TLB hit         P4 data miss, L1-TLB hit
  P2 data hit, L1 miss, L2 hit    P5 data miss, TLB miss, page walk miss (a page's first touch)
  P3 data hit, L2-TLB miss        P6 P5 with a page-table window switch

Per path and pattern: median latency, IQR, count. Sees only the trace and `tlbs.json`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...exceptions import AnalysisError
from ..common.result import no_path_reason, not_applicable, quantity, undetermined

PATTERNS = ("P1", "P2", "P3", "P4", "P5", "P6")
POSITION_BYTES = 4  # the trace's `position` is the byte address / 4
SECTOR_BYTES = 32
DEFINITION = {
    "P1": "data-cache hit, L1-TLB hit",
    "P2": "data-cache hit, L1-TLB miss, L2-TLB hit",
    "P3": "data-cache hit, L2-TLB miss",
    "P4": "data-cache miss, L1-TLB hit",
    "P5": "data-cache miss, TLB miss, page-walk miss (first touch of a page)",
    "P6": "P5 with a page-table window switch",
}


def _value(doc: dict, *keys: str):
    node = doc
    for k in keys:
        node = node.get(k) if isinstance(node, dict) else None
    return node.get("value") if isinstance(node, dict) else None


def capacities(tlbs_doc: dict) -> dict[str, Any]:
    """What `classify` needs from tlbs.json. Where the L1 TLB's unit is undetermined but the L2
    TLB's is known, pages are told apart in the L2 unit (P3, P5, P6 need no more); the L1-TLB
    patterns then stay undetermined with the L1 entries."""
    l1_page = _value(tlbs_doc, "elements", "l1_tlb", "page_bytes")
    l2_page = _value(tlbs_doc, "elements", "l2_tlb", "page_bytes")
    return {
        "page_bytes": l1_page or l2_page,
        "l2_page_bytes": l2_page,
        "l1_entries": _value(tlbs_doc, "elements", "l1_tlb", "entries") if l1_page else None,
        "l2_entries": _value(tlbs_doc, "elements", "l2_tlb", "entries"),
        "l2_sets": _value(tlbs_doc, "elements", "l2_tlb", "sets"),
        "window_bytes": _value(tlbs_doc, "page_table", "page_table_window_bytes"),
    }


def _near(d: int, capacity: int) -> bool:
    return abs(d - capacity) <= max(1.0, 0.1 * capacity)


def classify(
    positions: np.ndarray,
    *,
    page_bytes: int,
    l1_entries: int | None,
    l2_entries: int | None,
    window_bytes: int | None,
    l2_page_bytes: int | None = None,
) -> np.ndarray:
    """Pattern of each access of one launch ('' where none applies or it is ambiguous).
    `page_bytes` is the L1 TLB's unit, `l2_page_bytes` the L2 TLB's (default: the same)."""
    addr = np.asarray(positions, dtype=np.int64) * POSITION_BYTES
    out = np.full(len(addr), "", dtype=object)
    unit2 = l2_page_bytes or page_bytes
    stack1: list[int] = []  # L1 units, most recent first
    stack: list[int] = []  # L2 units, most recent first
    sectors: set[int] = set()
    last_walk_window = None
    for t, a in enumerate(addr):
        page, sector = int(a // unit2), int(a // SECTOR_BYTES)
        data_hit = sector in sectors
        sectors.add(sector)
        u1 = int(a // page_bytes)
        d1 = stack1.index(u1) if u1 in stack1 else None
        if d1 is not None:
            stack1.pop(d1)
        stack1.insert(0, u1)
        if page not in stack:
            stack.insert(0, page)
            window = None if not window_bytes else int(a // window_bytes)
            switched = last_walk_window is not None and window != last_walk_window
            last_walk_window = window
            if t > 0 and not data_hit:  # the launch's first load also starts the timing
                out[t] = "P6" if switched else "P5"
            continue
        d = stack.index(page)
        stack.insert(0, stack.pop(d))
        if d1 is None:  # a new L1 unit inside a known L2 unit: an L1-TLB miss
            d1 = len(stack1) + (l1_entries or 0) + 2
        l2_miss = l2_entries is not None and not _near(d, l2_entries) and d >= l2_entries
        if data_hit and l2_miss and (l1_entries is None or not _near(d1, l1_entries)):
            out[t] = "P3"  # past the L2 TLB's reach, so past the (smaller) L1 TLB's too
            continue
        if l1_entries is None or _near(d1, l1_entries):
            continue
        if d1 < l1_entries:
            out[t] = "P1" if data_hit else "P4"
        elif data_hit and l2_entries is not None and not _near(d, l2_entries):
            out[t] = "P2"
    return out


def _summary(lat: np.ndarray, pattern: str, path: str, caps: dict[str, Any]) -> dict[str, Any]:
    med = float(np.median(lat))
    q1, q3 = np.percentile(lat, [25, 75])
    iqr = float(q3 - q1)
    return quantity(
        round(med, 1),
        unit="cycles",
        confidence=min(1.0, lat.size / 30) / (1.0 + iqr / max(med, 1.0)),
        method=(
            "median latency of the accesses classified as "
            f"{pattern} ({DEFINITION[pattern]}) from page/sector reuse and first touches"
        ),
        evidence=(
            f"{lat.size} accesses on the {path} path, IQR {iqr:.1f} cycles "
            f"(p25 {q1:.0f}, p75 {q3:.0f}); capacities: page {caps['page_bytes']} bytes"
            + (
                f" (L2 TLB {caps['l2_page_bytes']})"
                if caps.get("l2_page_bytes") not in (None, caps["page_bytes"])
                else ""
            )
            + f", L1 TLB {caps['l1_entries']}, L2 TLB {caps['l2_entries']} entries, window "
            f"{caps['window_bytes']}"
            + (
                "; a page reuse distance past the L2-TLB entries reads as a miss of a fully "
                "associative LRU TLB: where the L2 TLB is set-associative (tlbs: sets "
                "undetermined) some of these accesses still hit it, and the median mixes both"
                if pattern == "P3" and caps.get("l2_sets") is None
                else ""
            )
        ),
    )


def classify_trace(data: pd.DataFrame, caps: dict[str, Any]) -> pd.DataFrame:
    """The trace with a `pattern` column."""
    if data.empty:  # no path the device has
        return data.assign(pattern=pd.Series(dtype=object))
    parts = []
    for _, g in data.groupby("point", sort=True):
        g = g.sort_values("step")
        parts.append(
            g.assign(
                pattern=classify(
                    g["position"].to_numpy(),
                    page_bytes=caps["page_bytes"],
                    l1_entries=caps["l1_entries"],
                    l2_entries=caps["l2_entries"],
                    window_bytes=caps["window_bytes"],
                    l2_page_bytes=caps.get("l2_page_bytes"),
                )
            )
        )
    return pd.concat(parts, ignore_index=True)


def analyse(
    data: pd.DataFrame, *, provenance: dict[str, Any], inputs: dict | None = None
) -> dict[str, Any]:
    need = {"point", "path", "step", "position", "latency_cycles"}
    if not need <= set(data.columns):
        raise AnalysisError(f"trace lacks columns {sorted(need - set(data.columns))}")
    tlbs_path = (inputs or {}).get("tlbs")
    tlbs_doc = json.loads(Path(tlbs_path).read_text()) if tlbs_path else {}
    caps = capacities(tlbs_doc)
    doc: dict[str, Any] = {
        "device": provenance.get("device"),
        "analysis": "latency_patterns",
        "trace": {k: provenance.get(k) for k in ("git_commit", "config_hash", "created_utc")},
        "device_info": provenance.get("device_info", {}),
        "clocks_before": provenance.get("clocks_before"),
        "clocks_after": provenance.get("clocks_after"),
        "capacities": caps,
        "elements": {},
        "paths": _absent_paths(data, provenance),
    }
    if caps["page_bytes"] is None:
        reason = "the page size is undetermined (tlbs.json), so pages cannot be told apart"
        doc["paths"] |= {
            p: {pat: undetermined(reason) for pat in PATTERNS} for p in data["path"].unique()
        }
        return doc
    classified = classify_trace(data, caps)
    for path, g in classified.groupby("path", sort=False):
        result: dict[str, Any] = {}
        for pat in PATTERNS:
            lat = g.loc[g["pattern"] == pat, "latency_cycles"].to_numpy(np.float64)
            if lat.size >= 3:
                result[pat] = _summary(lat, pat, str(path), caps)
            elif pat == "P6" and not caps["window_bytes"]:
                result[pat] = undetermined(
                    "no page-table window was found by tlbs, so no access switches windows"
                )
            elif pat in ("P1", "P2", "P4") and caps["l1_entries"] is None:
                result[pat] = undetermined("the L1-TLB entries are undetermined (tlbs.json)")
            elif pat in ("P2", "P3") and caps["l2_entries"] is None:
                result[pat] = undetermined("the L2-TLB entries are undetermined (tlbs.json)")
            else:
                result[pat] = undetermined(f"only {lat.size} accesses of this pattern")
        counts = g["pattern"].replace("", "none").value_counts().to_dict()
        doc["paths"][str(path)] = result | {
            "accesses_by_pattern": {str(k): int(v) for k, v in counts.items()},
            "findings": _findings(result),
        }
    return doc


def _absent_paths(data: pd.DataFrame, provenance: dict[str, Any]) -> dict[str, Any]:
    """Every configured path the trace has no row of (the sweep skips a path the device
    lacks): each pattern not applicable, with the reason."""
    asked = provenance.get("config", {}).get("parameters", {}).get("paths") or []
    measured = set(data["path"].unique())
    return {
        p: {pat: not_applicable(no_path_reason(provenance, path=p)) for pat in PATTERNS}
        for p in asked
        if p not in measured
    }


def _findings(r: dict[str, Any]) -> list[str]:
    """Penalties read off the pattern medians (TPDS Sec. 5.2 findings)."""
    v = {p: r[p].get("value") for p in PATTERNS if isinstance(r.get(p), dict)}
    out = []
    if v.get("P1") is not None and v.get("P2") is not None:
        d = v["P2"] - v["P1"]
        out.append(
            f"L1-TLB miss on a data-cache hit costs {d:.0f} cycles (P2 - P1)"
            + (": data-cache hits do not go through the TLBs" if abs(d) <= 3 else "")
        )
    if v.get("P2") is not None and v.get("P3") is not None:
        out.append(f"L2-TLB miss costs {v['P3'] - v['P2']:.0f} cycles more (P3 - P2)")
    if v.get("P4") is not None and v.get("P5") is not None:
        out.append(f"a cold page walk adds {v['P5'] - v['P4']:.0f} cycles to a miss (P5 - P4)")
    if v.get("P5") is not None and v.get("P6") is not None:
        out.append(f"a page-table window switch adds {v['P6'] - v['P5']:.0f} cycles (P6 - P5)")
    return out


def summary_table(data: pd.DataFrame, doc: dict[str, Any]) -> pd.DataFrame:
    """Per path and pattern: the classified latencies (the table the figure draws)."""
    caps = doc["capacities"]
    if caps.get("page_bytes") is None:
        cols = {"path": "object", "pattern": "object", "step": "int64"}
        cols |= {"latency_cycles": "float64", "repetition": "int64"}
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in cols.items()})
    c = classify_trace(data, caps)
    return c.loc[c["pattern"] != "", ["path", "pattern", "step", "latency_cycles", "repetition"]]
