"""Report section of the bandwidth family: each level's streaming read and write bandwidth
against its ceiling, with MT4G's published figures for the same GPU beside ours (a citation
from config/papers/hopper_published.yaml, never an input to the analysis)."""

from __future__ import annotations

from functools import cache
from typing import Any

ROWS = (
    ("l1d", "read", "L1 read"),
    ("l2", "near_read", "L2 read, near partition"),
    ("l2", "near_write", "L2 write, near partition"),
    ("l2", "read", "L2 read"),
    ("l2", "write", "L2 write"),
    ("dram", "read", "DRAM read"),
    ("dram", "write", "DRAM write"),
)


@cache
def _published() -> dict[str, Any]:
    from .. import yamlio
    from ..datafiles import paper_file

    return yamlio.safe_load(paper_file("hopper_published.yaml").read_text()) or {}


def published(gpu: str | None) -> tuple[dict[str, Any], str | None]:
    """MT4G's values for the GPU the driver named, and their source (({}, None) for a GPU it
    did not publish)."""
    doc = _published()
    values = (doc.get("gpus") or {}).get(gpu or "")
    return (values, (doc.get("sources") or {}).get("MT4G")) if values else ({}, None)


def _cell(q: dict[str, Any] | None) -> str:
    if not q:
        return "—"
    if q.get("value") is None:
        return f"undetermined: {q.get('undetermined') or q.get('not_applicable', '')}"
    spread = q.get("spread_gbps")
    gib = 1e9 / 2**30
    iqr = f" (IQR {spread[0] * gib:.0f}-{spread[1] * gib:.0f})" if spread else ""
    return f"{q['value']:.0f} GiB/s{iqr}"


def _ceiling(q: dict[str, Any] | None) -> str:
    if not q or q.get("value") is None:
        return "—"
    if "ceiling_gbps" in q:
        return (
            f"{q['ceiling_gbps'] * 1e9 / 2**30:.0f} GiB/s theoretical "
            f"({100 * q['fraction_of_ceiling']:.1f}%)"
        )
    return q.get("ceiling", "—")


def bandwidth_section(doc: dict[str, Any], figures: list[str]) -> list[str]:
    lines = ["### Streaming bandwidth per level", ""]
    elements = doc.get("elements", {})
    gpu = (doc.get("device_info") or {}).get("name")
    values, source = published(gpu)
    lines += [
        "| level | measured | at CTAs per SM | ceiling | MT4G |",
        "| --- | --- | --- | --- | --- |",
    ]
    for element, direction, label in ROWS:
        q = elements.get(element, {}).get(f"{direction}_bandwidth_gibps")
        theirs = (values.get(element) or {}).get(f"{direction}_bandwidth_gibps")
        mt4g = f"{theirs['value']:.0f} GiB/s" if theirs else "—"
        at = str(q.get("ctas_per_sm_at_peak", "—")) if q else "—"
        cell = _cell(q)
        if direction.startswith("near_") and q and q.get("value") is None:
            cell = "undetermined (L2 near/far, below)"  # the reason once, under the table
        lines.append(f"| {label} | {cell} | {at} | {_ceiling(q)} | {mt4g} |")
    lines.append("")
    size = elements.get("l1d", {}).get("size_bytes")
    if size is not None:
        theirs = (values.get("l1d") or {}).get("size_bytes")
        mt4g = f"; MT4G's L1: {theirs['value']} B" if theirs else ""
        if size.get("value") is not None:
            low, high = size["bracket_bytes"]
            lines.append(
                f"- L1 without shared memory (the capacity series): {low} B per SM, in "
                f"[{low}, {high}){mt4g}."
            )
        else:
            reason = size.get("undetermined", "")
            lines.append(f"- L1 without shared memory: undetermined ({reason}){mt4g}.")
    near = elements.get("l2", {}).get("near_read_bandwidth_gibps")
    if near and near.get("undetermined"):
        lines.append(f"- L2 near/far: undetermined ({near['undetermined']}).")
    elif near:
        lines.append(
            "- L2 near partition: a footprint within the near partition's size (every SM's "
            "partition holds it); the L2 rows below it stream a footprint above it, over both "
            "partitions."
        )
    if source:
        lines.append(
            f"- MT4G: {source}; GiB/s as MT4G reports them. MT4G's runs differ from each other "
            "(the published sample is one run), so the column is a reference, not a target."
        )
    else:
        lines.append(f"- MT4G published no figures for this GPU ({gpu or 'unnamed'}).")
    fp = doc.get("footprints")
    if fp:
        l1 = f"{fp['l1_bytes']} B measured by cache_stage1" if fp["l1_bytes"] else "not measured"
        carveout = "none set" if fp["carveout_pct"] < 0 else f"{fp['carveout_pct']}%"
        near = f", near partition {fp['l2_near_bytes']} B" if fp.get("l2_near_bytes") else ""
        lines.append(
            f"- Footprints from: L1 {l1}; L2 {fp['l2_bytes']} B ({fp['l2_bytes_source']}){near}; "
            f"carveout {carveout}."
        )
    lines.append("")
    return lines
