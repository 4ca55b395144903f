"""Report section of the `tlb_mappings` family: each TLB level's reach under a physically
contiguous and a scattered mapping, the coalescing factor read from them, its entries, and the
number of levels. Numbers come from the result document."""

from __future__ import annotations

from typing import Any

from .sections import conf as conf_text


def _show(q: dict[str, Any] | None, fmt) -> str:
    if not q:
        return "—"
    if q.get("value") is None:
        return "undetermined"
    return fmt(q["value"])


def _size(v: float) -> str:
    return f"{v / 2**30:g} GiB" if v >= 2**30 else f"{v / 2**20:g} MiB"


def _coalesced(v: int) -> str:
    return "not coalesced" if v == 1 else f"{v} pages"


ROWS = (
    ("reach_contiguous_bytes", "reach, contiguous mapping", _size),
    ("reach_scattered_bytes", "reach, scattered mapping", _size),
    ("coalesced_pages", "coalesced pages per entry", _coalesced),
    ("entries", "entries (units that fit, contiguous mapping)", str),
    ("miss_penalty_cycles", "miss penalty", lambda v: f"{v:g} cycles"),
)


def tlb_mappings_section(doc: dict[str, Any], figures: list[str]) -> list[str]:
    el = doc.get("elements") or {}
    lines = [
        f"### TLB reach under controlled mappings (`{doc.get('path', 'cg')}` path)",
        "",
        "The walked range is mapped by the experiment: one physical allocation mapped in order "
        "(contiguous), or one allocation per chunk mapped in a shuffled order (scattered). A "
        "TLB entry that coalesces physically contiguous pages covers fewer bytes under the "
        "scattered mapping; one that covers a virtual unit whatever lies behind it does not.",
        "",
        "| element | quantity | measured here | confidence |",
        "| --- | --- | --- | --- |",
    ]
    for element, quantities in el.items():
        for key, label, fmt in ROWS:
            q = quantities.get(key)
            if q is not None:
                lines.append(f"| {element} | {label} | {_show(q, fmt)} | {conf_text(q)} |")
    levels = (doc.get("page_table") or {}).get("tlb_levels")
    lines.append(f"| page table | TLB levels | {_show(levels, str)} | {conf_text(levels)} |")
    lines.append("")
    for element, quantities in el.items():
        q = quantities.get("coalesced_pages") or {}
        text = q.get("evidence") or q.get("undetermined")
        if text:
            lines.append(f"- {element} coalescing: {text}.")
        n = quantities.get("entries") or {}
        if n.get("value") is not None:
            lines.append(f"- {element} entries: {n.get('evidence')}.")
    if levels:
        lines.append(f"- TLB levels: {levels.get('evidence') or levels.get('undetermined')}.")
    lines.append("")
    return lines
