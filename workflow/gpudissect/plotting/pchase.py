"""Figures of the fine-grained P-chase size sweep."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from . import set_theme


def _series_label(carveout: int, buffer_bytes: int) -> str:
    c = "no carveout" if carveout < 0 else f"carveout {carveout}%"
    return f"{c}, buffer {buffer_bytes // 1024} KiB"


def plot_size_sweep(summary: pd.DataFrame, *, change_points: list[dict], title: str):
    """Mean latency against array size, one line per series, detected change points marked.

    `summary`: columns carveout_pct, shared_buffer_bytes, array_bytes, mean_latency_cycles.
    `change_points`: dicts with carveout_pct, shared_buffer_bytes, size_bytes (or None).
    """
    set_theme()
    df = summary.copy()
    df["series"] = [
        _series_label(c, b)
        for c, b in zip(df["carveout_pct"], df["shared_buffer_bytes"], strict=True)
    ]
    df["array_kib"] = df["array_bytes"] / 1024
    fig, ax = plt.subplots(figsize=(7, 4))
    sns.lineplot(
        data=df,
        x="array_kib",
        y="mean_latency_cycles",
        hue="series",
        marker="o",
        markersize=3,
        ax=ax,
    )
    palette = dict(
        zip(df["series"].unique(), sns.color_palette(n_colors=df["series"].nunique()), strict=True)
    )
    for cp in change_points:
        if cp.get("size_bytes") is None:
            continue
        label = _series_label(cp["carveout_pct"], cp["shared_buffer_bytes"])
        ax.axvline(cp["size_bytes"] / 1024, ls="--", lw=1, color=palette.get(label, "k"))
        ax.annotate(
            f"{cp['size_bytes'] / 1024:g} KiB",
            (cp["size_bytes"] / 1024, ax.get_ylim()[1]),
            textcoords="offset points",
            xytext=(3, -12),
            fontsize=8,
        )
    ax.set(xlabel="array size (KiB)", ylabel="mean latency (cycles)", title=title)
    fig.tight_layout()
    return fig, ax


def plot_latency_map(data: pd.DataFrame, *, title: str, max_steps: int = 512):
    """Per-access latency map of one series: array size (rows) x access number (columns)."""
    set_theme()
    first = data[
        (data["carveout_pct"] == data["carveout_pct"].iloc[0])
        & (data["shared_buffer_bytes"] == data["shared_buffer_bytes"].iloc[0])
        & (data["repetition"] == 0)
        & (data["step"] < max_steps)
    ]
    grid = first.pivot_table(
        index="array_bytes", columns="step", values="latency_cycles", aggfunc="first"
    )
    fig, ax = plt.subplots(figsize=(8, 4.5))
    vmax = float(np.nanpercentile(grid.to_numpy(), 99))
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
    ticks = np.linspace(0, grid.shape[0] - 1, min(8, grid.shape[0])).astype(int)
    ax.set_yticks(ticks + 0.5, [f"{grid.index[t] / 1024:g}" for t in ticks])
    ax.set(xlabel="access number", ylabel="array size (KiB)", title=title)
    fig.colorbar(im, ax=ax, label="latency (cycles)")
    fig.tight_layout()
    return fig, ax
