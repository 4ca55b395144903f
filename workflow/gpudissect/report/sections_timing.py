"""Report section of the timing-overhead family: the raw latency, the latencies per load
without the timed window, the overhead and its parts, per path. Numbers come from the result
document."""

from __future__ import annotations

from typing import Any

ROWS = (
    ("raw_latency_cycles", "raw latency (per-access timed window)"),
    ("index_chase_latency_cycles", "per load, 32-bit index chase timed as a whole"),
    ("load_to_use_latency_cycles", "per load, 64-bit pointer chase (load-to-use)"),
    ("window_overhead_cycles", "window overhead (raw - pointer chase)"),
    ("index_arithmetic_cycles", "index arithmetic (index - pointer chase)"),
    ("store_clock_cycles", "store and clock read (raw - index chase)"),
)


def _cell(q: dict[str, Any] | None) -> str:
    if not q:
        return "—"
    if q.get("value") is None:
        return "undetermined"
    return f"{q['value']:.2f} ({q.get('confidence', 0):.2f})"


def timing_overhead_section(doc: dict[str, Any], figures: list[str]) -> list[str]:
    lines = ["### Timing overhead of the timed window (TPDS Sec. 4.2, Thesis Sec. 4.4)", ""]
    paths = doc.get("paths") or {}
    timing = doc.get("timing") or {}
    if not paths:
        return lines + ["No load path was measured.", ""]
    lines += [
        "Cycles (confidence). Every latency elsewhere in this report is raw (read by the timed "
        "window) unless it says otherwise; the topology table gives it calibrated as well: raw "
        f"minus the window overhead measured on `{timing.get('calibration_path')}`.",
        "",
        "| quantity | " + " | ".join(f"`{p}`" for p in paths) + " |",
        "| --- |" + " --- |" * len(paths),
    ]
    for key, label in ROWS:
        lines.append(f"| {label} | " + " | ".join(_cell(paths[p].get(key)) for p in paths) + " |")
    lines += [
        "",
        f"- empty window (clock, store, clock): {_cell(timing.get('empty_window_cycles'))}",
        f"- two consecutive clock reads: {_cell(timing.get('clock_read_cycles'))}",
    ]
    for p, quantities in paths.items():
        for key, label in ROWS:
            q = quantities.get(key) or {}
            if q.get("value") is None and q.get("undetermined"):
                lines.append(f"- `{p}` {label}: undetermined, {q['undetermined']}")
    return lines + [""]
