"""Report section of the bank-conflict family, with TPDS Table VIII beside the measured values.
Numbers come from the result document; paper values from config/papers (comparison only)."""

from __future__ import annotations

from functools import cache
from typing import Any

from gpudissect import yamlio

from ..analysis.banks.bank_model import LAW_MISS_SHARE, linear_law
from ..datafiles import paper_file

PAPER_FILE = paper_file("tpds_banks_throughput.yaml")


@cache
def _papers() -> dict[str, Any]:
    if not PAPER_FILE.is_file():
        return {}
    return yamlio.safe_load(PAPER_FILE.read_text()) or {}


def paper_values(doc: dict[str, Any], block: str) -> dict[str, Any] | None:
    """The paper's values of `block` for the twin the document was measured on (None for a
    device the papers did not measure)."""
    profile = (doc.get("device_info") or {}).get("profile")
    return ((_papers().get("devices") or {}).get(profile) or {}).get(block)


def _v(q: dict[str, Any] | None, fmt: str = "{}") -> str:
    if not q:
        return "—"
    if q.get("value") is None:
        return f"undetermined: {q.get('undetermined', 'no reason recorded')}"
    return fmt.format(q["value"])


def _fit_verdict(law: dict[str, Any]) -> str:
    """The linear fit's verdict as the analysis decided it (`model.linear_law`)."""
    if law["accepted"]:
        where = f"all but {law['misses']} of" if law["misses"] else "every one of"
        return (
            f"**accepted** as the latency law (it holds within 5% at {where} {law['points']} "
            "points and its intercept is the measured no-conflict latency)"
        )
    return (
        "**rejected** as the latency law ("
        + "; ".join(law["reasons"])
        + "): it serves only to rank the bank hypotheses below, whose degrees the degree "
        "model checks on its own"
    )


def _pct_diff(measured: float, paper: float | None) -> str:
    return "—" if paper in (None, 0) else f"{100 * (measured - paper) / paper:+.1f}%"


def bank_conflicts_section(doc: dict[str, Any], figures: list[str]) -> list[str]:
    lines = ["### Shared-memory banks: strided access (TPDS Sec. 6.2, NPC Sec. 3.1)", ""]
    shared = doc["elements"]["shared"]
    if "model" not in doc:
        return lines + [f"- {_v(shared.get('banks'))}", ""]
    m = doc["model"]
    law = [x for x in doc.get("misses", []) if x["linear_law_misses"]]
    verdict = m.get("linear_law") or linear_law(
        m, doc.get("misses", []), (shared.get("hit_latency_cycles") or {}).get("value")
    )
    held = verdict["accepted"]
    # a slope of a law the fit does not hold is no cost per way: say so in its cell
    slope_cell = (
        _v(shared["conflict_latency_cycles"], "{:.2f}")
        if held
        else "undetermined: " + "; ".join(verdict["reasons"])
    )
    paper = paper_values(doc, "banks") or {}
    cite = paper.get("cite", {})
    lines += [
        "| quantity | measured | paper | source |",
        "| --- | --- | --- | --- |",
        f"| banks | {_v(shared['banks'])} | {paper.get('banks', '—')} | {cite.get('banks', '')} |",
        f"| bank width (bytes) | {_v(shared['bank_width_bytes'])} | "
        f"{paper.get('bank_width_bytes', '—')} | {cite.get('bank_width_bytes', '')} |",
        f"| bank modes (bytes) | {_v(shared['modes_bytes'])} | {paper.get('modes_bytes', '—')} "
        f"| {cite.get('modes_bytes', '')} |",
        f"| latency without conflict (cycles) | {_v(shared['hit_latency_cycles'], '{:.2f}')} | "
        f"{paper.get('latency_no_conflict_cycles', '—')} | "
        f"{cite.get('latency_no_conflict_cycles', '')} |",
        f"| cycles per extra way (fit) | {slope_cell} | — | |",
        "",
        f"Linear fit, {_fit_verdict(verdict)}: latency = "
        f"{m['base_cycles']:g} (95% CI {m['base_ci95_cycles']}) + "
        f"{m['slope_cycles']:g} (95% CI {m['slope_ci95_cycles']}) x (degree - 1), "
        f"R^2 = {m['r2']:.4f} over {m['points']} points; the degree of each stride comes from "
        f"{m['selected']['banks']} banks of {m['selected']['bank_width_bytes']} bytes, chosen by "
        "BIC among:",
        "",
        "| banks | width (B) | dBIC | BIC weight | R^2 |",
        "| --- | --- | --- | --- | --- |",
    ]
    for c in m["candidates"]:
        lines.append(
            f"| {c['banks']} | {c['bank_width_bytes']} | {c['delta_bic']:.1f} | "
            f"{c['weight']:.3g} | {c['r2']:.4f} |"
        )
    lines += ["", "Per bank mode alone:", ""]
    for pm in doc.get("per_mode", []):
        # a mode's own line is shown only where the law holds over all points
        law_text = f", {pm['base_cycles']:g} + {pm['slope_cycles']:g} (d - 1)" if held else ""
        lines.append(
            f"- {pm['bank_mode_bytes']}-byte mode: {pm['banks']} banks x {pm['bank_width_bytes']}"
            f" B (BIC weight {pm['weight']:.3g}, R^2 {pm['r2']:.4f}{law_text})"
        )
    table = paper.get("latency_by_degree_cycles", {})
    lines += [
        "",
        "Latency by conflict degree (TPDS Table VIII"
        + (f"; {cite['latency_by_degree_cycles']}" if "latency_by_degree_cycles" in cite else "")
        + "):",
        "",
        "| degree | strides (first, any mode) | measured (cycles) | TPDS Table VIII | difference |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in doc["degree_latency"]:
        p = table.get(row["degree"])
        lines.append(
            f"| {row['degree']} | {', '.join(map(str, row['strides'][:6]))} | "
            f"{row['latency_cycles']:g} | {p if p is not None else '—'} | "
            f"{_pct_diff(row['latency_cycles'], p)} |"
        )
    degree_misses = [x for x in doc.get("misses", []) if x["degree_model_misses"]]
    lines.append("")
    if degree_misses:
        shown = ", ".join(
            f"stride {x['stride_elements']} ({x['bank_mode_bytes']}-byte mode: degree "
            f"{x['predicted_degree']}, latency like degree {x['nearest_degree_by_latency']})"
            for x in degree_misses[:10]
        )
        lines.append(f"- The degree model misses {len(degree_misses)} point(s): {shown}.")
    else:
        lines.append(
            "- The degree model explains every stride (each latency is nearest its own "
            "degree's median)."
        )
    if law:
        by_degree: dict[int, int] = {}
        for x in law:
            by_degree[x["predicted_degree"]] = by_degree.get(x["predicted_degree"], 0) + 1
        lines.append(
            f"- The linear latency law misses {len(law)} point(s) by more than 5% (by degree: "
            + ", ".join(f"{d}: {n}" for d, n in sorted(by_degree.items()))
            + (
                f"), no more than the {LAW_MISS_SHARE:.0%} of points the fit may miss."
                if len(law) <= LAW_MISS_SHARE * m["points"]
                else "): the cost of a conflict way is not constant on this device."
            )
        )
    else:
        lines.append("- The linear latency law fits every point within 5%.")
    lines.append("")
    return lines
