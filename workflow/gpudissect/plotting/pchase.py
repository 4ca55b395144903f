"""Figures of the fine-grained P-chase size sweep: one panel per carveout."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from . import set_theme


def _carveout_label(carveout: int) -> str:
    return "no carveout" if carveout < 0 else f"carveout {carveout}%"


def _panels(n: int, *, width: float, height: float):
    cols = min(n, 2)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(width * cols, height * rows),
        squeeze=False,
        sharey=True,
        layout="constrained",
    )
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, axes.flat[:n]


def plot_size_sweep(summary: pd.DataFrame, *, change_points: list[dict], title: str):
    """Mean latency against array size; a panel per carveout, a line per shared buffer size,
    the detected cache size of each series marked with a dashed line.

    `summary`: columns carveout_pct, shared_buffer_bytes, array_bytes, mean_latency_cycles.
    `change_points`: dicts with carveout_pct, shared_buffer_bytes, size_bytes (or None).
    """
    set_theme()
    df = summary.assign(
        array_kib=summary["array_bytes"] / 1024,
        buffer=[f"{b // 1024} KiB buffer" for b in summary["shared_buffer_bytes"]],
    )
    buffers = sorted(df["buffer"].unique(), key=lambda s: int(s.split()[0]))
    palette = dict(zip(buffers, sns.color_palette(n_colors=len(buffers)), strict=True))
    carveouts = sorted(df["carveout_pct"].unique())
    fig, axes = _panels(len(carveouts), width=5.2, height=3.4)
    for ax, carveout in zip(axes, carveouts, strict=True):
        sns.lineplot(
            data=df[df["carveout_pct"] == carveout],
            x="array_kib",
            y="mean_latency_cycles",
            hue="buffer",
            hue_order=buffers,
            palette=palette,
            marker="o",
            markersize=3,
            ax=ax,
        )
        for cp in change_points:
            if cp["carveout_pct"] != carveout or cp.get("size_bytes") is None:
                continue
            label = f"{cp['shared_buffer_bytes'] // 1024} KiB buffer"
            ax.axvline(
                cp["size_bytes"] / 1024, ls="--", lw=1, color=palette[label], gid="detected size"
            )
        marks = sorted(
            {
                cp["size_bytes"]
                for cp in change_points
                if cp["carveout_pct"] == carveout and cp.get("size_bytes") is not None
            }
        )
        text = ", ".join(f"{m / 1024:g} KiB" for m in marks) or "none"
        y = df.loc[df["carveout_pct"] == carveout, "mean_latency_cycles"].to_numpy(float)
        mid = float(np.median(y)) if y.size else 0.0
        flat = y.size and float(np.ptp(y)) < 0.1 * abs(mid)
        if not marks and flat and len(carveouts) == 1:  # panels share their y axis
            # no size detected and a flat line: its noise (a fraction of a cycle) is drawn on a
            # span of 10% of its level, not stretched over the whole panel
            ax.set_ylim(0.95 * mid, 1.05 * mid)
        ax.set(
            title=f"{_carveout_label(carveout)}; detected size: {text}",
            xlabel="array size (KiB)",
            ylabel="mean latency (cycles)",
        )
        ax.legend(title=None, fontsize=8)
    fig.suptitle(title)
    return fig, axes


def plot_latency_map(data: pd.DataFrame, *, title: str, max_steps: int = 512):
    """Per-access latency (colour) by array size (rows) and access number (columns): a panel
    per carveout, at the smallest shared buffer, first repetition."""
    set_theme()
    buffer_bytes = data["shared_buffer_bytes"].min()
    sel = data[
        (data["shared_buffer_bytes"] == buffer_bytes)
        & (data["repetition"] == 0)
        & (data["step"] < max_steps)
    ]
    carveouts = sorted(sel["carveout_pct"].unique())
    vmax = float(np.percentile(sel["latency_cycles"], 99.5))
    fig, axes = _panels(len(carveouts), width=5.2, height=3.6)
    for ax, carveout in zip(axes, carveouts, strict=True):
        grid = sel[sel["carveout_pct"] == carveout].pivot_table(
            index="array_bytes", columns="step", values="latency_cycles", aggfunc="first"
        )
        im = ax.imshow(
            grid.to_numpy(),
            aspect="auto",
            origin="lower",
            cmap="viridis",
            vmin=0,
            vmax=vmax,
            interpolation="nearest",
            extent=(0, grid.shape[1], 0, grid.shape[0]),
        )
        ticks = np.linspace(0, grid.shape[0] - 1, min(6, grid.shape[0])).astype(int)
        ax.set_yticks(ticks + 0.5, [f"{grid.index[t] / 1024:g}" for t in ticks])
        ax.grid(False)
        ax.set(
            xlabel="access number",
            ylabel="array size (KiB)",
            title=f"{_carveout_label(carveout)}, {buffer_bytes // 1024} KiB buffer",
        )
    fig.colorbar(im, ax=list(axes), label="latency (cycles)", shrink=0.9)
    fig.suptitle(title)
    return fig, axes


def plot_l1_size(data: pd.DataFrame, doc: dict, *, table: pd.DataFrame) -> dict:
    """The l1_size family's figures, by file stem (`table`: the analysis's per-size summary)."""
    element = next(iter(doc["elements"]))
    cps = [
        {
            "carveout_pct": -1 if s["carveout_pct"] is None else s["carveout_pct"],
            "shared_buffer_bytes": s["shared_buffer_bytes"],
            "size_bytes": s[element]["size_bytes"].get("value"),
        }
        for s in doc["series"]
    ]
    device = doc["device"]
    sweep, _ = plot_size_sweep(
        table,
        change_points=cps,
        title=f"{device}: mean latency vs array size ({doc['path']} path)",
    )
    latency_map, _ = plot_latency_map(
        data, title=f"{device}: per-access latency ({doc['path']} path)"
    )
    return {"l1_size_sweep": sweep, "l1_size_latency_map": latency_map}
