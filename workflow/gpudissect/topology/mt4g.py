"""The topology document in the field names of MT4G's JSON output, where a field means the
same thing, so that users of that tool can compare the two directly.

What maps (MT4G's names read from the JSON files it writes, e.g. its H100 sample result):
`general` (name, vendor, computeCapability, clockRate), `compute` (multiProcessorCount,
maxThreadsPerMultiProcessor), and under `memory` the elements `l1`, `texture`, `readOnly`,
`constant.l1`, `constant.l1.5`, `l2`, `shared`, `main`, each with `size`, `lineSize`,
`fetchGranularity` (our `fetch_granularity_bytes`: the bytes one miss brings in; our
`sector_bytes` has no MT4G field), `latency` (`p50`: our latencies are medians), `missPenalty`,
`amountPerMultiprocessor`, `sharedWith`, for the L2 `segmentSize` (the near partition), and for
the L2 and `main` `readBandwidth` / `writeBandwidth` (GiB/s, the `bandwidth` experiment's).
A measured quantity keeps its confidence and method. Everything else - quantities MT4G has no
field for, latencies that are not medians, undetermined quantities with their reasons - is kept
under `gpudissect`, in this project's names, so nothing of the document is lost.
"""

from __future__ import annotations

from typing import Any

ELEMENTS = {
    "l1d": ("l1",),
    "texture": ("texture",),
    "readonly": ("readOnly",),
    "constant_l1": ("constant", "l1"),
    "constant_l15": ("constant", "l1.5"),
    "l2": ("l2",),
    "shared": ("shared",),
    "dram": ("main",),
}
SHARED_WITH_NAMES = {
    "l1d": "L1",
    "texture": "Texture",
    "readonly": "Read Only",
    "constant_l1": "Constant L1",
    "constant_l15": "Constant L1.5",
    "l2": "L2",
}
_SIZED = {
    "size_bytes": "size",
    "line_bytes": "lineSize",
    "fetch_granularity_bytes": "fetchGranularity",
}
# MT4G's L2 and main-memory bandwidths are GiB/s (its H100 sample: memory.l2.readBandwidth)
_BANDWIDTH = {"read_bandwidth_gibps": "readBandwidth", "write_bandwidth_gibps": "writeBandwidth"}


def _sized(entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "confidence": entry.get("confidence"),
        "method": entry.get("method"),
        "size": entry["value"],
        "unit": "bytes",
    }


def _median(entry: dict[str, Any]) -> bool:
    return "median" in (entry.get("method") or "").lower()


def _field(element: str, quantity: str, entry: dict[str, Any]) -> tuple[str, Any] | None:
    """(MT4G field, value) for one determined quantity, or None where MT4G has no such field."""
    if quantity == "size_bytes" and element == "shared":
        return "sharedMemPerMultiProcessor", {"unit": "bytes", "value": entry["value"]}
    if quantity in _SIZED and not (element == "dram" and quantity == "size_bytes"):
        return _SIZED[quantity], _sized(entry)
    if quantity == "near_size_bytes" and element == "l2":
        return "segmentSize", _sized(entry)
    if quantity == "size_bytes" and element == "dram":
        return "totalGlobalMem", {"unit": "bytes", "value": entry["value"]}
    if quantity == "hit_latency_cycles" and _median(entry):
        return "latency", {
            "confidence": entry.get("confidence"),
            "method": entry.get("method"),
            "p50": entry["value"],
            "unit": "cycles",
        }
    if quantity in _BANDWIDTH and element in ("l2", "dram"):
        return _BANDWIDTH[quantity], {
            "confidence": entry.get("confidence"),
            "method": entry.get("method"),
            "unit": "GiB/s",
            "value": entry["value"],
        }
    if quantity == "miss_penalty_cycles":
        return "missPenalty", {"unit": "cycles", "value": entry["value"]}
    if quantity == "instances_per_sm":
        return "amountPerMultiprocessor", entry["value"]
    if quantity == "shared_with":
        return "sharedWith", [SHARED_WITH_NAMES.get(e, e) for e in entry["value"]]
    return None


def _slot(memory: dict[str, Any], element: str) -> dict[str, Any]:
    node = memory
    for part in ELEMENTS[element]:
        node = node.setdefault(part, {})
    return node


def to_mt4g(topology: dict[str, Any]) -> dict[str, Any]:
    facts = topology.get("driver") or {}
    memory: dict[str, Any] = {}
    unmapped: dict[str, dict[str, Any]] = {}
    undetermined: dict[str, dict[str, str]] = {}
    for element, quantities in topology["elements"].items():
        for quantity, entry in quantities.items():
            if entry.get("value") is None:
                undetermined.setdefault(element, {})[quantity] = entry.get("undetermined", "")
                continue
            field = _field(element, quantity, entry) if element in ELEMENTS else None
            if field is None:
                unmapped.setdefault(element, {})[quantity] = entry
                continue
            _slot(memory, element)[field[0]] = field[1]
    # the DRAM latency is the L2's miss latency (an access that misses the L2 reads DRAM)
    l2_miss = topology["elements"].get("l2", {}).get("miss_latency_cycles", {})
    if l2_miss.get("value") is not None and _median(l2_miss):
        _slot(memory, "dram")["latency"] = {
            "confidence": l2_miss.get("confidence"),
            "method": l2_miss.get("method"),
            "p50": l2_miss["value"],
            "unit": "cycles",
        }
    _driver_fields(memory, facts)
    out: dict[str, Any] = {"general": _general(topology, facts)}
    compute = {
        name: facts[key]
        for name, key in (
            ("multiProcessorCount", "sm_count"),
            ("maxThreadsPerMultiProcessor", "max_threads_per_sm"),
        )
        if key in facts
    }
    if compute:
        out["compute"] = compute
    out["memory"] = memory
    out["gpudissect"] = {
        "device": topology["device"],
        "backend": topology.get("backend"),
        "quantities_without_mt4g_field": unmapped,
        "undetermined": undetermined,
        "sources": topology.get("sources", []),
    }
    return out


def _general(topology: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    general: dict[str, Any] = {
        "name": topology.get("gpu") or topology["device"],
        "vendor": "NVIDIA",
    }
    cc = facts.get("compute_capability")
    if cc:
        major, _, minor = str(cc).partition(".")
        general["computeCapability"] = {"major": int(major), "minor": int(minor or 0)}
    if "sm_clock_khz" in facts:
        general["clockRate"] = {"unit": "kHz", "value": facts["sm_clock_khz"]}
    return general


def _driver_fields(memory: dict[str, Any], facts: dict[str, Any]) -> None:
    main = {
        "memoryBusWidth": ("memory_bus_width_bits", "bit"),
        "memoryClockRate": ("memory_clock_khz", "kHz"),
    }
    for field, (key, unit) in main.items():
        if key in facts:
            _slot(memory, "dram")[field] = {"unit": unit, "value": facts[key]}
    if "total_constant_memory_bytes" in facts:
        memory.setdefault("constant", {})["totalConstMem"] = {
            "unit": "bytes",
            "value": facts["total_constant_memory_bytes"],
        }
