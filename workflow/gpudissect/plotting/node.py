"""Node figures: GPU x GPU heat maps of the peer latency and the link bandwidth, drawn from the
tidy table the node analysis writes (one row per ordered pair, the diagonal a GPU's own
memory)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from . import placeholder, set_theme

LATENCY, BANDWIDTH = "node_latency", "node_bandwidth"


def _matrix(table: pd.DataFrame, column: str, gpus: list[int]) -> np.ndarray:
    m = np.full((len(gpus), len(gpus)), np.nan)
    pos = {g: i for i, g in enumerate(gpus)}
    for row in table.itertuples():
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


def plot_node(data: pd.DataFrame, doc: dict, *, table: pd.DataFrame) -> dict:
    if table.empty:
        return {
            LATENCY: placeholder("node latency", "no pair of GPUs measured")[0],
            BANDWIDTH: placeholder("node bandwidth", "no pair of GPUs measured")[0],
        }
    set_theme()
    gpus = sorted({*table["src_gpu"], *table["dst_gpu"]})
    device = doc.get("device", "")
    size = (4.6 * 2 + 1, 4.2)
    lat, axes = plt.subplots(1, 2, figsize=size, layout="constrained")
    cells = (("hit_latency_cycles", "inside the L1"), ("miss_latency_cycles", "beyond the L2"))
    for ax, (col, what) in zip(axes, cells, strict=True):
        _heat(ax, _matrix(table, col, gpus), gpus, f"ld.global.cg {what}", "cycles (raw)", lat)
    lat.suptitle(f"{device}: P-chase latency, GPU x GPU memory")
    bw, axes = plt.subplots(1, 2, figsize=size, layout="constrained")
    cells = (("read_gbps", "SM-driven reads"), ("copy_gbps", "copy engine"))
    for ax, (col, what) in zip(axes, cells, strict=True):
        m = _matrix(table, col, gpus)
        _heat(ax, m, gpus, f"{what} (peak)", "GB/s", bw, copy=col == "copy_gbps")
    bw.suptitle(f"{device}: link bandwidth, GPU x GPU memory")
    return {LATENCY: lat, BANDWIDTH: bw}
