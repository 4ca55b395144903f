"""A topology document read for a twin: its determined values, and the citation of each
(`measured: ...` with the analysis document and pointer, `driver: ...`), and the record of what
was assumed instead."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class TopologyReader:
    """The values of one topology document and the assumptions made beside them.

    `base` is the folder the document's analysis paths are read from where they do not resolve
    as given (the repository root they were written relative to, or a folder above the
    document): the structure an analysis found beside a quantity (an L1's XOR index masks, the
    SMs of each L2 partition) lives in its analysis document, not in the topology."""

    def __init__(self, topology: dict[str, Any], *, base: str | Path | None = None) -> None:
        self.topo = topology
        self.elements = topology.get("elements") or {}
        self.driver = topology.get("driver") or {}
        self.assumed: list[tuple[str, str]] = []
        self.base = Path(base) if base is not None else None
        self._docs: dict[str, dict[str, Any] | None] = {}

    def analysis(self, element: str, quantity: str) -> dict[str, Any] | None:
        """The analysis document an entry (determined or not) cites, or None where it cannot
        be read."""
        e = (self.elements.get(element) or {}).get(quantity) or {}
        return self.read_analysis(e.get("analysis"))

    def read_analysis(self, path: str | None) -> dict[str, Any] | None:
        """An analysis document named by a topology entry, or None where it cannot be read."""
        if not path:
            return None
        if path not in self._docs:
            candidates = [Path(path)]
            if self.base is not None:
                candidates += [d / path for d in (self.base, *self.base.parents)]
                candidates.append(self.base / Path(path).name)
            doc = None
            for candidate in candidates:
                if candidate.is_file():
                    try:
                        doc = json.loads(candidate.read_text())
                    except (OSError, json.JSONDecodeError):
                        continue
                    break
            self._docs[path] = doc
        return self._docs[path]

    def entry(self, element: str, quantity: str) -> dict[str, Any] | None:
        e = (self.elements.get(element) or {}).get(quantity)
        return e if e and e.get("value") is not None else None

    def value(self, element: str, quantity: str) -> Any:
        e = self.entry(element, quantity)
        return None if e is None else e["value"]

    def cite(self, element: str, quantity: str) -> str:
        e = self.entry(element, quantity)
        if e.get("experiment") == "driver":
            return f"driver: {e.get('evidence')} ({e.get('source')})"
        where = f"{e.get('analysis')}#{e.get('source') or e.get('derived_from')}"
        return (
            f"measured: {element}.{quantity} = {e['value']} ({e.get('experiment')}, {where}, "
            f"confidence {e.get('confidence')})"
        )

    def assume(self, key: str, reason: str) -> str:
        self.assumed.append((key, reason))
        return f"assumed: {reason}"

    def fact(self, names: tuple[tuple[str, float], ...]) -> tuple[float, str] | None:
        for name, scale in names:
            if self.driver.get(name) is not None:
                return float(self.driver[name]) * scale, f"driver: {name} = {self.driver[name]}"
        return None


def round_int(v: Any) -> int:
    return int(round(float(v)))
