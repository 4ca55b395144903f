"""Report section of the constant_sets family: sets, ways, free ways per set and index of the
constant L1 from cyclic walks over constant memory, the capacity per stride predicted beside the
measured one. Numbers come from the result document."""

from __future__ import annotations

from typing import Any

from .sections_l1_sets import _cell


def constant_sets_section(doc: dict[str, Any], figures: list[str]) -> list[str]:
    lines = ["### Constant L1 sets and ways (cyclic walks over constant memory)", ""]
    c = (doc.get("elements") or {}).get("constant_l1") or {}
    lines += [
        "| quantity | value (confidence) |",
        "| --- | --- |",
        f"| sets | {_cell(c.get('sets'))} |",
        f"| ways | {_cell(c.get('ways_per_set'))} |",
        f"| lines held by the kernel (sets x ways - free) | {_cell(c.get('reserved_lines'))} |",
        f"| sets x ways x line (bytes) | {_cell(c.get('capacity_bytes'))} |",
        f"| set-index bits | {_cell(c.get('set_index_bits'))} |",
        f"| index | {_cell(c.get('index_kind'))} |",
        "",
    ]
    q = c.get("sets") or {}
    if q.get("evidence"):
        lines.append(f"- evidence: {q['evidence']}")
    rows = doc.get("strides") or []
    if rows:
        lines += [
            "",
            "| stride (lines) | measured (lines) | predicted (lines) | agree |",
            "| --- | --- | --- | --- |",
        ]
        for r in rows:
            top = "≥ " if r["measured_lines"] >= r["top_lines"] else ""
            pred = "—" if r["predicted_lines"] is None else r["predicted_lines"]
            ok = "—" if r["agree"] is None else ("yes" if r["agree"] else "**no**")
            lines.append(f"| {r['stride_lines']} | {top}{r['measured_lines']} | {pred} | {ok} |")
    return lines + [""]
