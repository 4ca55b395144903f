"""Whole runs compared (`gpudissect runs`): the topology documents of several runs on one GPU
model (fresh machines, other units, other days) -> one topology document.

The repeats of one run (config key `repeats`, `repeats.py`) share a machine and a process
history; runs on fresh machines are the harder test. Every quantity of every element is matched
across the runs by element and name. A **structural** value (a size, line, set, way, count,
kind, policy: anything that is not a measured time or rate) that is not the same in every run,
or is determined in some runs and not in others, is reported undetermined with every run's
reading, never averaged; so is each point of a structural value measured per carveout
(`by_carveout`: the L1 size at each carveout and shared buffer) whose readings do not lie within
one sweep step of each other. A **measured** value keeps the first run's reading and gains its
spread over the runs that determined it (min, median, max). A quantity undetermined in every run
stays as the first run has it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from ..exceptions import GpuDissectError
from .repeats import is_measured, spread

NOT_REPEATING_RUNS = "does not repeat"
RULE = (
    "structural values must be equal in every run, else they are reported undetermined with "
    "each run's reading; measured values keep the first run's reading and gain their spread "
    "(min, median, max over the runs that determined them)"
)


def _uuid(doc: dict[str, Any]) -> str | None:
    return (doc.get("driver") or {}).get("uuid")


def _reading(name: str, entry: dict[str, Any] | None) -> dict[str, Any]:
    if entry is None:
        return {"run": name, "value": None, "undetermined": "not in this run's topology"}
    out: dict[str, Any] = {"run": name, "value": entry.get("value")}
    if entry.get("value") is None:
        out["undetermined"] = entry.get("undetermined", "")
    if entry.get("analysis") is not None:
        out["analysis"] = entry["analysis"]
    return out


def _text(reading: dict[str, Any]) -> str:
    v = reading["value"]
    return f"{reading['run']}: " + ("undetermined" if v is None else json.dumps(v))


_POINT_KEYS = ("carveout_pct", "shared_buffer_bytes")  # what names a per-carveout point


def _point_key(point: dict[str, Any]) -> tuple:
    return tuple(point.get(k) for k in _POINT_KEYS)


def _by_carveout(
    entry: dict[str, Any], entries: list[dict | None], names: list[str], label: str
) -> list[str]:
    """The per-carveout points of a structural quantity (`by_carveout`: one L1 size per carveout
    and shared buffer) compared like the quantity itself: a point whose value is not the same in
    every run is undetermined with each run's reading, unless the readings lie within one sweep
    step of each other (`resolution_bytes`: a cache that starts missing on a few accesses in a
    thousand moves its first miss by a step from run to run), which the point's note then
    counts. Returns the labels of the points that do not repeat."""
    points = entry.get("by_carveout")
    if not points:
        return []
    flagged = []
    for i, point in enumerate(points):
        key = _point_key(point)
        found = [
            next((p for p in (e or {}).get("by_carveout", []) if _point_key(p) == key), None)
            for e in entries
        ]
        values = [None if p is None else p.get("value") for p in found]
        if None not in values and len({json.dumps(v, sort_keys=True) for v in values}) == 1:
            continue
        step = max((p.get("resolution_bytes") or 0 for p in found if p is not None), default=0)
        if None not in values and all(isinstance(v, int) for v in values):
            if max(values) - min(values) <= step:
                counts = ", ".join(f"{v} ({values.count(v)})" for v in sorted(set(values)))
                point["note"] = (
                    f"within one sweep step ({step} bytes) over {len(values)} runs: {counts}"
                )
                continue
        readings = [_reading(n, p) for n, p in zip(names, found, strict=True)]
        keep = {
            k: point[k] for k in ("experiment", "analysis", "source", *_POINT_KEYS) if k in point
        }
        points[i] = keep | {
            "value": None,
            "undetermined": f"{NOT_REPEATING_RUNS} over {len(entries)} runs ("
            + "; ".join(_text(r) for r in readings)
            + ")",
            "readings": readings,
        }
        carveout, buffer = key
        flagged.append(f"{label}[carveout {carveout}%, shared buffer {buffer} B]")
    return flagged


def compare_runs(docs: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    """The first run's topology document with every quantity marked by the rule above, and a
    `runs` section: the runs (name, GPU UUID, device), how many, and the values that do not
    repeat. Raises GpuDissectError for fewer than two runs, names that do not pair with them,
    or runs of different GPU models."""
    if len(docs) < 2:
        raise GpuDissectError(f"runs: {len(docs)} topology document(s); allowed: two or more")
    if len(names) != len(docs) or len(set(names)) != len(names):
        raise GpuDissectError(
            f"runs --names: {names}; allowed: one distinct name per topology ({len(docs)})"
        )
    models = {d.get("gpu") for d in docs}
    if len(models) > 1:
        raise GpuDissectError(
            f"runs: the topologies are of different GPUs {sorted(map(str, models))}; "
            "allowed: runs on one GPU model"
        )
    combined = copy.deepcopy(docs[0])
    combined.pop("repeats", None)
    elements: dict[str, dict[str, Any]] = combined["elements"]
    flagged: list[str] = []
    order = [e for d in docs for e in d.get("elements", {})]
    for element in dict.fromkeys(order):
        quantities = elements.setdefault(element, {})
        names_here = [q for d in docs for q in d.get("elements", {}).get(element, {})]
        for quantity in dict.fromkeys(names_here):
            entries = [d.get("elements", {}).get(element, {}).get(quantity) for d in docs]
            base = next(e for e in entries if e is not None)
            values = [None if e is None else e.get("value") for e in entries]
            unit = next((e.get("unit") for e in entries if e and e.get("unit")), None)
            floats = any(isinstance(v, float) and not float(v).is_integer() for v in values)
            if is_measured(quantity, unit) or floats:
                entry = quantities.setdefault(quantity, copy.deepcopy(base))
                over_runs = spread(values)
                if over_runs is not None:
                    entry["run_spread"] = {**over_runs, "runs": len(docs)}
                continue
            if all(v is None for v in values) or (
                None not in values
                and all(
                    json.dumps(v, sort_keys=True) == json.dumps(values[0], sort_keys=True)
                    for v in values
                )
            ):
                entry = quantities.setdefault(quantity, copy.deepcopy(base))
                flagged += _by_carveout(entry, entries, names, f"{element}.{quantity}")
                continue
            readings = [_reading(n, e) for n, e in zip(names, entries, strict=True)]
            quantities[quantity] = {
                "value": None,
                "undetermined": f"{NOT_REPEATING_RUNS} over {len(docs)} runs ("
                + "; ".join(_text(r) for r in readings)
                + ")",
                "readings": readings,
                **{k: base[k] for k in ("experiment", "analysis", "source") if k in base},
            }
            flagged.append(f"{element}.{quantity}")
    combined["runs"] = {
        "runs": len(docs),
        "compared": [
            {"run": n, "gpu_uuid": _uuid(d), "device": d.get("device")}
            for n, d in zip(names, docs, strict=True)
        ],
        "rule": RULE,
        "does_not_repeat": flagged,
    }
    return combined
