"""The L2 both ways (config/README.md, "The topology document"): the driver's capacity
(`l2.driver_size_bytes`) and the capacity a contiguous buffer can use (`l2.contiguous_size_bytes`,
the measured size reading), with the reason the two differ: the slice function's balance
(`l2.predicted_contiguous_size_bytes` of `l2_slices`) explains the difference, rules itself out,
or does not decide it."""

from __future__ import annotations

from typing import Any

from .reconcile import AGREE_REL, interval


def _reason(
    measured: int,
    driver: int | None,
    predicted: dict[str, Any] | None,
    bracket: tuple[float, float] | None = None,
) -> str:
    """Why the contiguous reading differs from the driver's size (module docstring);
    `bracket`: the interval the reading's sweep leaves for it, where it records one."""
    if driver is None:
        return "the trace records no driver L2 size to compare with"
    short = 100.0 * (driver - measured) / driver
    if abs(short) <= 100 * AGREE_REL:
        return (
            f"a contiguous buffer uses the driver's L2 ({measured} B against {driver} B, within "
            f"{AGREE_REL:.0%})"
        )
    # the load of the fullest slice over the mean that would explain the reading
    excess = 100.0 * (driver / measured - 1) if measured else float("inf")
    head = (
        f"{measured} B, {short:.1f}% below the driver's {driver} B: explained by slice "
        f"imbalance only if a contiguous buffer loads its fullest slice {excess:.1f}% above the "
        "mean"
    )
    if predicted is None:
        return f"{head}; the run has no slice function to predict it (l2_slices)"
    value = predicted.get("value")
    if value is None:
        why = predicted.get("undetermined") or predicted.get("not_applicable") or "?"
        return f"{head}; the slice classes do not decide it: {why}"
    off = abs(value - measured) / measured
    inside = bracket is not None and bracket[0] <= value < bracket[1]
    if off <= AGREE_REL or inside:
        within = "inside the reading's bracket" if inside else f"within {AGREE_REL:.0%}"
        return (
            f"{head}; explained by slice imbalance: the slice function predicts {value} B "
            f"({within}: {predicted.get('evidence')})"
        )
    return (
        f"{head}; slice imbalance ruled out as the cause: the slice function predicts {value} B "
        f"({100 * off:.1f}% off the reading; {predicted.get('evidence')})"
    )


def add_l2_both_ways(
    elements: dict[str, dict], facts: dict[str, Any], info: dict, info_path: str | None
) -> None:
    """Into `elements["l2"]`: `driver_size_bytes` (the driver's fact) and
    `contiguous_size_bytes` (the chosen size reading, with `reason`), where they exist."""
    from .driver import fact_pointer

    l2 = elements.get("l2")
    if l2 is None:
        return
    driver = facts.get("l2_cache_size_bytes")
    if driver:
        l2["driver_size_bytes"] = {
            "value": int(driver),
            "unit": "bytes",
            "confidence": 1.0,
            "method": "reported by the driver (CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE), as recorded in "
            "the trace's metadata",
            "evidence": f"l2_cache_size_bytes = {int(driver)}",
            "experiment": "driver",
            "analysis": info_path,
            "source": fact_pointer(info, "l2_cache_size_bytes"),
        }
    size = l2.get("size_bytes") or {}
    if size.get("value") is None:
        return
    keep = ("unit", "confidence", "method", "evidence", "bracket_bytes", "resolution_bytes")
    keep += ("experiment", "analysis", "source")
    l2["contiguous_size_bytes"] = {
        "value": size["value"],
        **{k: size[k] for k in keep if k in size},
        "reason": _reason(
            int(size["value"]),
            int(driver) if driver else None,
            l2.get("predicted_contiguous_size_bytes"),
            interval(size),
        ),
    }
