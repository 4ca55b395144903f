"""The per-device topology table, in the form of Thesis Tables 5.4-5.9 (Größler: size, line,
latency, shared with, caches per SM for each memory element), from the topology document, with a
paper's values beside each measured one and the driver's values where the driver reports them.

The table is data (`TopologyTable`): the Markdown and LaTeX renderings format the same cells.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..topology.calibrate import AGREE_CYCLES, AGREE_FRACTION

ROWS = (
    ("l1d", "L1 data"),
    ("texture", "Texture"),
    ("readonly", "Read-only"),
    ("constant_l1", "Constant L1"),
    ("constant_l15", "Constant L1.5"),
    ("shared", "Shared memory"),
    ("l2", "L2"),
    ("dram", "Main memory"),
)
COLUMNS = (
    ("size_bytes", "Size"),
    ("line_bytes", "Line"),
    ("hit_latency_cycles", "Latency (cycles)"),
    ("miss_penalty_cycles", "Miss penalty (cycles)"),
    ("shared_with", "Shared with"),
    ("instances_per_sm", "# / SM"),
)
NAMES = dict(ROWS)
UNDETERMINED = "undetermined"


@dataclass(frozen=True)
class TopologyTable:
    device: str
    paper: str | None  # the comparison column's source, e.g. "Thesis Table 5.4"
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...]


def fmt_bytes(n: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            v = n / scale
            return f"{v:.0f} {unit}" if abs(v - round(v)) < 0.005 else f"{v:.2f} {unit}"
    return f"{n:.0f} B"


def _fmt(quantity: str, value: Any) -> str:
    if value is None:
        return UNDETERMINED
    if quantity == "shared_with":
        return ", ".join(NAMES.get(v, v) for v in value) if value else "none"
    if quantity.endswith("_bytes"):
        return fmt_bytes(float(value))
    if quantity.endswith("_cycles"):
        return f"{float(value):.0f}" if float(value) >= 100 else f"{float(value):.1f}"
    return str(value)


def _cell(element, quantity, entry, paper_values) -> str:
    measured = _fmt(quantity, entry.get("value")) if entry else "-"
    if entry and entry.get("value") is None and "not_applicable" in entry:
        measured = "not applicable"
    if entry and entry.get("value") is None and "lower_bound" in entry:
        measured = f"> {fmt_bytes(float(entry['lower_bound']))}"
    if entry and entry.get("carveout_pct") is not None and quantity == "size_bytes":
        measured += f" @{entry['carveout_pct']}%"
        buffer = entry.get("shared_buffer_bytes")
        if buffer is not None:  # the shared memory its kernel kept beside the L1
            measured += f" beside {fmt_bytes(float(buffer))} shared" if buffer else ", no shared"
    if entry and entry.get("timing") == "raw" and entry.get("value") is not None:
        calibrated = entry.get("calibrated_value")
        measured += " raw / " + (
            f"{_fmt(quantity, calibrated)} calibrated" if calibrated is not None else "uncalibrated"
        )
    elif entry and entry.get("timing") == "amortized" and entry.get("value") is not None:
        measured += " amortized"
    if entry and entry.get("experiment") == "driver":
        measured += " (driver)"
    if entry and "driver_value" in entry:
        measured += f" (driver {_fmt(quantity, entry['driver_value'])})"
    paper = (paper_values.get(element) or {}).get(quantity)
    if paper is not None:
        measured += f" [{_fmt(quantity, paper['value'])}]"
    return measured


def topology_table(
    topology: dict[str, Any], paper_values: dict[str, Any] | None = None, paper: str | None = None
) -> TopologyTable:
    """The table of one topology document; `paper_values` ({element: {quantity: {value,
    cite}}}) fill the bracketed comparison values."""
    paper_values = paper_values or {}
    elements = dict(topology.get("elements") or {})
    l2_miss = (elements.get("l2") or {}).get("miss_latency_cycles")
    if l2_miss:  # main memory: the latency of an access that misses the L2
        elements["dram"] = {**elements.get("dram", {}), "hit_latency_cycles": l2_miss}
    if "latency_cycles" in (paper_values.get("dram") or {}):
        paper_values = {
            **paper_values,
            "dram": {
                **paper_values["dram"],
                "hit_latency_cycles": paper_values["dram"]["latency_cycles"],
            },
        }
    rows = []
    for element, name in ROWS:
        quantities = elements.get(element)
        if not quantities and element not in paper_values:
            continue
        quantities = quantities or {}
        cells = [_cell(element, q, quantities.get(q), paper_values) for q, _ in COLUMNS]
        i = [q for q, _ in COLUMNS].index("hit_latency_cycles")
        cells[i] += _address_groups(quantities) + _chain(quantities)
        rows.append((name, *cells))
    notes = []
    if paper:
        notes.append(f"[bracketed]: {paper}.")
    notes.append(_legend(rows))
    notes.append(_timing_note(topology))
    if any("chain-timed" in c for row in rows for c in row):
        notes.append(
            "chain-timed: the latency per load of a chain timed as a whole on the element's own "
            "load path (timing_overhead, no per-access window), beside the calibrated value: "
            f"they agree within the larger of {AGREE_CYCLES:g} cycles and {AGREE_FRACTION:.0%}."
        )
    return TopologyTable(
        device=topology["device"],
        paper=paper,
        header=("Element",) + tuple(h for _, h in COLUMNS),
        rows=tuple(rows),
        notes=tuple(notes),
    )


GROUPS = ("near_hit_fast_latency_cycles", "near_hit_slow_latency_cycles")


def _address_groups(quantities: dict[str, Any]) -> str:
    """Where the L2's near hits fall into two address groups, each group's latency with its
    share (the headline latency is the median over both, so it moves with the shares)."""
    got = [quantities.get(k) or {} for k in GROUPS]
    if any(q.get("value") is None or q.get("share") is None for q in got):
        return ""
    calibrated = all(q.get("calibrated_value") is not None for q in got)
    key = "calibrated_value" if calibrated else "value"
    parts = " / ".join(f"{_fmt('_cycles', q[key])} ({q['share']:.0%})" for q in got)
    return f"; median of two address groups {parts}" + (" calibrated" if calibrated else " raw")


def _chain(quantities: dict[str, Any]) -> str:
    """The latency per load of a chain timed as a whole on the element's path, and whether it
    agrees with the P-chase's calibrated value."""
    q = quantities.get("hit_latency_chain_cycles") or {}
    if q.get("value") is None:
        return ""
    verdict = {True: "agrees", False: "differs"}.get(q.get("agrees"), "not compared")
    return f"; chain-timed {_fmt('_cycles', q['value'])} ({verdict})"


def _legend(rows: list[tuple[str, ...]]) -> str:
    """The marks this table uses, and only those."""
    cells = [c for row in rows for c in row[1:]]
    marks = []
    if any(re.search(r" @\d+%", c) for c in cells):
        marks.append("@N%: the L1/shared carveout the size was measured at")
    if any(" shared" in c and re.search(r" @\d+%", c) for c in cells):
        marks.append(
            "beside X shared / no shared: the shared memory the measuring kernel kept beside "
            "the L1 (the L1 size is the largest a kernel gets: the smallest partition measured)"
        )
    if any("(driver" in c for c in cells):
        marks.append("(driver ...): what the driver reports")
    if any(c == "-" or c.startswith("- ") for c in cells):
        marks.append("-: not measured on this device")
    if any(c.startswith("undetermined") for c in cells):
        marks.append("undetermined: measured, the data do not decide")
    if any(c.startswith("not applicable") for c in cells):
        marks.append("not applicable: the device lacks it")
    return "; ".join(marks) + "." if marks else ""


def _timing_note(topology: dict[str, Any]) -> str:
    """What raw, calibrated and amortized mean, with the overhead the calibration subtracts."""
    overhead = (topology.get("timing") or {}).get("window_overhead_cycles") or {}
    if overhead.get("value") is not None:
        how = (
            f"calibrated: raw minus the {overhead['value']:.1f}-cycle window overhead measured "
            f"on `{topology['timing'].get('calibration_path')}` by timing_overhead"
        )
    elif overhead:
        how = f"uncalibrated: the window overhead is undetermined ({overhead.get('undetermined')})"
    else:
        how = "uncalibrated: the run has no timing_overhead analysis"
    return (
        "raw: read by the per-access timed window (clock, load, store, clock), its overhead "
        f"included; {how}; amortized: a chain of loads timed as a whole; penalties are "
        "differences of raw latencies, in which the overhead cancels."
    )


def to_markdown(table: TopologyTable) -> list[str]:
    lines = [
        "| " + " | ".join(table.header) + " |",
        "|" + "---|" * len(table.header),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in table.rows]
    return lines + [""] + [f"_{n}_" for n in table.notes]
