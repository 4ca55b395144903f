"""Figures of the fill / disturb / re-walk families (Größler's thesis, Sec. 4.5 and 4.6):
the sharing matrix (misses of A's re-walk per pair of paths) and the per-warp disturbance
flow (the thesis's Figs. 4.21-4.26, in misses rather than mean latency)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from . import placeholder, set_theme

SHARING_FIGURES = ("cache_sharing_matrix",)
INSTANCES_FIGURES = ("cache_instances_warps",)
SHARED, APART = "#d62728", "#1f77b4"


def plot_sharing(data: pd.DataFrame, doc: dict) -> dict:
    """Share of A's re-walk that missed, per (A's path, B's path); the baseline on the diagonal."""
    pairs = doc.get("pairs") or []
    if not pairs:
        fig, _ = placeholder("cache sharing", "fewer than two paths with a cache of their own")
        return {SHARING_FIGURES[0]: fig}
    set_theme()
    paths = sorted({p["path_a"] for p in pairs} | {p["path_b"] for p in pairs})
    m = np.full((len(paths), len(paths)), np.nan)
    for p in pairs:
        i, j = paths.index(p["path_a"]), paths.index(p["path_b"])
        m[i, j] = p["misses_disturbed"] / p["accesses_disturbed"]
        m[i, i] = p["misses_baseline"] / p["accesses_baseline"]
    fig, ax = plt.subplots(figsize=(1.3 * len(paths) + 2.5, 1.1 * len(paths) + 1.5))
    im = ax.imshow(m, vmin=0, vmax=1, cmap="viridis")
    for p in pairs:
        i, j = paths.index(p["path_a"]), paths.index(p["path_b"])
        mark = "one cache" if p["disturbed"] else "apart"
        ax.text(j, i, f"{m[i, j]:.2f}\n{mark}", ha="center", va="center", fontsize=8,
                color="k" if m[i, j] > 0.5 else "w")  # fmt: skip
    for i in range(len(paths)):
        ax.text(i, i, f"{m[i, i]:.2f}\nbaseline", ha="center", va="center", fontsize=8, color="w")
    ax.set_xticks(range(len(paths)), paths)
    ax.set_yticks(range(len(paths)), paths)
    ax.set_xlabel("thread B's path (walks between A's fill and re-walk)")
    ax.set_ylabel("thread A's path (timed re-walk)")
    ax.grid(False)
    fig.colorbar(im, ax=ax, label="share of A's re-walk that missed")
    ax.set_title(f"{doc.get('device', '')}: cache sharing (Thesis Sec. 4.5)")
    fig.tight_layout()
    return {SHARING_FIGURES[0]: fig}


def plot_instances(data: pd.DataFrame, doc: dict) -> dict:
    """Per path, the share of the base thread's re-walk that missed against the test warp."""
    elements = {k: v for k, v in (doc.get("elements") or {}).items() if v.get("warps")}
    if not elements:
        fig, _ = placeholder("caches per SM", "no path with a cache of its own")
        return {INSTANCES_FIGURES[0]: fig}
    set_theme()
    fig, axes = plt.subplots(
        1, len(elements), figsize=(3.6 * len(elements), 3.0), squeeze=False, layout="constrained"
    )
    for ax, (name, el) in zip(axes[0], elements.items(), strict=True):
        tests = el["warps"]
        warps = [t["warp"] for t in tests]
        share = [t["misses_disturbed"] / t["accesses_disturbed"] for t in tests]
        for shared, label, color in (
            (True, "shares warp 0's copy", SHARED),
            (False, "apart", APART),
        ):
            sel = [i for i, t in enumerate(tests) if t["disturbed"] == shared]
            if not sel:  # no legend entry for bars the panel does not draw
                continue
            # an edge of the bar's colour: a warp whose re-walk missed nothing still shows, as
            # a flat bar on the zero line
            ax.bar(
                [warps[i] for i in sel],
                [share[i] for i in sel],
                color=color,
                edgecolor=color,
                linewidth=2,
                label=label,
            )
        base = tests[0]["misses_baseline"] / tests[0]["accesses_baseline"]
        ax.axhline(base, color="k", ls="--", lw=0.8, label="baseline")
        q = el["instances_per_sm"]
        n = q.get("value") if q.get("value") is not None else f">= {q.get('lower_bound', '?')}"
        ax.set_title(f"{name} ({el['path']}): {n} per SM", fontsize=9)
        ax.set_xlabel("test thread's warp")
        ax.set_ylim(-0.05, 1.3)  # the zero line clear of the axis; the legend above the bars
        ax.set_xticks(warps)
        ax.legend(loc="upper center", ncol=3, fontsize=6, handlelength=1)
    axes[0][0].set_ylabel("share of warp 0's re-walk missed")
    fig.suptitle(f"{doc.get('device', '')}: caches per SM (Thesis Sec. 4.6)")
    return {INSTANCES_FIGURES[0]: fig}
