"""A topology document read for a twin: its determined values, and the citation of each
(`measured: ...` with the analysis document and pointer, `driver: ...`), and the record of what
was assumed instead."""

from __future__ import annotations

from typing import Any


class TopologyReader:
    """The values of one topology document and the assumptions made beside them."""

    def __init__(self, topology: dict[str, Any]) -> None:
        self.topo = topology
        self.elements = topology.get("elements") or {}
        self.driver = topology.get("driver") or {}
        self.assumed: list[tuple[str, str]] = []

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
