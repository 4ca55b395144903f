"""The device facts a driver reports, read from the `device_info` every trace records.

A CUDA trace records the driver's attributes (`device_info.attributes`, the names of
`cuDeviceGetAttribute` in lower case); a simulated device records what its backend reports as
its driver would (`device_info.facts`, where the backend gives them). Only facts that are there
are returned: a missing one is absent, never guessed.
"""

from __future__ import annotations

from typing import Any

# topology name -> (attribute name in device_info.attributes, scale to the topology's unit)
_ATTRIBUTES = {
    "sm_count": ("multiprocessor_count", 1),
    "l2_cache_size_bytes": ("l2_cache_size", 1),
    "shared_memory_per_sm_bytes": ("max_shared_memory_per_multiprocessor", 1),
    "shared_memory_per_block_optin_bytes": ("max_shared_memory_per_block_optin", 1),
    "max_threads_per_sm": ("max_threads_per_multiprocessor", 1),
    "memory_bus_width_bits": ("global_memory_bus_width", 1),
    "sm_clock_khz": ("clock_rate", 1),
    "memory_clock_khz": ("memory_clock_rate", 1),
    "total_constant_memory_bytes": ("total_constant_memory", 1),
}
_TOP_LEVEL = {
    "name": "name",
    "compute_capability": "compute_capability",
    "total_memory_bytes": "total_memory_bytes",
    "driver_version": "driver_version",
    "uuid": "uuid",
}


def driver_facts(device_info: dict[str, Any]) -> dict[str, Any]:
    """The facts of one device, by topology name (empty for a device that reports none)."""
    facts: dict[str, Any] = {}
    attributes = device_info.get("attributes") or {}
    for name, (attr, scale) in _ATTRIBUTES.items():
        if attributes.get(attr) is not None:
            facts[name] = int(attributes[attr]) * scale
    for name, key in _TOP_LEVEL.items():
        if device_info.get(key) is not None:
            facts[name] = device_info[key]
    for name, value in (device_info.get("facts") or {}).items():
        facts.setdefault(name, value)
    return facts


def fact_pointer(device_info: dict[str, Any], name: str) -> str:
    """The JSON pointer, inside an analysis document, of the fact `name` (see driver_facts)."""
    if (
        name in _ATTRIBUTES
        and (device_info.get("attributes") or {}).get(_ATTRIBUTES[name][0]) is not None
    ):
        return f"/device_info/attributes/{_ATTRIBUTES[name][0]}"
    if name in _TOP_LEVEL and device_info.get(_TOP_LEVEL[name]) is not None:
        return f"/device_info/{_TOP_LEVEL[name]}"
    return f"/device_info/facts/{name}"


def merged_device_info(infos: list[dict[str, Any]]) -> dict[str, Any]:
    """One device's info from several traces: the first that records driver attributes (a
    CUDA device), else the first."""
    for info in infos:
        if info.get("attributes") or info.get("facts"):
            return info
    return infos[0] if infos else {}
