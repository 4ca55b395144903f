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
    # one position per stride (1..40 lines, then the powers of two): a log axis crowds them
    x = range(len(table))
    ax.bar(x, table["measured_lines"], color="C0", width=0.7, label="measured")
    if table["predicted_lines"].notna().any():
        ax.plot(x, table["predicted_lines"], "x", color="C1", ms=6, label="predicted")
    ax.plot(x, table["top_lines"], "_", color="0.4", ms=7, label="largest walk tried")
    strides = table["stride_lines"].astype(int).to_list()
    ticks = [i for i, k in enumerate(strides) if k in (1, 2, 4) or k % 8 == 0]
    ax.set_xticks(ticks, [str(strides[i]) for i in ticks], fontsize=7, rotation=90)
    top = max(float(table["measured_lines"].max()), 1.0)
    ax.set_ylim(0, top * 1.6)
    ax.set(xlabel="stride (lines)", ylabel="largest cyclic walk that hits (lines)")
    ax.set_title("per stride, from line 0", fontsize=9)
    ax.legend(fontsize=8, loc="upper right", ncols=3)
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
    model = f"{sets} sets x {ways[0]} ways" if sets and ways else "sets and ways undetermined"
    fig.suptitle(
        f"{doc.get('device', '')}: constant L1 capacity of cyclic walks ({model})", fontsize=10
    )
    return {FIGURE: fig}
