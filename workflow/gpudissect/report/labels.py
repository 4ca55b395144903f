"""What a device is, said where its numbers are: a simulated twin (backend `sim`, as its traces'
provenance and its topology document record it) or a GPU measured on hardware (backend `cuda`).
Never guessed from a device's name."""

from __future__ import annotations

from typing import Any

# What agreement with a paper means on a twin: its profile is built from the papers' tables.
TWIN_AGREEMENT = (
    "A twin's profile is built from the papers' tables, so **agrees** on a twin shows that the "
    "method recovers what the simulator was given; it is not a hardware measurement of that GPU "
    "and does not confirm the paper's values."
)


def device_info(docs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The `device_info` of the first document that has one."""
    for doc in docs.values():
        info = (doc or {}).get("device_info")
        if info:
            return info
    return {}


def backend(docs: dict[str, dict[str, Any]], topology: dict[str, Any] | None = None) -> str:
    """`sim`, `cuda`, or "" when neither the documents nor the topology record it."""
    return str((topology or {}).get("backend") or device_info(docs).get("backend") or "")


def simulated(docs: dict[str, dict[str, Any]], topology: dict[str, Any] | None = None) -> bool:
    return backend(docs, topology) == "sim"


def device_label(
    name: str, docs: dict[str, dict[str, Any]], topology: dict[str, Any] | None = None
) -> str:
    """A heading's name for the device: `gtx560ti: GeForce GTX 560 Ti twin (simulated from
    config/devices/gtx560ti.yaml)`, `h100 (NVIDIA H100, measured on hardware)`."""
    info = device_info(docs)
    gpu = str(info.get("name") or (topology or {}).get("gpu") or "")
    kind = backend(docs, topology)
    if kind == "sim":
        source = info.get("profile_path") or info.get("profile")
        return f"{name}: {gpu or name} twin (simulated" + (f" from {source})" if source else ")")
    if kind == "cuda":
        return f"{name} ({gpu + ', ' if gpu and gpu != name else ''}measured on hardware)"
    return name + (f" ({gpu})" if gpu and gpu != name else "")


def column_label(
    name: str, docs: dict[str, dict[str, Any]], topology: dict[str, Any] | None = None
) -> str:
    """A table column's name for the device: `gtx560ti (simulated)`, `h100 (hardware)`."""
    kind = backend(docs, topology)
    return {"sim": f"{name} (simulated)", "cuda": f"{name} (hardware)"}.get(kind, name)


def provenance_paragraph(devices: dict[str, dict[str, dict[str, Any]]]) -> str:
    """The summary's opening: what was measured on hardware and what recovered from a
    simulation in this run."""
    hardware = [n for n, docs in devices.items() if backend(docs) == "cuda"]
    twins = [n for n, docs in devices.items() if backend(docs) == "sim"]
    other = [n for n in devices if n not in hardware and n not in twins]
    parts = [
        "**Measured on hardware in this run**: "
        + (
            ", ".join(device_label(n, devices[n]) for n in hardware)
            if hardware
            else "none (no device measured on hardware in this run)"
        )
        + "."
    ]
    if twins:
        parts.append(
            "**Recovered from a simulation** (digital twins, backend `sim`): "
            + "; ".join(device_label(n, devices[n]) for n in twins)
            + ". "
            + TWIN_AGREEMENT
        )
    if other:
        parts.append(f"**Backend not recorded**: {', '.join(other)}.")
    return " ".join(parts)
