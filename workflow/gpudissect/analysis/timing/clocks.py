"""Whether a GPU sweep ran at steady clocks: the SM and memory clocks and NVML's clock event
(throttle) reasons the sweep recorded before and after it (the trace's provenance), and the SM
clock its points recorded where the trace has one per point. A sweep
whose clocks changed, or during which the driver gave any reason other than an idle GPU, is
flagged: its cycles may mix clock domains or a throttled SM. Sees only the provenance.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# NVML's clock event reason bits (nvmlClocksEventReasons; the same bits as the older
# nvmlClocksThrottleReasons)
REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
BENIGN = frozenset({"gpu_idle"})
CLOCKS = ("sm_clock_mhz", "memory_clock_mhz")


def reason_names(mask: int | None) -> list[str] | None:
    """The names of the bits set in `mask` (an unknown bit by its hex value); None: unknown."""
    if mask is None:
        return None
    names = [name for bit, name in REASONS.items() if mask & bit]
    rest = mask & ~sum(REASONS)
    if rest:
        names.append(f"0x{rest:x}")
    return names


def point_clock_range(data: Any) -> dict[str, Any] | None:
    """The SM clock the trace's points recorded (column `sm_clock_mhz`, read by NVML at most
    a fraction of a second before each point): min, max and how many points read one."""
    if data is None or "sm_clock_mhz" not in getattr(data, "columns", ()):
        return None
    sm = np.asarray(data["sm_clock_mhz"], dtype=float)
    sm = sm[np.isfinite(sm)]
    if sm.size == 0:
        return None
    return {"min": float(sm.min()), "max": float(sm.max()), "points": int(sm.size)}


def sweep_clocks(provenance: dict[str, Any], data: Any = None) -> dict[str, Any] | None:
    """The clock record of one GPU sweep, flagged where the clocks changed (between before and
    after, or between the points of `data`) or a reason other than idle was set; None for a
    simulated device (its clocks are the profile's)."""
    if provenance.get("backend") != "cuda":
        return None
    before = provenance.get("clocks_before") or {}
    after = provenance.get("clocks_after") or {}
    changed = [
        f"{k}: {before.get(k)} -> {after.get(k)}"
        for k in CLOCKS
        if before.get(k) is not None and after.get(k) is not None and before[k] != after[k]
    ]
    points = point_clock_range(data)
    if points is not None and points["max"] > points["min"]:
        changed.append(f"SM clock of the points from {points['min']:g} to {points['max']:g} MHz")
    recorded = "clock_event_reasons" in before or "clock_event_reasons" in after
    reasons: list[str] = []
    for side in (before, after):
        for name in reason_names(side.get("clock_event_reasons")) or []:
            if name not in reasons:
                reasons.append(name)
    throttled = [r for r in reasons if r not in BENIGN]
    why = []
    if changed:
        why.append("clocks changed during the sweep (" + "; ".join(changed) + ")")
    if throttled:
        why.append("clock event reasons set: " + ", ".join(throttled))
    missing = [k for k in CLOCKS if before.get(k) is None or after.get(k) is None]
    if why:
        note = "; ".join(why)
    elif missing:
        note = f"not read before and after the sweep (NVML): {', '.join(missing)}"
    else:
        note = "steady clocks"
        note += ", no clock event reason but idle" if recorded else " (reasons not recorded)"
    return {
        "before": before,
        "after": after,
        "points_sm_clock_mhz": points,
        "clock_changed": bool(changed),
        "clock_event_reasons": reasons if recorded else None,
        "throttled": bool(throttled),
        "flagged": bool(why),
        "note": note,
    }
