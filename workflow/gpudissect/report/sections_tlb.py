"""Report sections of the `tlbs` and `latency_patterns` families: TPDS Table V (TLB rows) and
TPDS Fig. 14 / NPC Table 3 beside the values measured on this device. Numbers come from the
result documents; paper values from config/papers (the comparison column only)."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from gpudissect import yamlio

from ..datafiles import PAPERS_DIR as PAPERS
from .compare import difference
from .sections import conf as conf_text
from .sections import unset

PATTERNS = ("P1", "P2", "P3", "P4", "P5", "P6")


@cache
def _paper(name: str) -> dict[str, Any]:
    path = PAPERS / f"{name}.yaml"
    return (yamlio.safe_load(path.read_text()) or {}) if path.is_file() else {}


def _gpu_key(doc: dict[str, Any]) -> str | None:
    """The paper GPU this document was measured on: a twin's profile name (None on a GPU)."""
    return (doc.get("device_info") or {}).get("profile")


def _show(q: dict[str, Any] | None, fmt=str) -> str:
    if not q:
        return "—"
    if q.get("value") is None:
        return unset(q, sep=" (", end=")")
    return fmt(q["value"])


def _mib(v: Any) -> str:
    return f"{v / 2**20:g} MiB" if v >= 2**20 else f"{v / 1024:g} KiB"


def _paper_cell(entry: dict[str, Any] | None, fmt=str) -> str:
    if not entry:
        return "—"
    v = entry.get("value")
    return ("none" if v is None else fmt(v)) + f" ({entry.get('cite', '')})"


def tlbs_section(doc: dict[str, Any], figures: list[str]) -> list[str]:
    paper = ((_paper("tpds_tlb").get("gpus") or {}).get(_gpu_key(doc))) or {}
    el = doc.get("elements", {})
    lines = [
        f"### TLBs (`{doc.get('path', 'cg')}` path), TPDS Sec. 4.4 / Table V / Fig. 10",
        "",
        "Paper values are those of the GPU this twin models (TPDS Table V, Fig. 10; NPC "
        "Table 4; penalties are differences of TPDS Fig. 14 / NPC Table 3 latencies); on a "
        "real GPU the paper column is empty.",
        "",
        "| element | quantity | paper | measured here | confidence |",
        "| --- | --- | --- | --- | --- |",
    ]
    rows = [
        ("l1_tlb", "page_bytes", _mib, "page_bytes"),
        ("l1_tlb", "entries", str, "entries"),
        ("l1_tlb", "sets", str, "sets"),
        ("l1_tlb", "ways_per_set", str, "ways_per_set"),
        ("l1_tlb", "policy", str, "policy"),
        ("l1_tlb", "miss_penalty_cycles", lambda v: f"{v:g} cycles", "l1_tlb_penalty"),
        ("l2_tlb", "page_bytes", _mib, "page_bytes"),
        ("l2_tlb", "entries", str, "entries"),
        ("l2_tlb", "sets", str, "sets"),
        ("l2_tlb", "ways_per_set", str, "ways_per_set"),
        ("l2_tlb", "policy", str, "policy"),
        ("l2_tlb", "miss_penalty_cycles", lambda v: f"{v:g} cycles", "l2_tlb_penalty"),
    ]
    for element, key, fmt, pkey in rows:
        q = el.get(element, {}).get(key)
        structural = key != "miss_penalty_cycles"
        p = (paper.get(element) or {}).get(pkey) if structural else paper.get(pkey)
        conf = conf_text(q)
        lines.append(f"| {element} | {key} | {_paper_cell(p, fmt)} | {_show(q, fmt)} | {conf} |")
    pt = doc.get("page_table", {})
    for key, fmt in (
        ("page_table_window_bytes", _mib),
        ("window_switch_penalty_cycles", lambda v: f"{v:g} cycles"),
    ):
        q = pt.get(key)
        lines.append(
            f"| page table | {key} | {_paper_cell(paper.get(key), fmt)} | {_show(q, fmt)} | "
            f"{conf_text(q)} |"
        )
    lines.append("")
    for element in ("l1_tlb", "l2_tlb"):
        ways = el.get(element, {}).get("ways_per_set") or {}
        if ways.get("evidence"):
            lines.append(f"- {element}: {ways['evidence']}.")
    pages = [(e, (el.get(e, {}).get("page_bytes") or {}).get("evidence")) for e in el]
    if len({text for _, text in pages}) == 1 and pages[0][1]:
        lines.append(f"- Page size: {pages[0][1]}.")
    else:
        lines += [f"- {e} page: {text}." for e, text in pages if text]
    for e in el:
        for key in ("entries", "miss_penalty_cycles"):
            q = el[e].get(key) or {}
            if "paired-address" in q.get("method", ""):
                lines.append(f"- {e} {key}: {q['evidence']}.")
    if doc.get("reach_paired"):
        lines.append(
            "- The L1 TLB's miss penalty lies inside the spread of data latencies, so it was "
            "read address by address: each address's median latency compared across reach "
            "walks of growing length (an address's own latency repeats to a cycle or two); "
            "the level the threshold reading finds further out is then the L2 TLB."
        )
    window = pt.get("page_table_window_bytes") or {}
    lines.append(f"- Page-table window: {window.get('evidence') or window.get('undetermined')}.")
    lines.append(
        "- TPDS counts 17 and 8 missed entries per set overflow (Fig. 10); a cyclic walk over "
        "an LRU set holding one page too many misses on all of them, ways + 1 (18 and 9 here); "
        "the analysis accepts either reading only where the ways add up to the entries."
    )
    lines.append("")
    return lines


def _comparison(gpu: str | None, path: str) -> tuple[dict[str, Any], str]:
    """(pattern -> comparison value, where it comes from) for one path of a paper GPU."""
    doc = _paper("tpds_latency_patterns")
    entry = ((doc.get("gpus") or {}).get(gpu) or {}).get(path) or {}
    if "npc" in entry:
        return {p: entry["npc"].get(p) for p in PATTERNS}, entry["npc"].get("cite", "NPC")
    if "tpds" in entry:
        arch = doc["gpus"][gpu]["architecture"]
        over = doc["overhead_cycles"][arch]
        values = {
            p: None if entry["tpds"].get(p) is None else entry["tpds"][p] + over for p in PATTERNS
        }
        return values, f"{entry['tpds'].get('cite', 'TPDS Fig. 14')} + {over} cycles overhead"
    return {}, ""


def _cap(caps: dict[str, Any], key: str, unit: str = "") -> str:
    """A capacity the classification used, or why there is none (never "None")."""
    value = caps.get(key)
    if value is None:
        return "not measured"
    return f"{value}{unit}"


def latency_patterns_section(doc: dict[str, Any], figures: list[str]) -> list[str]:
    caps = doc.get("capacities", {})
    lines = [
        "### Global-memory latency patterns P1-P6, TPDS Sec. 5.2 / Fig. 14, NPC Table 3",
        "",
        "Each access of a cold non-uniform-stride P-chase is classified from its address "
        "sequence (first touch of a page, page reuse distance against the measured L1/L2 TLB "
        f"entries {_cap(caps, 'l1_entries')}/{_cap(caps, 'l2_entries')}, 32-byte sector reuse, "
        f"page-table window {_cap(caps, 'window_bytes', ' bytes')}, page "
        f"{_cap(caps, 'page_bytes', ' bytes')}). Paper column: NPC Table 3 where it has the "
        "GPU, else TPDS Fig. 14 plus the timing overhead of TPDS Sec. 4.2 (20 cycles Fermi, "
        "32 Kepler, 16 Maxwell), since a P-chase reads latencies with that overhead.",
        "",
    ]
    gpu = _gpu_key(doc)
    for path, result in doc.get("paths", {}).items():
        paper, source = _comparison(gpu, path)
        lines += [
            f"`{path}` path" + (f" (paper: {source})" if source else "") + ":",
            "",
            "| pattern | paper (cycles) | measured median (cycles) | difference | accesses, IQR |",
            "| --- | --- | --- | --- | --- |",
        ]
        for p in PATTERNS:
            q = result.get(p) or {}
            v, pv = q.get("value"), paper.get(p)
            diff = "—" if v is None or not pv else f"{100 * (v - pv) / pv:+.1f}%"
            spread = q.get("evidence", "").split(" (p25")[0] if v is not None else ""
            paper_cell = "—" if not paper else ("none" if pv is None else f"{pv:g}")
            lines.append(
                f"| {p} | {paper_cell} | {_show(q, lambda x: f'{x:g}')} | {diff} | {spread} |"
            )
        lines.append("")
        lines += [f"- {f}." for f in pattern_differences(result, path)]
        lines.append("")
    return lines


# (later pattern, earlier pattern, what the difference costs); TPDS Sec. 5.2
_DIFFERENCES = (
    ("P2", "P1", "an L1-TLB miss on a data-cache hit"),
    ("P3", "P2", "an L2-TLB miss on top of it"),
    ("P5", "P4", "a cold page walk on a miss"),
    ("P6", "P5", "a page-table window switch"),
)


def _iqr(q: dict[str, Any]) -> float | None:
    m = re.search(r"IQR ([0-9.]+) cycles", q.get("evidence", ""))
    return float(m.group(1)) if m else None


def pattern_differences(result: dict[str, Any], path: str) -> list[str]:
    """Penalties as differences of pattern medians, each checked against the spread of its two
    inputs and its sign (a penalty cannot be negative) before it is called a cost."""
    out = []
    for later, earlier, what in _DIFFERENCES:
        a, b = result.get(later) or {}, result.get(earlier) or {}
        if a.get("value") is None or b.get("value") is None:
            continue
        ia, ib = _iqr(a), _iqr(b)
        label = f"{what} ({later} - {earlier})"
        if ia is None or ib is None:
            out.append(f"{label}: undetermined: the spread of the patterns is not recorded")
            continue
        diff, reason = difference(a["value"], b["value"], noise=ia + ib)
        if diff is None:
            out.append(f"{label}: undetermined: {reason} (the IQRs of the two patterns added)")
        elif later == "P2" and path != "cg":
            out.append(
                f"{label}: {diff:.0f} cycles between the patterns, not the TLB's penalty alone: "
                f"on the `{path}` path P1 hits the L1 data cache and P2 is served further out "
                "(NPC Sec. 4.2: 288 cycles with the data in L1, 27 with it in L2); the L1-TLB "
                "penalty is P2 - P1 on the `cg` path"
            )
        else:
            out.append(f"{label}: {diff:.0f} cycles")
    return out
