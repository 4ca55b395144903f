"""Measured against published: look a quantity up in a result document and in the papers'
values (config/papers/*.yaml), format both, and say whether they agree, differ (by how much) or
cannot be compared (and why). Paper values are only ever the comparison column."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from gpudissect import yamlio

from .sections import PAPERS

# How close a measured value must be to the paper's to agree: structure (sizes, lines, sets,
# entries, banks) exactly, timings within this fraction of the paper's value (the papers read
# latencies off plots and report clocks with their own timing overhead).
TIMING_TOLERANCE = 0.10


@dataclass(frozen=True)
class Quantity:
    """A measured quantity: the value (None when undetermined), its unit, confidence and the
    reason it is undetermined."""

    value: Any
    unit: str = ""
    confidence: float | None = None
    reason: str = ""
    not_applicable: bool = False  # the device lacks it: the data decided, nothing to measure

    @property
    def state(self) -> str:
        """The report's one vocabulary: measured / undetermined / not applicable."""
        if self.value is not None:
            return "measured"
        return "not applicable" if self.not_applicable else "undetermined"


@dataclass(frozen=True)
class Verdict:
    status: str  # "agrees", "differs", "undetermined", "not applicable", "not measured",
    # "no paper value"
    text: str  # the difference, or why it cannot be compared


def lookup(doc: dict[str, Any] | None, path: str) -> Quantity | None:
    """The quantity at a dotted `path` of a document (`elements.l1d.size_bytes`): a result-contract
    object or a plain number. None when the document or the path is absent."""
    node: Any = doc
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    if isinstance(node, dict):
        if "value" not in node:
            return None
        lacks = node["value"] is None and "not_applicable" in node
        return Quantity(
            node["value"],
            node.get("unit", ""),
            node.get("confidence"),
            (node["not_applicable"] if lacks else node.get("undetermined", ""))
            if node["value"] is None
            else "",
            not_applicable=lacks,
        )
    return Quantity(node)


@cache
def _paper_file(name: str) -> dict[str, Any]:
    path = Path(PAPERS) / f"{name}.yaml"
    return (yamlio.safe_load(path.read_text()) or {}) if path.is_file() else {}


def _entry(node: Any) -> tuple[Any, str] | None:
    if isinstance(node, dict) and "value" in node:
        return node["value"], node.get("cite", "")
    return None


def paper_value(doc: dict[str, Any], source: str) -> tuple[Any, str] | None:
    """A paper value and its citation for the GPU of a document. `source` is
    `<file>:<dotted key>`; files keyed by GPU name (`gpus:`) match the device's reported name,
    files keyed by twin (`devices:` or profile-named `gpus:`) match its profile name."""
    file, key = source.split(":")
    data = _paper_file(file)
    info = doc.get("device_info") or {}
    for top in ("gpus", "devices"):
        for name in (info.get("name"), info.get("profile")):
            node: Any = (data.get(top) or {}).get(name)
            for part in key.split("."):
                node = node.get(part) if isinstance(node, dict) else None
            if node is None:
                continue
            if (hit := _entry(node)) is not None:
                return hit
            # a bare number beside a `cite:` map (tpds_banks_throughput.yaml)
            parent: Any = (data.get(top) or {}).get(name)
            for part in key.split(".")[:-1]:
                parent = parent.get(part)
            cite = (parent.get("cite") or {}).get(key.split(".")[-1], "") if parent else ""
            return node, cite
    return None


def fmt(value: Any, unit: str = "") -> str:
    """A value for a table: bytes as KiB/MiB with the byte count where it is not round,
    numbers with at most two decimals, lists joined."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        if len(value) > 6 and len(set(value)) == 1:
            return f"{len(value)} x {fmt(value[0])}"
        return ", ".join(fmt(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if unit == "bytes" and isinstance(value, int):
        for size, name in ((2**20, "MiB"), (2**10, "KiB")):
            if value >= size:
                text = f"{value / size:.2f}".rstrip("0").rstrip(".")
                exact = float(text) * size == value  # else the byte count says what it is
                return f"{text} {name}" if exact else f"{text} {name} ({value} B)"
        return f"{value} B"
    if isinstance(value, float):
        text = f"{value:.2f}"
    else:
        text = str(value)
    return f"{text} {unit}".strip() if unit in ("cycles", "GB/s", "GiB/s", "%") else text


def confidence(c: float | None) -> str:
    """Confidence is printed one way everywhere: two decimals."""
    return "—" if c is None else f"{c:.2f}"


def verdict(measured: Quantity | None, paper: tuple[Any, str] | None, *, timing: bool) -> Verdict:
    if paper is None or paper[0] is None:
        return Verdict("no paper value", "")
    if measured is None:
        return Verdict("not measured", "not in this run")
    if measured.not_applicable:
        return Verdict("not applicable", measured.reason)
    if measured.value is None:
        return Verdict("undetermined", measured.reason or "no reason recorded")
    m, p = measured.value, paper[0]
    if isinstance(p, bool):  # the papers' "LRU: yes/no" against a measured policy
        m = m == "lru"
    if isinstance(p, str) and p == "not bit-defined":
        return (
            Verdict("agrees", "")
            if m is None or m == p
            else Verdict("differs", f"measured bits {fmt(m)}")
        )
    numeric = isinstance(m, int | float) and isinstance(p, int | float) and not isinstance(p, bool)
    if not numeric:
        return Verdict("agrees", "") if m == p else Verdict("differs", f"{fmt(m)} vs {fmt(p)}")
    diff = m - p
    shown = f"{diff:+.2f}".removesuffix(".00")
    if shown in ("+0", "-0"):  # equal at the precision printed
        return Verdict("agrees", "")
    rel = f" ({100 * diff / p:+.1f} %)" if p and abs(diff / p) >= 0.001 else ""
    if timing and p and abs(diff) <= TIMING_TOLERANCE * abs(p):
        return Verdict("agrees", shown + rel)
    return Verdict("differs", shown + rel)


def difference(
    a: float | None, b: float | None, *, noise: float, can_be_negative: bool = False
) -> tuple[float | None, str]:
    """`a - b` as a finding, or None with the reason: a difference within the noise of its two
    inputs (`noise`: their spreads added) or negative where the quantity cannot be negative is
    not a measurement of anything."""
    if a is None or b is None:
        return None, "an input is undetermined"
    diff = a - b
    if abs(diff) <= noise:
        return None, f"the difference {diff:+.2f} is within the noise of its inputs ({noise:.2f})"
    if diff < 0 and not can_be_negative:
        return None, f"the difference {diff:+.2f} is negative where it cannot be"
    return diff, ""
