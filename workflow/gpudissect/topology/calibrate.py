"""How each latency of the topology document was timed, and the calibrated value beside a raw
one (config/README.md, "The topology document", rule 7).

- `raw`: read by the per-access timed window (clock, load, store of the index, clock) of the
  P-chase kernels: the window's overhead is in it. `calibrated_value` is the raw value minus the
  window overhead the `timing_overhead` analysis measured (raw L1 hit minus the load-to-use
  latency of a 64-bit pointer chase over the same lines), named under `calibration`;
- `amortized`: a chain of loads timed as a whole (the shared-memory chase of `bank_conflicts`:
  64 loads a window, the address is the loaded value), which pays the window once a chain;
- `difference`: a difference of two raw latencies (miss penalties, the latency per way of a
  bank conflict), in which the window's overhead cancels.
The overhead is taken to be the same whatever the load hits (it is paid before the load issues
and after its value arrives; the `timing_overhead` document shows it on the L2 path as well), but
not whatever the load instruction is: a latency is calibrated with the overhead measured on its
own load path (`ELEMENT_PATHS`; the L2's and DRAM's latencies are read by global loads), the two
global-load paths `ca` and `cg` (one instruction, two cache operators) standing in for each other,
and a latency of a path the run did not measure the overhead on is left uncalibrated, with why.

Beside the L1-level hit latencies, `add_chain_latencies` puts the second method's reading: the
latency per load of a chain timed as a whole on the element's own path (`timing_overhead`'s
load-to-use latency), and whether it agrees with the calibrated P-chase value.
"""

from __future__ import annotations

from typing import Any

EXPERIMENT = "timing_overhead"
OVERHEAD = "window_overhead_cycles"
AMORTIZED_EXPERIMENTS = frozenset({"bank_conflicts"})
DIFFERENCES = ("_penalty_cycles", "conflict_latency_cycles")
# the load path whose timed window reads each element's latencies (the rest: global loads)
ELEMENT_PATHS = {
    "l1d": "ca",
    "texture": "tex",
    "readonly": "nc",
    "constant_l1": "const",
    "constant_l15": "const",
}
GLOBAL_PATHS = ("ca", "cg")


def timing_of(quantity: str, experiment: str | None) -> str | None:
    """`raw`, `amortized` or `difference` for a latency quantity; None for anything else."""
    if quantity.endswith(DIFFERENCES):
        return "difference"
    if not quantity.endswith("_latency_cycles"):
        return None
    return "amortized" if experiment in AMORTIZED_EXPERIMENTS else "raw"


def timing_block(docs: list[tuple[str, dict[str, Any]]]) -> dict[str, Any] | None:
    """The `timing_overhead` analysis's quantities, each with where it came from (None when the
    run has no such analysis)."""
    for path, doc in docs:
        if doc.get("analysis") != EXPERIMENT:
            continue
        timing = doc.get("timing") or {}
        block: dict[str, Any] = {"calibration_path": timing.get("calibration_path")}
        for name, entry in timing.items():
            if isinstance(entry, dict):
                block[name] = {
                    **entry,
                    "experiment": EXPERIMENT,
                    "analysis": path,
                    "source": f"/timing/{name}",
                }
        by_path = {
            p: {
                **quantities[OVERHEAD],
                "experiment": EXPERIMENT,
                "analysis": path,
                "source": f"/paths/{p}/{OVERHEAD}",
            }
            for p, quantities in (doc.get("paths") or {}).items()
            if isinstance((quantities or {}).get(OVERHEAD), dict)
            and quantities[OVERHEAD].get("value") is not None
        }
        if by_path:
            block["window_overhead_by_path"] = by_path
        return block
    return None


def path_overhead(
    timing: dict[str, Any] | None, element: str
) -> tuple[dict | None, str, str | None]:
    """(overhead, path, measured on) for `element`'s latencies: its load path, and the window
    overhead measured on that path (a global-load path stands in for the other; a run that
    measured one overhead measured it on its calibration path), or None."""
    path = ELEMENT_PATHS.get(element, "cg")
    timing = timing or {}
    by_path = dict(timing.get("window_overhead_by_path") or {})
    if not by_path and timing.get(OVERHEAD) is not None:
        by_path = {timing.get("calibration_path"): timing[OVERHEAD]}
    if path in by_path:
        return by_path[path], path, path
    if path in GLOBAL_PATHS:
        other = next((p for p in GLOBAL_PATHS if p in by_path), None)
        if other is not None:
            return by_path[other], path, other
    return None, path, None


def calibrate(elements: dict[str, dict[str, Any]], timing: dict[str, Any] | None) -> None:
    """Mark every latency with its timing and give each raw one its calibrated value, with the
    overhead of its own load path (`path_overhead`)."""
    overhead = (timing or {}).get(OVERHEAD)
    measured_on = sorted((timing or {}).get("window_overhead_by_path") or {}) or [
        (timing or {}).get("calibration_path")
    ]
    for element, quantities in elements.items():
        own, path, on = path_overhead(timing, element)
        for name, entry in quantities.items():
            kind = timing_of(name, entry.get("experiment"))
            if kind is None:
                continue
            entry["timing"] = kind
            if kind != "raw" or entry.get("value") is None:
                continue
            if overhead is None:
                entry["calibrated_value"] = None
                entry["calibration"] = {
                    "undetermined": f"the run has no {EXPERIMENT} analysis (enable the experiment)"
                }
            elif overhead.get("value") is None:
                entry["calibrated_value"] = None
                why = overhead["undetermined"]
                entry["calibration"] = {
                    "undetermined": f"the window overhead is undetermined: {why}"
                }
            elif own is None or own.get("value") is None:
                entry["calibrated_value"] = None
                entry["calibration"] = {
                    "undetermined": f"the window overhead was measured on {', '.join(measured_on)}"
                    f", not on the {path} path that reads {element}'s latencies"
                }
            else:
                entry["calibrated_value"] = round(float(entry["value"]) - own["value"], 2)
                entry["calibration"] = {
                    OVERHEAD: own["value"],
                    "confidence": own.get("confidence"),
                    "path": on,
                    "experiment": EXPERIMENT,
                    "analysis": own["analysis"],
                    "source": own["source"],
                }


# the L1-level elements whose hit a chain timed as a whole reads on their own path
CHAIN_ELEMENTS = ("l1d", "readonly", "texture")
CHAIN = "load_to_use_latency_cycles"
AGREE_CYCLES = 2.0  # a chain and a calibrated P-chase latency agree within this,
AGREE_FRACTION = 0.05  # or within this fraction of the chain's latency, whichever is larger


def add_chain_latencies(elements: dict[str, dict[str, Any]], docs: list[tuple[str, dict]]) -> None:
    """Beside each L1-level hit latency, the latency per load of a chain timed as a whole on
    the element's own path (`timing_overhead`: no per-access window), as
    `hit_latency_chain_cycles`, with the P-chase's calibrated value and whether they agree."""
    found = next(((p, d) for p, d in docs if d.get("analysis") == EXPERIMENT), None)
    if found is None:
        return
    path_doc, doc = found
    for element in CHAIN_ELEMENTS:
        path = ELEMENT_PATHS[element]
        chain = ((doc.get("paths") or {}).get(path) or {}).get(CHAIN) or {}
        hit = (elements.get(element) or {}).get("hit_latency_cycles")
        if chain.get("value") is None or not hit or hit.get("value") is None:
            continue
        entry = {
            k: chain[k] for k in ("value", "unit", "confidence", "method", "evidence") if k in chain
        } | {"experiment": EXPERIMENT, "analysis": path_doc, "source": f"/paths/{path}/{CHAIN}"}
        entry |= _agreement(float(chain["value"]), hit, path)
        elements[element]["hit_latency_chain_cycles"] = entry


def _agreement(chain: float, hit: dict[str, Any], path: str) -> dict[str, Any]:
    calibrated = hit.get("calibrated_value")
    if calibrated is None:
        why = (hit.get("calibration") or {}).get("undetermined", "no calibrated value")
        return {
            "pchase_calibrated_cycles": None,
            "agrees": None,
            "note": f"the P-chase's hit latency is uncalibrated ({why}): nothing to compare",
        }
    on = (hit.get("calibration") or {}).get("path")
    tolerance = max(AGREE_CYCLES, AGREE_FRACTION * chain)
    agrees = abs(chain - float(calibrated)) <= tolerance
    own = (
        f"calibrated with the window overhead measured on {path} itself (raw - chain there), "
        "so the two differ by the P-chase's raw against timing_overhead's raw"
        if on == path
        else f"calibrated with the window overhead measured on {on}, not on {path}"
    )
    return {
        "pchase_calibrated_cycles": calibrated,
        "agrees": agrees,
        "note": (
            f"chain {chain:g} against the P-chase's calibrated {calibrated:g} cycles: "
            f"{'within' if agrees else 'outside'} {tolerance:.1f} cycles "
            f"(the larger of {AGREE_CYCLES:g} cycles and {AGREE_FRACTION:.0%}); {own}"
        ),
    }
