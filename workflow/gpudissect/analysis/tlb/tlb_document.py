"""The `tlbs` result document (TPDS Sec. 4.4, Table V; the rules are in `tlb` and
`tlb_shift`).

Two readings of the reach stage name the levels:
- the threshold reading (`tlb.fit_reach`): accesses slower than every data hit are TLB misses;
  the first level it finds is the L1 TLB and the pages stage (walks of one element per page)
  finds the next one, the L2 TLB, as on the papers' GPUs;
- the paired reading (`tlb_shift`): when it finds a level whose reach is at most half of the
  threshold reading's, that level is the L1 TLB (its penalty hides in the spread of data
  latencies) and the threshold reading's level is the L2 TLB, whose entries, sets and penalty
  come from the pages stage walked at its page.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ...exceptions import AnalysisError
from ..common.result import quantity, undetermined
from . import tlb_quantities as tq
from . import tlb_shift
from .tlb import Reach, fit_reach
from .tlb_levels import level_containing
from .tlb_pages import fit_pages, in_units, level_unit
from .tlb_sets import SetStructure, set_structure
from .tlb_window import fit_window

KEYS = ("page_bytes", "entries", "sets", "ways_per_set", "policy", "miss_penalty_cycles")
METHOD_SHIFT = (
    "paired-address reading of the reach walks: each address's median latency compared across "
    "walks of growing length (TPDS Sec. 4.4 reach walks; a penalty inside the spread of data "
    "latencies)"
)


def analyse(
    data: pd.DataFrame, *, provenance: dict[str, Any], inputs: dict | None = None
) -> dict[str, Any]:
    """The `tlbs` result document for one device."""
    need = {"stage", "stride_bytes", "elements", "step", "position", "latency_cycles"}
    if not need <= set(data.columns):
        raise AnalysisError(f"trace lacks columns {sorted(need - set(data.columns))}")
    reach_rows = data[data["stage"] == "reach"]
    reach = fit_reach(reach_rows)
    doc: dict[str, Any] = {
        "device": provenance.get("device"),
        "analysis": "tlbs",
        "path": str(provenance.get("config", {}).get("parameters", {}).get("path", "cg")),
        "trace": {k: provenance.get(k) for k in ("git_commit", "config_hash", "created_utc")},
        "device_info": provenance.get("device_info", {}),
        "clocks_before": provenance.get("clocks_before"),
        "clocks_after": provenance.get("clocks_after"),
    }
    fits = [r.fit_bytes for r in reach.strides if r.fit_bytes] if reach else []
    threshold_reach = (
        min(fits) if reach is not None and reach.page_bytes is not None and fits else None
    )
    hidden = (
        tlb_shift.hidden_level(
            tlb_shift.shift_onsets(reach_rows), threshold_reach_bytes=threshold_reach
        )
        if not reach_rows.empty
        else None
    )
    window_doc = _window_doc(data, reach)
    if hidden is not None:
        l1, l2, extra = _with_hidden_l1(data, reach, hidden)
    elif reach is None or reach.page_bytes is None:
        why = "no reach stage" if reach is None else reach.page_evidence
        l1 = {key: undetermined(why) for key in KEYS}
        l2 = {key: undetermined(why) for key in KEYS}
        extra = {"levels": {}, "pages": []}
    else:
        l1, l2, extra = _threshold_levels(data, reach)
    window_doc = _unit_not_window(window_doc, data, {"L1 TLB": l1, "L2 TLB": l2})
    return (
        doc
        | {
            "elements": {"l1_tlb": l1, "l2_tlb": l2},
            "page_table": window_doc,
            "reach": _reach_rows(reach),
            "reach_paired": _onset_rows(hidden),
        }
        | extra
    )


def _threshold_levels(data: pd.DataFrame, reach: Reach):
    """The papers' reading: the reach stage's level is the L1 TLB, the pages stage's next
    level the L2 TLB."""
    page = reach.page_bytes
    page_q = quantity(
        page,
        unit="bytes",
        confidence=reach.page_confidence,
        method=tq.METHOD_PAGE,
        evidence=reach.page_evidence,
    )
    walks = fit_pages(
        data[data["stage"] == "pages"],
        sigma=reach.sigma,
        base_value=reach.base.center,
        base_range=(reach.base.lo, reach.base.hi),
    )
    st1 = st2 = SetStructure(None, None, None, (), None, "no stride = page walks", 0.0)
    unit2 = page
    l1: dict[str, Any] = {}
    l2: dict[str, Any] = {}
    levels_doc: dict[str, Any] = {}
    if walks is not None and not walks.counts.empty:
        st1 = set_structure(walks.counts, "l1", unplaced=walks.unplaced)
        longest = int(walks.counts["elements"].max())
        none_seen = (
            f"no L2-TLB miss level in walks of up to {longest} pages "
            f"({longest * page / 2**20:g} MiB): the L2 TLB reaches further, or there is none"
        )
        st2 = SetStructure(None, None, None, (), None, none_seen, 0.0)
        if walks.l2_index is not None:
            unit2, share2 = level_unit(data[data["stage"] == "pages"], walks, walks.l2_index)
            counts2, unplaced2 = (
                in_units(walks, unit2) if unit2 > page else (walks.counts, walks.unplaced)
            )
            st2 = set_structure(counts2, "l2", unplaced=unplaced2)
        b = level_containing(list(walks.levels), reach.base.center)
        levels_doc = tq.levels_doc(walks.levels, b, walks.l1_index, walks.l2_index)
        l1["miss_penalty_cycles"] = tq.penalty(
            walks.levels, b, walks.l1_index, None, "L1-TLB miss over the base", walks.onset_parts
        )
        l2["miss_penalty_cycles"] = tq.penalty(
            walks.levels, walks.l1_index, walks.l2_index, None, "L2-TLB miss over the L1-TLB miss"
        )
    else:
        l1["miss_penalty_cycles"] = undetermined("no stride = page walks")
        l2["miss_penalty_cycles"] = undetermined("no stride = page walks")
    est = reach.l1_entries_estimate
    if st1.entries is not None and est is not None and not est[0] <= st1.entries < est[1]:
        st1 = SetStructure(
            st1.entries,
            st1.sets,
            st1.ways,
            st1.increments,
            st1.policy,
            st1.evidence + f" (the reach stage put it in [{est[0]}, {est[1]}))",
            st1.confidence * 0.5,
        )
    l1 = {"page_bytes": page_q} | tq.structure_quantities(st1, page, unit_note="") | l1
    page2, page2_q = page, page_q
    if walks is not None and walks.l2_index is not None and unit2 > page:
        page2 = unit2
        page2_q = quantity(
            unit2,
            unit="bytes",
            confidence=reach.page_confidence * share2,
            method=tq.METHOD_PAGE + "; the L2 TLB's own unit from the pages stage",
            evidence=f"in the longest stride = page ({page} bytes) walk that misses the L2 "
            f"TLB, consecutive L2-TLB misses lie {unit2} bytes apart ({share2:.0%} of the "
            f"distances): one entry covers {unit2 // page} of the walk's pages",
        )
    l2 = {"page_bytes": page2_q} | tq.structure_quantities(st2, page2, unit_note="") | l2
    extra = {
        "levels": levels_doc,
        "pages": tq.pages_rows(walks),
        "l1_increments": list(st1.increments),
        "l2_increments": list(st2.increments),
    }
    return l1, l2, extra


def _with_hidden_l1(data: pd.DataFrame, reach: Reach | None, h: tlb_shift.HiddenLevel):
    """The paired reading's level is the L1 TLB; the threshold reading's, the L2 TLB."""
    l1 = _hidden_quantities(h)
    if reach is None or reach.page_bytes is None:
        why = (
            f"no TLB level beyond the L1 TLB's reach ({h.reach_bytes / 2**20:g} MiB) shows in "
            "the swept arrays: " + ("no reach stage" if reach is None else reach.page_evidence)
        )
        return l1, {key: undetermined(why) for key in KEYS}, {"levels": {}, "pages": []}
    page = reach.page_bytes
    l2: dict[str, Any] = {
        "page_bytes": quantity(
            page,
            unit="bytes",
            confidence=reach.page_confidence,
            method=tq.METHOD_PAGE,
            evidence=reach.page_evidence
            + f" (a level past the L1 TLB's reach of {h.reach_bytes / 2**20:g} MiB)",
        )
    }
    walks = fit_pages(
        data[data["stage"] == "pages"],
        sigma=reach.sigma,
        base_value=reach.base.center,
        base_range=(reach.base.lo, reach.base.hi),
    )
    if walks is None or walks.counts.empty or walks.l1_index is None:
        why = "no stride = page walks show a level above the base"
        st = SetStructure(None, None, None, (), None, why, 0.0)
        l2["miss_penalty_cycles"] = undetermined(why)
        levels_doc: dict[str, Any] = {}
    else:
        # the first level above the base in the page walks is the L2-TLB miss here
        st = set_structure(walks.counts, "l1", unplaced=walks.unplaced)
        b = level_containing(list(walks.levels), reach.base.center)
        levels_doc = tq.levels_doc(walks.levels, b, None, walks.l1_index)
        l2["miss_penalty_cycles"] = tq.penalty(
            walks.levels,
            b,
            walks.l1_index,
            None,
            "L2-TLB miss over the base (L1-TLB misses)",
            walks.onset_parts,
        )
    l2 = {"page_bytes": l2["page_bytes"]} | tq.structure_quantities(st, page, unit_note="") | l2
    # the page walks' first level above the base is this GPU's L2 TLB: name its columns so
    rows = [
        {
            "elements": r["elements"],
            "steps": r["steps"],
            "l2_misses": r.get("l1_misses"),
            "l2_spread": r.get("l1_spread"),
        }
        for r in tq.pages_rows(walks)
    ]
    extra = {
        "levels": levels_doc,
        "pages": rows,
        "l1_increments": [],
        "l2_increments": list(st.increments),
    }
    return l1, l2, extra


def _hidden_quantities(h: tlb_shift.HiddenLevel) -> dict[str, Any]:
    if h.page_bytes is None:
        return {key: undetermined(h.page_evidence) for key in KEYS}
    q: dict[str, Any] = {
        "page_bytes": quantity(
            h.page_bytes,
            unit="bytes",
            confidence=h.page_confidence,
            method=METHOD_SHIFT + ": spacing of the addresses that rose",
            evidence=h.page_evidence,
        )
    }
    q["entries"] = (
        quantity(
            h.entries,
            unit="entries",
            confidence=0.9,
            method=METHOD_SHIFT + ": units that fit, each stride's bracket intersected",
            evidence=h.entries_evidence + f" ({h.entries * h.page_bytes} bytes reach)",
        )
        if h.entries is not None
        else undetermined(
            h.entries_evidence + "; walks one element apart around the onset would decide"
        )
    )
    if h.one_set and h.entries is not None:
        method = METHOD_SHIFT + ": which addresses rose once the level overflowed (TPDS Fig. 10)"
        q["sets"] = quantity(1, unit=None, confidence=0.8, method=method, evidence=h.set_evidence)
        q["ways_per_set"] = quantity(
            [h.entries], unit=None, confidence=0.8, method=method, evidence=h.set_evidence
        )
        q["policy"] = quantity(
            "lru",
            unit=None,
            confidence=0.6,
            method=method,
            evidence=h.set_evidence + "; every traversal misses alike: LRU (or FIFO)",
        )
    else:
        for key in ("sets", "ways_per_set", "policy"):
            q[key] = undetermined(h.set_evidence)
    q["miss_penalty_cycles"] = quantity(
        round(h.penalty_cycles, 1),
        unit="cycles",
        confidence=0.8,
        method=METHOD_SHIFT + ": median rise of the addresses that rose",
        evidence=h.penalty_evidence,
    )
    return q


def _window_doc(data: pd.DataFrame, reach: Reach | None) -> dict[str, Any]:
    if reach is None or reach.page_bytes is None:
        why = "no reach stage" if reach is None else reach.page_evidence
        return {
            "page_table_window_bytes": undetermined(why),
            "window_switch_penalty_cycles": undetermined(why),
        }
    win = fit_window(data[data["stage"] == "window"], sigma=reach.sigma)
    if win.window_bytes is None:
        return {
            "page_table_window_bytes": undetermined(win.evidence),
            "window_switch_penalty_cycles": undetermined(win.evidence),
        }
    method = (
        "cold walk over fresh pages: a recurring higher level marks page-table window "
        "switches (TPDS Sec. 5.2(1), pattern P6)"
    )
    return {
        "page_table_window_bytes": quantity(
            win.window_bytes,
            unit="bytes",
            confidence=win.confidence,
            method=method,
            evidence=win.evidence,
        ),
        "window_switch_penalty_cycles": quantity(
            round(win.switch_penalty_cycles, 1),
            unit="cycles",
            confidence=win.confidence,
            method=method,
            evidence=win.evidence,
        ),
    }


def _unit_not_window(
    window_doc: dict[str, Any], data: pd.DataFrame, levels: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The window reading, undetermined where its spacing is the unit of a TLB level larger
    than the cold walk's stride: a walk over fresh pages enters a new unit of that level every
    unit and misses it there (an L2 TLB whose entries coalesce pages), a recurring level the
    same as a window switch would give; the two cannot be told apart."""
    window = (window_doc.get("page_table_window_bytes") or {}).get("value")
    walk = data.loc[data["stage"] == "window", "stride_bytes"]
    if window is None or walk.empty:
        return window_doc
    stride = int(walk.iloc[0])
    for name, level in levels.items():
        unit = (level.get("page_bytes") or {}).get("value")
        if unit is not None and int(unit) == int(window) and int(unit) > stride:
            penalty = window_doc["window_switch_penalty_cycles"]["value"]
            why = (
                f"the cold walk's level every {int(window)} bytes (+{penalty:g} cycles) is the "
                f"{name}'s miss on entering each of its {int(unit)}-byte units (the walk steps "
                f"{stride} bytes), which a page-table window of that size would also give: not "
                "told apart"
            )
            return {key: undetermined(why) for key in window_doc}
    return window_doc


def _onset_rows(h: tlb_shift.HiddenLevel | None) -> list[dict[str, Any]]:
    if h is None:
        return []
    return [
        {
            "stride_bytes": o.stride_bytes,
            "fit_elements": o.fit_elements,
            "first_elements": o.first_elements,
            "risen_addresses": len(o.shifted_bytes),
            "common_addresses": o.common,
            "rise_cycles": round(o.penalty_cycles, 1),
            "spacing_bytes": o.spacing_bytes,
        }
        for o in h.onsets
    ]


def _reach_rows(reach: Reach | None) -> list[dict[str, Any]]:
    if reach is None:
        return []
    return [
        {
            "stride_bytes": r.stride_bytes,
            "fit_bytes": r.fit_bytes,
            "first_miss_elements": r.first_miss_elements,
            "miss_spacing_bytes": r.spacing_bytes,
        }
        for r in reach.strides
    ]
