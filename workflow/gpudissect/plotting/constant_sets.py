"""The constant_sets figure: per stride of k lines, the largest cyclic walk over constant memory
that hits, measured and as the derived sets and free ways predict it; beside it the capacity per
start offset at a stride that keeps each walk in one set (the free ways of each set)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from . import placeholder, set_theme

FIGURE = "constant_sets_strides"


def plot_constant_sets(data: pd.DataFrame, doc: dict, *, table: pd.DataFrame) -> dict:
    if table.empty:
        fig, _ = placeholder("constant L1 sets", "no stride walk measured")
        return {FIGURE: fig}
    set_theme()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained", width_ratios=(3, 2))
    ax.plot(table["stride_lines"], table["measured_lines"], "o-", ms=4, label="measured")
    if table["predicted_lines"].notna().any():
        ax.plot(table["stride_lines"], table["predicted_lines"], "x--", ms=6, label="predicted")
    ax.plot(
        table["stride_lines"],
        table["top_lines"],
        ":",
        color="0.5",
        lw=1,
        label="largest walk tried",
    )
    ax.set_xscale("log", base=2)
    ax.set(xlabel="stride (lines)", ylabel="largest cyclic walk that hits (lines)")
    ax.set_title("per stride, from line 0", fontsize=9)
    ax.legend(fontsize=8)
    offsets = pd.DataFrame(doc.get("offsets") or [])
    if offsets.empty:
        bx.text(0.5, 0.5, "no offset walks", ha="center", va="center", transform=bx.transAxes)
        bx.set_axis_off()
    else:
        bx.bar(offsets["offset_lines"], offsets["capacity_lines"], color="C0", width=0.8)
        bx.set(xlabel="start offset (lines)", ylabel="largest walk that hits (lines)")
        k = doc.get("offset_stride_lines") or "?"
        bx.set_title(f"per start offset, stride {k} lines", fontsize=9)
    c = (doc.get("elements") or {}).get("constant_l1") or {}
    sets, ways = (c.get("sets") or {}).get("value"), (c.get("ways_per_set") or {}).get("value")
    model = f"{sets} sets x {ways} ways" if sets and ways else "sets and ways undetermined"
    fig.suptitle(
        f"{doc.get('device', '')}: constant L1 capacity of cyclic walks ({model})", fontsize=10
    )
    return {FIGURE: fig}
