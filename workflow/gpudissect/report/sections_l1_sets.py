"""Report section of the l1_sets family: ways, sets, index masks and policy of the L1 from
eviction sets, and the capacity per stride predicted beside the measured one. Numbers come from
the result document."""

from __future__ import annotations

from typing import Any


def _cell(q: dict[str, Any] | None) -> str:
    if not q:
        return "—"
    if q.get("value") is None:
        return "undetermined" + (f" ({q['undetermined']})" if q.get("undetermined") else "")
    return f"{q['value']} ({q.get('confidence', 0):.2f})"


def l1_sets_section(doc: dict[str, Any], figures: list[str]) -> list[str]:
    lines = [
        "### L1 eviction sets and index function (Vila et al. S&P 2019; Maurice et al. RAID 2015)",
        "",
    ]
    l1 = (doc.get("elements") or {}).get("l1d") or {}
    index = doc.get("index_function") or {}
    masks = index.get("masks") if isinstance(index.get("masks"), dict) else None
    lines += [
        "| quantity | value (confidence) |",
        "| --- | --- |",
        f"| ways (minimal eviction set) | {_cell(l1.get('ways_per_set'))} |",
        f"| sets (2^rank of the index map) | {_cell(l1.get('sets'))} |",
        f"| set-index bits | {_cell(l1.get('set_index_bits'))} |",
        f"| index masks (up to relabelling) | {_cell(masks) if masks else _cell(index)} |",
        f"| replacement policy | {_cell(l1.get('policy'))} |",
        "",
    ]
    for name in ("ways_per_set", "sets", "policy"):
        q = l1.get(name) or {}
        if q.get("evidence"):
            lines.append(f"- {name}: {q['evidence']}")
    if index.get("evidence"):
        lines.append(f"- index function: {index['evidence']}")
    v = doc.get("stride_validation") or {}
    rows = v.get("strides") or []
    if rows:
        agree = v.get("agree") or {}
        lines += [
            "",
            f"Capacity of a cyclic walk per stride, predicted beside measured: {_cell(agree)}; "
            + (agree.get("evidence") or agree.get("undetermined") or ""),
            "",
            "| stride (lines) | measured (lines) | predicted (lines) | limited by | agree |",
            "| --- | --- | --- | --- | --- |",
        ]
        for r in rows:
            top = "≥ " if r["measured_lines"] >= r["top_lines"] else ""
            pred = "—" if r["predicted_lines"] is None else r["predicted_lines"]
            ok = "—" if r["agree"] is None else ("yes" if r["agree"] else "**no**")
            limit = {"set": "a set", "data": "the data array"}.get(r.get("limited_by"), "—")
            lines.append(
                f"| {r['stride_lines']} | {top}{r['measured_lines']} | {pred} | {limit} | {ok} |"
            )
    return lines + [""]
