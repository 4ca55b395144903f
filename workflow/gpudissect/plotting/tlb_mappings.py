"""Figure of the `tlb_mappings` family: the latency of the reach walks against their span, one
line per layout and stride, with the reaches the analysis read."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from . import set_theme, size_axis

MIB = 2**20
COLORS = {"contiguous": "tab:blue", "scattered": "tab:orange"}


def plot_reach(data: pd.DataFrame, doc: dict, *, title: str):
    """90th percentile of each walk's latencies (a level overflowed lifts it) against the walk's
    span, log scale; dotted lines at each TLB level's reach under each layout."""
    set_theme()
    fig, ax = plt.subplots(figsize=(7.5, 4), layout="constrained")
    if data.empty:
        ax.text(0.5, 0.5, "no walk", ha="center", transform=ax.transAxes)
        return fig, ax
    markers = iter("osd^v<>")
    for (layout, stride), g in data.groupby(["layout", "stride_bytes"], sort=True):
        walks = g[g["step"] > 0].groupby("array_bytes")["latency_cycles"].quantile(0.9)
        ax.plot(
            walks.index,
            walks.values,
            marker=next(markers, "o"),
            ms=3,
            lw=1,
            color=COLORS.get(str(layout)),
            label=f"{layout}, stride {stride / MIB:g} MiB",
        )
    at: dict[float, list[str]] = {}  # one label for the levels whose reaches coincide
    for name, element in (doc.get("elements") or {}).items():
        for layout in COLORS:
            q = element.get(f"reach_{layout}_bytes") or {}
            if q.get("value"):
                ax.axvline(
                    q["value"], color=COLORS[layout], ls=":", lw=0.8, gid=f"{layout} reaches read"
                )
                at.setdefault(q["value"], []).append(f"{name} ({layout})")
    for x, names in at.items():
        # below the top edge, beside the mark, on a ground that a curve passing under the
        # label does not cross
        ax.annotate(
            "\n".join(names),
            xy=(x, 1),
            xycoords=("data", "axes fraction"),
            xytext=(2, -3),
            textcoords="offset points",
            rotation=90,
            ha="left",
            va="top",
            fontsize=6,
            bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8},
        )
    ax.set(
        xscale="log",
        xlabel="walk span (binary units), one element per stride",
        ylabel="latency p90 (cycles)",
        title=title,
    )
    size_axis(ax.xaxis)
    ax.legend(fontsize=7)
    return fig, ax


def plot_tlb_mappings(data: pd.DataFrame, doc: dict) -> dict:
    """The family's figures, by file stem."""
    fig, _ = plot_reach(data, doc, title=f"{doc['device']}: TLB reach under two mappings")
    return {"tlb_mappings_reach": fig}
