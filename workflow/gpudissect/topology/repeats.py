"""Repeats of a whole run compared (config key `repeats`): `results/analysis/<device>/repeats.json`.

Every quantity of every analysis document (`gather.readings`) is matched across the repeats by
its experiment and JSON pointer. A **structural** value (a size, line, set, way, count, kind,
policy: anything that is not a measured time or rate) either repeats exactly or is flagged
"does not repeat", with every repeat's reading; the topology document then reports it
undetermined with those readings, never an average. A **measured** value (a latency, a
penalty, a throughput) gets its spread over the repeats: min, median and max.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from ..repeat_paths import repeat_of
from .gather import Reading, load_document, readings
from .node import node_readings

MEASURED_SUFFIXES = ("_cycles", "_ns", "_ms", "_gbps", "_pct", "_fraction", "_freq")
MEASURED_UNITS = frozenset({"cycles", "ns", "ms", "GB/s", "gbps", "%"})
NOT_REPEATING = "does not repeat"


def is_measured(quantity: str, unit: Any) -> bool:
    """A measured time or rate (a spread is meaningful) rather than a structural value."""
    return quantity.endswith(MEASURED_SUFFIXES) or unit in MEASURED_UNITS


def _describe(r: Reading | None) -> Any:
    if r is None:
        return {"value": None, "undetermined": "not in this repeat's document"}
    if not r.determined:
        return {"value": None, "undetermined": r.entry.get("undetermined", "")}
    return {"value": r.value, "analysis": r.analysis}


def spread(values: list[Any]) -> dict[str, float] | None:
    """Min, median and max of the numbers among `values` (None: no number), and how many."""
    nums = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    if not nums:
        return None
    a = np.asarray(nums, dtype=float)
    return {
        "min": float(a.min()),
        "median": float(np.median(a)),
        "max": float(a.max()),
        "determined_in": len(nums),
    }


def compare_repeats(device: str, analyses: list[str]) -> dict[str, Any]:
    """The repeats document from the analysis documents of every repeat (`<experiment>.json`
    for repeat 1, `<experiment>.r<k>.json` for repeat k)."""
    by_key: dict[tuple[str, str], dict[int, Reading]] = defaultdict(dict)
    names: dict[tuple[str, str], tuple[str, str, Any]] = {}
    repeats = sorted({repeat_of(p) for p in analyses})
    for path in analyses:
        k = repeat_of(path)
        doc = load_document(path)
        for r in readings(doc, path) + node_readings(doc, path):
            key = (r.experiment, r.pointer)
            by_key[key][k] = r
            if key not in names or names[key][2] is None:
                names[key] = (r.element, r.quantity, r.entry.get("unit"))
    quantities = []
    for key in sorted(by_key):
        element, quantity, unit = names[key]
        rs = [by_key[key].get(k) for k in repeats]
        values = [None if r is None or not r.determined else r.value for r in rs]
        entry: dict[str, Any] = {
            "experiment": key[0],
            "source": key[1],
            "element": element,
            "quantity": quantity,
            "unit": unit,
            "readings": [{"repeat": k, **_describe(r)} for k, r in zip(repeats, rs, strict=True)],
        }
        floats = any(isinstance(v, float) and not float(v).is_integer() for v in values)
        if is_measured(quantity, unit) or floats:
            entry["kind"] = "measured"
            entry["spread"] = spread(values)
            entry["repeats"] = None not in values
        else:
            entry["kind"] = "structural"
            entry["repeats"] = all(v == values[0] for v in values)
        if not entry["repeats"]:
            entry["status"] = NOT_REPEATING if entry["kind"] == "structural" else "spread"
        quantities.append(entry)
    flagged = [q for q in quantities if q.get("status") == NOT_REPEATING]
    return {
        "device": device,
        "analysis": "repeats",
        "repeats": len(repeats),
        "rule": (
            "structural values must be equal in every repeat, else 'does not repeat' (the "
            "topology reports them undetermined with the readings); measured values get their "
            "spread (min, median, max over the repeats that determined them)"
        ),
        "does_not_repeat": [
            f"{q['element']}.{q['quantity']} ({q['experiment']} {q['source']})" for q in flagged
        ],
        "quantities": quantities,
    }


def _text(reading: dict[str, Any]) -> str:
    v = reading.get("value")
    return f"r{reading['repeat']}: " + ("undetermined" if v is None else str(v))


def apply_repeats(elements: dict[str, dict[str, Any]], doc: dict[str, Any]) -> None:
    """Mark the topology's `elements` in place: a chosen value whose reading does not repeat
    becomes undetermined with the readings; a measured value gains its spread."""
    by_source = {(q["experiment"], q["source"]): q for q in doc.get("quantities", [])}
    n = doc.get("repeats")
    for quantities in elements.values():
        for name, entry in list(quantities.items()):
            q = by_source.get((entry.get("experiment"), entry.get("source")))
            if q is None:
                continue
            if q.get("status") == NOT_REPEATING:
                readings_text = "; ".join(_text(r) for r in q["readings"])
                quantities[name] = {
                    "value": None,
                    "undetermined": f"{NOT_REPEATING} over {n} repeats ({readings_text})",
                    "readings": q["readings"],
                    **{k: entry[k] for k in ("experiment", "analysis", "source") if k in entry},
                }
            elif q["kind"] == "measured" and q.get("spread"):
                entry["repeat_spread"] = {**q["spread"], "repeats": n}
