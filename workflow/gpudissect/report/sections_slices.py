"""Report section of the L2 slice map: the partition function, the SMs of each partition, the
slice count, the address-to-slice function and the contiguous capacity it allows, and the fits
of the SM x slice latency matrix. Numbers come from the result
document."""

from __future__ import annotations

from typing import Any


def _q(q: dict[str, Any] | None, fmt=str) -> tuple[str, str]:
    if not q:
        return "—", "—"
    if q.get("value") is None:
        return "undetermined", "—"
    return fmt(q["value"]), f"{q.get('confidence', 0):.2f}"


def _bits(bits: list[int]) -> str:
    return " XOR ".join(f"a{b}" for b in bits) if bits else "constant"


def _function(value: dict[str, Any]) -> str:
    kind = value.get("kind", "?")
    if kind == "xor":
        return f"XOR masks {', '.join(value.get('masks', []))}"
    masks = ", ".join(value.get("linear_masks", [])) or "none"
    period = f", period {value['period_bytes']} B" if value.get("period_bytes") else ""
    return f"{kind.replace('_', ' ')} (linear part: {masks}{period})"


def l2_slices_section(doc: dict[str, Any], figures: list[str]) -> list[str]:
    lines = ["### L2 partitions and slices (first-touch latency from every SM)", ""]
    l2 = (doc.get("elements") or {}).get("l2", {})
    how = "contention classes" if doc.get("contention") else "latency classes"
    rows = [
        ("partition function (address bits 7-20)", l2.get("partition_function"), _bits),
        ("partitions (groups of SMs with one near set)", l2.get("partitions"), str),
        (f"slices ({how})", l2.get("slices"), str),
        ("far-partition penalty (cycles)", l2.get("far_penalty_cycles"), lambda v: f"{v:.1f}"),
        ("address-to-slice function", l2.get("slice_function"), _function),
        (
            "contiguous capacity the slices allow (bytes)",
            l2.get("predicted_contiguous_size_bytes"),
            str,
        ),
    ]
    lines += ["| quantity | value | confidence |", "| --- | --- | --- |"]
    for label, q, fmt in rows:
        value, conf = _q(q, fmt)
        lines.append(f"| {label} | {value} | {conf} |")
    lines.append("")
    helpers = doc.get("helpers") or {}
    if helpers:
        lines.append(
            "Warm-up walks from SM "
            + " then SM ".join(str(v) for _, v in sorted(helpers.items()))
            + " (the second for the SMs that read no far lines after the first)."
        )
    groups = doc.get("near_groups") or []
    if groups:
        lines.append(
            "SMs sharing a near partition: "
            + "; ".join(f"{len(g)} SMs ({g[0]}..{g[-1]})" if len(g) > 6 else str(g) for g in groups)
            + "."
        )
    fits = (doc.get("model") or {}).get("fits") or {}
    for name, label in (("additive", "a_sm + b_slice"), ("additive_far", "+ p * far")):
        f = fits.get(name)
        if f:
            lines.append(
                f"- fit {label}: R^2 {f['r2']}, residual SD {f['residual_sd_cycles']} cycles, "
                f"largest residual {f['residual_max_cycles']} cycles"
            )
    for key, q in l2.items():
        if isinstance(q, dict) and q.get("value") is None and q.get("undetermined"):
            lines.append(f"- {key}: undetermined, {q['undetermined']}")
        elif isinstance(q, dict) and q.get("evidence"):
            lines.append(f"- {key}: {q['evidence']}")
    return lines + [""]
