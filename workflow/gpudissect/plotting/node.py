"""Node figures: GPU x GPU heat maps of the peer latency and the link bandwidth, drawn from the
tidy table the node analysis writes (one row per ordered pair, the diagonal a GPU's own
memory)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from . import placeholder, set_theme

LATENCY, BANDWIDTH, STREAMS = "node_latency", "node_bandwidth", "node_streams"
ACCESS_STYLES = {4: ":", 8: "--", 16: "-"}


def _matrix(table: pd.DataFrame, column: str, gpus: list[int]) -> np.ndarray:
    m = np.full((len(gpus), len(gpus)), np.nan)
    pos = {g: i for i, g in enumerate(gpus)}
    for row in table[table["row"] == "pair"].itertuples():
        v = getattr(row, column)
        if v is not None and not pd.isna(v):
            m[pos[row.src_gpu], pos[row.dst_gpu]] = float(v)
    return m


def _heat(ax, m: np.ndarray, gpus: list[int], title: str, unit: str, fig, *, copy=False) -> None:
    im = ax.imshow(m, cmap="viridis", interpolation="nearest")
    rows, columns = ("copies from GPU", "to GPU") if copy else ("loads from GPU", "memory of GPU")
    ax.set(xlabel=columns, ylabel=rows, title=title)
    ax.set_xticks(range(len(gpus)), [str(g) for g in gpus])
    ax.set_yticks(range(len(gpus)), [str(g) for g in gpus])
    ax.grid(False)
    lo, hi = (np.nanmin(m), np.nanmax(m)) if np.isfinite(m).any() else (0.0, 1.0)
    for (i, j), v in np.ndenumerate(m):
        text = "—" if np.isnan(v) else f"{v:.0f}"
        light = not np.isnan(v) and (v - lo) > 0.6 * (hi - lo)  # viridis is yellow up there
        ax.text(j, i, text, ha="center", va="center", color="k" if np.isnan(v) or light else "w")
    fig.colorbar(im, ax=ax, label=unit, shrink=0.8)


def _streams(table: pd.DataFrame, device: str):
    streams = table[table["row"] == "stream"]
    if streams.empty:
        return placeholder("node streams", "no SM-driven stream measured")[0]
    directions = sorted(set(streams["direction"]))
    fig, axes = plt.subplots(
        1,
        len(directions),
        figsize=(5.5 * len(directions), 4.2),
        layout="constrained",
        squeeze=False,
    )
    pairs = sorted(
        {(int(s), int(d)) for s, d in zip(streams["src_gpu"], streams["dst_gpu"], strict=True)}
    )
    colours = {p: f"C{i % 10}" for i, p in enumerate(pairs)}
    for ax, direction in zip(axes[0], directions, strict=True):
        mine = streams[streams["direction"] == direction]
        for (src, dst, access), g in mine.groupby(["src_gpu", "dst_gpu", "access_bytes"]):
            g = g.sort_values("sms")
            label = f"{src} -> {dst}, {access} B" if access == 16 or len(pairs) == 1 else None
            ax.plot(
                g["sms"],
                g["gbps"],
                ACCESS_STYLES.get(int(access), "-"),
                marker=".",
                color=colours[(int(src), int(dst))],
                label=label,
            )
        ax.set_xscale("log", base=2)
        ax.set(xlabel="SMs (one block each)", ylabel="GB/s", title=f"SM-driven {direction}s")
        ax.legend(
            fontsize=6,
            title_fontsize=7,
            ncol=2 if len(pairs) > 4 else 1,
            title="pair, access (16 B solid, 8 dashed, 4 dotted)",
        )
    fig.suptitle(f"{device}: peer bandwidth against SMs and access size")
    return fig


def plot_node(data: pd.DataFrame, doc: dict, *, table: pd.DataFrame) -> dict:
    pairs = table[table["row"] == "pair"] if "row" in table else table
    if pairs.empty:
        return {
            LATENCY: placeholder("node latency", "no pair of GPUs measured")[0],
            BANDWIDTH: placeholder("node bandwidth", "no pair of GPUs measured")[0],
            STREAMS: placeholder("node streams", "no pair of GPUs measured")[0],
        }
    set_theme()
    gpus = sorted({*pairs["src_gpu"], *pairs["dst_gpu"]})
    device = doc.get("device", "")
    path = pairs["path"].iloc[0]
    size = (4.6 * 2 + 1, 4.2)
    lat, axes = plt.subplots(1, 2, figsize=size, layout="constrained")
    cells = (("hit_latency_cycles", "inside the L1"), ("miss_latency_cycles", "beyond the L2"))
    for ax, (col, what) in zip(axes, cells, strict=True):
        m = _matrix(table, col, gpus)
        _heat(ax, m, gpus, f"ld.global.{path} {what}", "cycles (raw)", lat)
    lat.suptitle(f"{device}: P-chase latency, GPU x GPU memory")
    bw, axes = plt.subplots(1, 2, figsize=size, layout="constrained")
    cells = (("read_gbps", "SM-driven reads"), ("copy_gbps", "copy engine"))
    for ax, (col, what) in zip(axes, cells, strict=True):
        m = _matrix(table, col, gpus)
        _heat(ax, m, gpus, f"{what} (peak)", "GB/s", bw, copy=col == "copy_gbps")
    bw.suptitle(f"{device}: link bandwidth, GPU x GPU memory")
    return {LATENCY: lat, BANDWIDTH: bw, STREAMS: _streams(table, device)}
