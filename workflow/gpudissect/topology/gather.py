"""Readings: every inferred quantity of one analysis document, with where it came from.

An analysis document (DESIGN.md result contract) holds its quantities under
`elements.<element>.<quantity>`; a few hold more readings elsewhere: `l1_size` one series per
carveout and shared buffer (`series[i].<element>.<quantity>`), `tlbs` the page-table window
(`page_table.<quantity>`, read as the element `page_table`). Each reading keeps the JSON pointer
of its object, so every value of the topology document can be traced back to its analysis.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NO_CARVEOUT = -1  # a backend with no L1/shared carveout (the simulator) records -1
# the elements carved out of the unified L1/shared array: their values depend on the carveout
L1_FAMILY = frozenset({"l1d", "texture", "readonly"})


@dataclass(frozen=True)
class Reading:
    element: str
    quantity: str
    entry: dict[str, Any]  # the quantity object, as the analysis wrote it
    experiment: str
    analysis: str  # the analysis document's path
    pointer: str  # JSON pointer of `entry` inside that document
    carveout_pct: int | None = None
    series: bool = False  # one point of a per-carveout series, not the experiment's reading
    shared_buffer_bytes: int | None = None

    @property
    def determined(self) -> bool:
        return self.entry.get("value") is not None

    @property
    def value(self) -> Any:
        return self.entry.get("value")


def is_quantity(obj: Any) -> bool:
    """A result-contract quantity: a value with a method, or undetermined with a reason."""
    return isinstance(obj, dict) and "value" in obj and ("method" in obj or "undetermined" in obj)


def _carveout(raw: Any) -> int | None:
    if isinstance(raw, list):
        raw = raw[0] if len(set(raw)) == 1 else None
    if raw is None or int(raw) == NO_CARVEOUT:
        return None
    return int(raw)


def load_document(path: str | Path) -> dict[str, Any]:
    with open(path) as f:
        return json.load(f)


def _quantities(
    block: dict[str, Any], pointer: str, **fields: Any
) -> list[tuple[str, dict[str, Any], str, dict[str, Any]]]:
    """(name, entry, pointer, fields) of every quantity in one element's block."""
    return [
        (name, entry, f"{pointer}/{name}", fields)
        for name, entry in block.items()
        if is_quantity(entry)
    ]


def readings(doc: dict[str, Any], path: str) -> list[Reading]:
    """Every quantity of one analysis document."""
    experiment = doc["analysis"]
    doc_carveout = _carveout(doc.get("carveout_pct"))
    found: list[tuple[str, str, dict[str, Any], str, dict[str, Any]]] = []
    doc_buffer = doc.get("shared_buffer_bytes")
    doc_buffer = doc_buffer if isinstance(doc_buffer, int) else None
    for element, quantities in (doc.get("elements") or {}).items():
        carveout = _carveout(quantities.get("carveout_pct", doc_carveout))
        l1 = element in L1_FAMILY
        fields = {"carveout_pct": carveout if l1 else None}
        if l1 and doc_buffer is not None:  # the shared buffer its kernel kept beside the L1
            fields["shared_buffer_bytes"] = doc_buffer
        for q in _quantities(quantities, f"/elements/{element}", **fields):
            found.append((element, *q))
    for q in _quantities(doc.get("page_table") or {}, "/page_table"):
        found.append(("page_table", *q))
    for i, point in enumerate(doc.get("series") or []):
        if not isinstance(point, dict) or "carveout_pct" not in point:
            continue
        fields = {
            "carveout_pct": _carveout(point["carveout_pct"]),
            "series": True,
            "shared_buffer_bytes": point.get("shared_buffer_bytes"),
        }
        for element, quantities in point.items():
            if isinstance(quantities, dict):
                for q in _quantities(quantities, f"/series/{i}/{element}", **fields):
                    found.append((element, *q))
    return [
        Reading(element, name, entry, experiment, path, pointer, **fields)
        for element, name, entry, pointer, fields in found
    ]


def resolve_pointer(doc: dict[str, Any], pointer: str) -> Any:
    """The object at a JSON pointer (RFC 6901, the subset this package writes)."""
    obj: Any = doc
    for part in pointer.lstrip("/").split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        obj = obj[int(part)] if isinstance(obj, list) else obj[part]
    return obj
