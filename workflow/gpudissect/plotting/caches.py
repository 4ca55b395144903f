"""Figures of the two-stage fine-grained P-chase: stage-1 size sweeps, stage-2 set overflow
(TPDS Fig. 10 style: missing lines against extra lines) and the per-way replacement
reconstruction (TPDS Fig. 11 replica)."""

from __future__ import annotations

import math
import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from . import placeholder, set_theme

STAGE1_FIGURES = ("cache_stage1_sweeps",)
CACHES_FIGURES = ("caches_sets", "caches_replacement")


def _grid(n: int, *, width: float = 4.2, height: float = 3.0):
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(width * cols, height * rows), squeeze=False, layout="constrained"
    )
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def plot_stage1(data: pd.DataFrame, doc: dict) -> dict:
    """Mean latency against array size per (path, level), the measured size marked."""
    size = data[data["phase"] == "size"] if len(data) else data
    if size.empty:
        return {STAGE1_FIGURES[0]: placeholder("cache stage 1", "no load path measured")[0]}
    set_theme()
    pairs = size[["path", "level"]].drop_duplicates()
    keys = sorted({(p, int(lv)) for p, lv in zip(pairs["path"], pairs["level"], strict=True)})
    fig, axes = _grid(len(keys))
    for ax, (path, level) in zip(axes, keys, strict=True):
        rows = size[(size["path"] == path) & (size["level"] == level)]
        g = rows.groupby("array_bytes")["latency_cycles"].mean()
        ax.plot(g.index / 1024, g.values, marker="o", markersize=2.5, lw=1)
        lv = next(
            (x for x in doc["paths"].get(path, {}).get("levels", []) if x["level"] == level), {}
        )
        c = lv.get("size_bytes", {}).get("value")
        if c:
            ax.axvline(c / 1024, color="k", ls="--", lw=0.8, label=f"C = {c / 1024:g} KiB")
            ax.legend(loc="best", fontsize=7)  # a fixed corner fell on the rise or the mark
        elif not lv.get("served_by"):  # the prose speaks of a marked size: say why there is none
            why = lv.get("size_bytes", {}).get("undetermined")
            note = f"no size marked: {why}" if why else "no size marked"
            ax.text(0.03, 0.95, textwrap.fill(note, 55), ha="left", va="top", fontsize=7,
                    color="dimgrey", transform=ax.transAxes, gid="note")  # fmt: skip
        served = lv.get("served_by")
        if served:
            # no cache of this level on the path: its accesses hit the named one, and the
            # flat line's noise (a fraction of a cycle) is drawn on a span of 10% of its level
            ax.set_title(f"{path} level {level}: served by the {served}", fontsize=9)
            mid = float(np.median(g.values))
            if float(np.ptp(g.values)) < 0.1 * abs(mid):
                ax.set_ylim(0.95 * mid, 1.05 * mid)
        else:
            ax.set_title(f"{path} level {level} ({lv.get('element', '?')})", fontsize=9)
        ax.set_xlabel("array size (KiB)")
        ax.set_ylabel("mean latency (cycles)")
    fig.suptitle(f"{doc['device']}: stage-1 size search per load path")
    return {STAGE1_FIGURES[0]: fig}


def plot_caches(data: pd.DataFrame, doc: dict) -> dict:
    details = doc.get("details", {})
    return {
        "caches_sets": _sets_figure(details, doc["device"]),
        "caches_replacement": _replacement_figure(details, doc),
    }


def _sets_figure(details: dict, device: str):
    names = [n for n, d in details.items() if d.get("misses_per_k")]
    if not names:
        return placeholder("stage 2 sets", "no cache dissected")[0]
    set_theme()
    fig, axes = _grid(len(names))
    for ax, name in zip(axes, names, strict=True):
        m = details[name]["misses_per_k"]
        k, missing, lines = np.array(m["k"]), np.array(m["missing_lines"]), np.array(m["lines"])
        # the count at k holds from k on: a "mid" step drew every rise half a line early
        ax.step(k, missing, where="post", marker="o", ms=2, label="missing lines")
        ax.plot(k, lines, ls=":", color="grey", label="lines in the array")
        for j, (bk, _) in enumerate(details[name].get("bursts", [])):
            label = "a new set overflows" if j == 0 else "_"
            ax.axvline(bk, color="C3", lw=0.4, alpha=0.5, label=label)
        ax.set_title(f"{name}: lines missing as sets overflow", fontsize=9)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # k counts lines
        ax.set_xlabel("extra lines k (array C + k b)")
        ax.set_ylabel("lines that miss")
        ax.legend(fontsize=7, loc="lower right")  # upper left hides the array's dotted line
    fig.suptitle(f"{device}: stage 2, lines missing as the array overflows line by line")
    return fig


def _replacement_figure(details: dict, doc: dict):
    names = [n for n, d in details.items() if d.get("replaced_ways")]
    if not names:
        return placeholder("replacement", "no policy walk reconstructed")[0]
    set_theme()
    fig, axes = plt.subplots(
        len(names), 2, figsize=(10, 2.4 * len(names)), squeeze=False, layout="constrained"
    )
    for (ax_seq, ax_bar), name in zip(axes, names, strict=True):
        d = details[name]
        ways = int(d["ways"])
        seq = np.array(d["replaced_ways"][:64])
        ax_seq.scatter(np.arange(seq.size), seq + 1, s=10, marker="s")
        ax_seq.set_ylim(0.5, ways + 0.5)
        for axis in (ax_seq.xaxis, ax_seq.yaxis, ax_bar.xaxis):  # counts and way numbers
            axis.set_major_locator(MaxNLocator(integer=True))
        ax_seq.set_xlabel("miss number (cold walk over ways + 1 lines of one set)")
        ax_seq.set_ylabel("way replaced")
        policy = doc["elements"].get(name, {}).get("policy", {}).get("value")
        ax_seq.set_title(f"{name}: policy {policy or 'undetermined'}", fontsize=9)
        freq = doc["elements"].get(name, {}).get("way_replacement_freq", {}).get("value")
        if freq:
            # no edges: the theme's white edges wash out the bars of a cache of many ways
            ax_bar.bar(np.arange(1, len(freq) + 1), freq, linewidth=0)
            ax_bar.set_xlabel("way")
            ax_bar.set_ylabel("replacement frequency")
        else:
            ax_bar.axis("off")
    fig.suptitle(f"{doc['device']}: which way each miss replaced (TPDS Fig. 11 method)")
    return fig
