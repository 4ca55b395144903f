"""The quantities a device's run read by more than one method, from the topology document's
reconciliation (`other_readings`): a reading that disagrees with the chosen value beyond what the
two sweeps resolve is flagged with both values; one that differs but lies within their
resolution, or is a reading of another quantity, is named with both values and why it is not a
disagreement. Equal readings and readings within the relative tolerance are left out."""

from __future__ import annotations

from typing import Any

from ..topology.reconcile import AGREE_REL
from .model import Block, Bullets, Paragraph
from .topology_table import _fmt, fmt_bytes

FLAG = "**disagree**"


def _interval(entry: dict[str, Any]) -> str:
    """The interval a size's resolution leaves, as text ("" when the reading records none)."""
    bracket = entry.get("bracket_bytes")
    if bracket:
        lo, hi = bracket
    elif entry.get("resolution_bytes") and entry.get("value") is not None:
        lo, hi = entry["value"], entry["value"] + entry["resolution_bytes"]
    else:
        return ""
    return f", in [{fmt_bytes(float(lo))}, {fmt_bytes(float(hi))})"


def _reading(quantity: str, entry: dict[str, Any]) -> str:
    return f"{_fmt(quantity, entry['value'])} ({entry.get('experiment')}{_interval(entry)})"


def reading_lines(topology: dict[str, Any]) -> list[str]:
    """One line per reading worth naming (module docstring), flagged ones first."""
    flagged, named = [], []
    for element, quantities in (topology.get("elements") or {}).items():
        for name, entry in (quantities or {}).items():
            if not isinstance(entry, dict) or entry.get("value") is None:
                continue
            for other in entry.get("other_readings") or []:
                if other.get("value") is None or other.get("agrees") is None:
                    continue
                if other["value"] == entry["value"]:
                    continue
                both = f"{_reading(name, entry)} and {_reading(name, other)}"
                head = f"`{element}.{name}`: {both}"
                if other.get("note"):
                    named.append(f"{head}: the second is {other['note']}")
                elif not other["agrees"]:
                    by = other.get("agrees_by") or f"beyond {AGREE_REL:.0%}"
                    flagged.append(f"{FLAG}: {head}: {by}")
                elif other.get("agrees_by") == "resolution":
                    named.append(f"{head}: agree within the resolution of both sweeps")
    return flagged + named


def readings_part(topology: dict[str, Any] | None) -> list[Block]:
    """The list under the topology table (nothing when no quantity was read twice)."""
    lines = reading_lines(topology or {})
    if not lines:
        return []
    flagged = sum(line.startswith(FLAG) for line in lines)
    return [
        Paragraph(
            f"Read by two methods ({len(lines)}, {flagged} of them {FLAG}; the topology "
            "document's `other_readings`): the first value is the one the table shows."
        ),
        Bullets(tuple(lines)),
    ]
