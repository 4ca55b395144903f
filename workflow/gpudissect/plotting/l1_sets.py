"""The l1_sets figure: per stride of k lines, the largest cyclic walk that hits, measured and as
the derived model (sets, ways, index map) predicts it."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from . import placeholder, set_theme

FIGURE = "l1_sets_strides"


def plot_l1_sets(data: pd.DataFrame, doc: dict, *, table: pd.DataFrame) -> dict:
    if table.empty:
        fig, _ = placeholder("L1 eviction sets", "no stride walk measured")
        return {FIGURE: fig}
    set_theme()
    fig, ax = plt.subplots(figsize=(9, 3.6), layout="constrained")
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
    ax.set(xlabel="stride (lines)", ylabel="largest cyclic walk that hits (lines)")
    if table["stride_lines"].max() > 256:  # the power-of-two strides up to max_stride_bytes
        ax.set_xscale("log", base=2)
    ax.legend(fontsize=8)
    v = doc.get("stride_validation") or {}
    agree = v.get("agree") or {}
    # the first clause of the evidence ("N of M strides agree"); the rest is in the document
    note = (agree.get("evidence") or agree.get("undetermined") or "").split(";")[0]
    l1 = (doc.get("elements") or {}).get("l1d") or {}
    ways = (l1.get("ways_per_set") or {}).get("value")
    sets = (l1.get("sets") or {}).get("value")
    model = f"{ways[0]} ways x {sets} sets, " if ways and sets else ""
    data_lines = (v.get("data_lines") or {}).get("lines")
    if data_lines:
        model += f"data array {data_lines} lines, "
    title = f"{doc.get('device', '')}: L1 capacity per stride, model against walks"
    fig.suptitle(f"{title}\n({model}{note})" if note else title, fontsize=10)
    return {FIGURE: fig}
