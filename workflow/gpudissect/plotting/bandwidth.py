"""Figure of the bandwidth sweep: streaming GiB/s of each level against CTAs per SM, a panel
per direction (read, write), the interquartile range of the repetitions as error bars and the
theoretical DRAM bandwidth as a horizontal line."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from . import set_theme
from .banks import empty_figure

GIB = 2**30
LEVEL_LABELS = {"l1": "L1 footprint", "l2": "L2 footprint", "dram": "DRAM footprint"}
LEVEL_COLOURS = {"l1": "C0", "l2": "C1", "dram": "C2"}


def plot_bandwidth_sweep(table: pd.DataFrame, *, ceiling_gbps: float | None, title: str):
    """`table`: the analysis's points (level, direction, ctas_per_sm, gbps, gbps_q25/q75)."""
    set_theme()
    directions = [d for d in ("read", "write") if d in set(table["direction"])]
    fig, axes = plt.subplots(
        1,
        len(directions),
        figsize=(4.6 * len(directions), 3.6),
        squeeze=False,
        layout="constrained",
    )
    scale = 1e9 / GIB
    for ax, direction in zip(axes[0], directions, strict=True):
        d = table[table["direction"] == direction]
        for level in ("l1", "l2", "dram"):
            s = d[d["level"] == level].sort_values("ctas_per_sm")
            if s.empty:
                continue
            y = s["gbps"] * scale
            err = [(s["gbps"] - s["gbps_q25"]) * scale, (s["gbps_q75"] - s["gbps"]) * scale]
            ax.errorbar(
                s["ctas_per_sm"],
                y,
                yerr=err,
                marker="o",
                ms=3,
                capsize=2,
                color=LEVEL_COLOURS[level],
                label=LEVEL_LABELS[level],
            )
        if ceiling_gbps:
            ax.axhline(ceiling_gbps * scale, ls=":", lw=1, color="k", gid="theoretical DRAM")
        ax.set_xscale("log", base=2)
        ax.set(xlabel="CTAs per SM", ylabel="bandwidth (GiB/s)", title=f"{direction}s")
        ax.legend(fontsize=7)
    fig.suptitle(title)
    return fig, axes


def plot_bandwidth(data: pd.DataFrame, doc: dict, *, table: pd.DataFrame) -> dict:
    device = doc["device"]
    if table is None or table.empty:
        reason = doc["elements"]["dram"]["read_bandwidth_gibps"].get("undetermined", "no data")
        return {"bandwidth_ctas": empty_figure(f"{device}: bandwidth", reason)[0]}
    ceiling = doc.get("dram_theoretical_gbps")
    fig, _ = plot_bandwidth_sweep(
        table, ceiling_gbps=ceiling, title=f"{device}: streaming bandwidth per level"
    )
    return {"bandwidth_ctas": fig}
