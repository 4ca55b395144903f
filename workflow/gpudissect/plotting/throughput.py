"""Figures of the copy-throughput sweeps: global throughput against CTAs (TPDS Fig. 12), shared
per-SM throughput against active warps (Figs. 15-16)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from . import set_theme
from .banks import empty_figure


def plot_global_sweep(points: pd.DataFrame, *, theoretical_gbps: float, ceiling_gbps, title: str):
    """Throughput against CTAs: a panel per (element size, ILP), a line per CTA size; the
    theoretical bandwidth and the device-copy ceiling as horizontal lines.

    `points`: columns ctas, threads_per_cta, ilp, element_bytes, gbps.
    """
    set_theme()
    elements = sorted(points["element_bytes"].unique())
    ilps = sorted(points["ilp"].unique())
    fig, axes = plt.subplots(
        len(elements),
        len(ilps),
        figsize=(3.0 * len(ilps), 2.8 * len(elements)),
        squeeze=False,
        sharex=True,
        sharey=True,
        layout="constrained",
    )
    sizes = sorted(points["threads_per_cta"].unique())
    palette = dict(zip(sizes, sns.color_palette("viridis", n_colors=len(sizes)), strict=True))
    for i, e in enumerate(elements):
        for j, ilp in enumerate(ilps):
            ax = axes[i][j]
            s = points[(points["element_bytes"] == e) & (points["ilp"] == ilp)]
            for size in sizes:
                t = s[s["threads_per_cta"] == size].sort_values("ctas")
                ax.plot(
                    t["ctas"],
                    t["gbps"],
                    marker="o",
                    ms=3,
                    lw=1,
                    color=palette[size],
                    label=f"{size} threads",
                )
            ax.axhline(theoretical_gbps, ls=":", color="k", lw=1, label="theoretical")
            if ceiling_gbps is not None:
                ax.axhline(ceiling_gbps, ls="--", color="grey", lw=1, label="device copy")
            ax.set_xscale("log", base=2)
            ax.set_title(f"{e}-byte elements, ILP {ilp}", fontsize=9)
            ax.set(
                xlabel="CTAs" if i == len(elements) - 1 else "",
                ylabel="throughput (GB/s)" if j == 0 else "",
            )
    axes[0][-1].legend(fontsize=6)
    fig.suptitle(title)
    return fig, axes


def plot_shared_peak(points: pd.DataFrame, *, theoretical: float, title: str):
    """The best per-SM throughput at each number of active warps (Fig. 15), a line per vector
    width; the theoretical bytes per cycle dotted."""
    set_theme()
    best = points.groupby(["vector_bytes", "active_warps"], as_index=False)["bytes_per_cycle"].max()
    fig, ax = plt.subplots(figsize=(5.5, 3.6), layout="constrained")
    sns.lineplot(
        data=best,
        x="active_warps",
        y="bytes_per_cycle",
        hue="vector_bytes",
        marker="o",
        palette="colorblind",
        ax=ax,
    )
    ax.axhline(theoretical, ls=":", color="k", lw=1, label="theoretical")
    ax.set_xscale("log", base=2)
    ax.set(xlabel="active warps per SM", ylabel="bytes per cycle per SM", title=title)
    ax.legend(title="vector bytes", fontsize=7, loc="center right")  # below the theoretical line
    return fig, ax


def plot_shared_ilp(points: pd.DataFrame, *, theoretical: float, title: str):
    """Per-SM throughput against active warps, a line per ILP (Fig. 16); a panel per vector
    width (the best configuration at each warp count)."""
    set_theme()
    vectors = sorted(points["vector_bytes"].unique())
    fig, axes = plt.subplots(
        1,
        len(vectors),
        figsize=(5.0 * len(vectors), 3.6),
        squeeze=False,
        sharey=True,
        layout="constrained",
    )
    for ax, v in zip(axes[0], vectors, strict=True):
        s = points[points["vector_bytes"] == v]
        best = s.groupby(["ilp", "active_warps"], as_index=False)["bytes_per_cycle"].max()
        sns.lineplot(
            data=best,
            x="active_warps",
            y="bytes_per_cycle",
            hue="ilp",
            marker="o",
            palette="viridis",
            ax=ax,
        )
        ax.axhline(theoretical, ls=":", color="k", lw=1, gid="theoretical")
        ax.set_xscale("log", base=2)
        ax.set(
            xlabel="active warps per SM", ylabel="bytes per cycle per SM", title=f"{v}-byte vectors"
        )
        ax.legend(title="ILP", fontsize=7)
    fig.suptitle(title)
    return fig, axes


def plot_global_throughput(data: pd.DataFrame, doc: dict) -> dict:
    device = doc["device"]
    if "points" not in doc:
        reason = doc["elements"]["dram"]["throughput_gbps"]["undetermined"]
        return {"global_throughput_ctas": empty_figure(f"{device}: global copy", reason)[0]}
    dram = doc["elements"]["dram"]
    ceiling = dram.get("copy_ceiling_gbps", {}).get("value")
    fig, _ = plot_global_sweep(
        pd.DataFrame(doc["points"]),
        theoretical_gbps=dram["theoretical_gbps"]["value"],
        ceiling_gbps=ceiling,
        title=f"{device}: global-memory copy throughput",
    )
    return {"global_throughput_ctas": fig}


def plot_shared_throughput(data: pd.DataFrame, doc: dict) -> dict:
    device = doc["device"]
    if "points" not in doc:
        reason = next(iter(doc["elements"]["shared"].values()))["undetermined"]
        title = f"{device}: shared copy"
        return {
            "shared_throughput_warps": empty_figure(title, reason)[0],
            "shared_throughput_ilp": empty_figure(title, reason)[0],
        }
    points = pd.DataFrame(doc["points"])
    theory = doc["theoretical_bytes_per_cycle_per_sm"]
    peak, _ = plot_shared_peak(
        points, theoretical=theory, title=f"{device}: peak shared throughput per SM"
    )
    ilp, _ = plot_shared_ilp(
        points, theoretical=theory, title=f"{device}: shared throughput by ILP"
    )
    return {"shared_throughput_warps": peak, "shared_throughput_ilp": ilp}
