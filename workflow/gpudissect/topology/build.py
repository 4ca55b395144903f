"""The topology document of one device (DESIGN.md contract; config/README.md describes it):
one value per memory element and quantity, gathered from every analysis of the run and
reconciled (`reconcile.py`), with the driver's facts beside the measured values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .calibrate import add_chain_latencies, calibrate, timing_block
from .driver import driver_facts, fact_pointer, merged_device_info
from .gather import load_document, readings
from .l2_capacity import add_l2_both_ways
from .node import apply_node_repeats, node_section
from .reconcile import PRECEDENCE, reconcile
from .repeats import NOT_REPEATING, apply_repeats

SCHEMA_VERSION = 1

# driver fact -> (element, quantity) it reports directly (the thesis reads these from CUDA)
_DRIVER_QUANTITIES = {
    "total_memory_bytes": ("dram", "size_bytes", "cuDeviceTotalMem"),
    "shared_memory_per_sm_bytes": (
        "shared",
        "size_bytes",
        "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR",
    ),
}
# driver fact -> measured (element, quantity) it is compared with
_DRIVER_COMPARED = {"l2_cache_size_bytes": ("l2", "size_bytes")}


def build_topology(
    device: str,
    analyses: list[str | Path],
    registry: tuple[str, ...],
    *,
    repeats: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The document from a device's analysis documents (`registry`: the families' order); with
    `repeats` (the repeats document of a run that repeated, `topology.repeats`), a value that
    does not repeat is undetermined with its readings and a measured one carries its spread."""
    docs = [(str(p), load_document(p)) for p in analyses]
    all_readings = [r for path, doc in docs for r in readings(doc, path)]
    elements = reconcile(all_readings, registry)
    info_by_path = {path: doc.get("device_info") or {} for path, doc in docs}
    info = merged_device_info(list(info_by_path.values()))
    info_path = next((p for p, i in info_by_path.items() if i is info), None)
    facts = driver_facts(info)
    _add_driver_quantities(elements, facts, info, info_path)
    _compare_with_driver(elements, facts)
    add_l2_both_ways(elements, facts, info, info_path)
    if repeats is not None:
        apply_repeats(elements, repeats)
    timing = timing_block(docs)
    calibrate(elements, timing)
    add_chain_latencies(elements, docs)
    document = {
        "schema_version": SCHEMA_VERSION,
        "device": device,
        "backend": info.get("backend"),
        "gpu": info.get("name"),
        "driver": facts,
        "reconciliation": {
            "precedence": {k: list(v) for k, v in PRECEDENCE.items()},
            "registry_order": list(registry),
            "rule": "config/README.md, 'The topology document'",
        },
        "sources": [
            {
                "experiment": doc["analysis"],
                "analysis": path,
                **{k: (doc.get("trace") or {}).get(k) for k in ("git_commit", "config_hash")},
            }
            for path, doc in docs
        ],
        "elements": elements,
    }
    if timing is not None:
        document["timing"] = timing
    node = node_section(docs)
    if node is not None:
        if repeats is not None and "pairs" in node:
            apply_node_repeats(node, repeats, not_repeating=NOT_REPEATING)
        document["node"] = node
    if repeats is not None:
        document["repeats"] = {
            "repeats": repeats.get("repeats"),
            "does_not_repeat": list(repeats.get("does_not_repeat", [])),
        }
    return document


def _add_driver_quantities(elements, facts, info, info_path) -> None:
    for fact, (element, quantity, api) in _DRIVER_QUANTITIES.items():
        if fact not in facts or quantity in elements.get(element, {}):
            continue
        pointer = fact_pointer(info, fact)
        elements.setdefault(element, {})[quantity] = {
            "value": int(facts[fact]),
            "unit": "bytes",
            "confidence": 1.0,
            "method": f"reported by the driver ({api}), as recorded in the trace's metadata",
            "evidence": f"{fact} = {int(facts[fact])}",
            "experiment": "driver",
            "analysis": info_path,
            "source": pointer,
        }


def _compare_with_driver(elements, facts) -> None:
    for fact, (element, quantity) in _DRIVER_COMPARED.items():
        entry = elements.get(element, {}).get(quantity)
        if entry is None or fact not in facts:
            continue
        entry["driver_value"] = int(facts[fact])
        if entry.get("value") is not None and facts[fact]:
            entry["driver_difference_pct"] = round(
                100.0 * (entry["value"] - facts[fact]) / facts[fact], 2
            )


def validate_topology(doc: dict[str, Any]) -> None:
    """Raise TraceError naming the first place where `doc` breaks the topology schema."""
    import jsonschema

    from .. import yamlio
    from ..datafiles import schema_file
    from ..exceptions import TraceError

    with open(schema_file("topology.schema.yaml")) as f:
        schema = yamlio.safe_load(f)
    errors = sorted(
        jsonschema.Draft202012Validator(schema).iter_errors(doc), key=lambda e: list(e.path)
    )
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "(top level)"
        raise TraceError(
            f"topology document of {doc.get('device')!r}: {where}: {errors[0].message}"
        )
