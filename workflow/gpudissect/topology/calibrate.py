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
and after its value arrives); the `timing_overhead` document shows it on the L2 path as well.
"""

from __future__ import annotations

from typing import Any

EXPERIMENT = "timing_overhead"
OVERHEAD = "window_overhead_cycles"
AMORTIZED_EXPERIMENTS = frozenset({"bank_conflicts"})
DIFFERENCES = ("_penalty_cycles", "conflict_latency_cycles")


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
        return block
    return None


def calibrate(elements: dict[str, dict[str, Any]], timing: dict[str, Any] | None) -> None:
    """Mark every latency with its timing and give each raw one its calibrated value."""
    overhead = (timing or {}).get(OVERHEAD)
    for quantities in elements.values():
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
            else:
                entry["calibrated_value"] = round(float(entry["value"]) - overhead["value"], 2)
                entry["calibration"] = {
                    OVERHEAD: overhead["value"],
                    "confidence": overhead.get("confidence"),
                    "path": timing.get("calibration_path"),
                    "experiment": EXPERIMENT,
                    "analysis": overhead["analysis"],
                    "source": overhead["source"],
                }
