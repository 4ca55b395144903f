"""Figures of the outstanding-request families (Lashgar et al.): Thread-Latency plots (latency
and its 3-point variance on twin axes, one panel per N, one figure per pattern) and the L2 flush
plot (Fig. 2)."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import EngFormatter

from . import set_theme

PATTERNS = ("unq", "merger2", "merger4", "merger8", "merger16", "merger32")
REQUEST_FIGURES = tuple(f"requests_{p}" for p in PATTERNS)
L2_FIGURES = ("l2_flush",)


def _label(pattern: str) -> str:
    return "UNQ" if pattern == "unq" else f"Merger{pattern[6:]}"


def plot_thread_latency(table: pd.DataFrame, sweeps: list[dict], *, pattern: str, title: str):
    """One panel per N: latency (left axis) and 3-point variance (right axis) against threads;
    the saturation spike (last thread count before the rise) marked with a dashed line.

    `table`: columns pattern, loads_per_thread, threads, latency_cycles, variance_cycles2 (the
    analysis's table); `sweeps`: the result document's sweep entries."""
    set_theme()
    df = table[table["pattern"] == pattern]
    ns = sorted(df["loads_per_thread"].unique())
    rows = max(len(ns), 1)
    height = 2.6 * rows
    fig, axes = plt.subplots(rows, 1, figsize=(7.5, height), squeeze=False)
    # fixed margins (in inches, converted to figure fractions): a constrained layout of these
    # twin-axis panels costs more than drawing them. The figure's title hangs 0.1 in below the
    # top edge and the first panel's title sits below it; as fractions of the figure, a title
    # at matplotlib's default place would fall on that panel's title in a tall figure.
    fig.subplots_adjust(
        left=0.11, right=0.88, top=1 - 0.85 / height, bottom=0.5 / height, hspace=0.62
    )
    axes = axes[:, 0]
    if not ns:
        axes[0].text(0.5, 0.5, f"{_label(pattern)} not swept", ha="center", va="center")
        axes[0].set_axis_off()
    for ax, n in zip(axes, ns, strict=False):
        s = df[df["loads_per_thread"] == n].sort_values("threads")
        ax.plot(s["threads"], s["latency_cycles"], color="C0", lw=1.2, label="latency")
        ax.set_ylabel("latency (cycles)", color="C0")
        ax2 = ax.twinx()
        ax2.plot(s["threads"], s["variance_cycles2"], color="C3", lw=0.9, label="variance")
        ax2.set_ylabel("variance (cycles²)", color="C3")
        # "1.5M", not a "1e6" over the axis, which a reader takes for a tick
        ax2.yaxis.set_major_formatter(EngFormatter(sep=""))
        ax2.grid(False)
        info = next(
            (w for w in sweeps if w["pattern"] == pattern and w["loads_per_thread"] == n), None
        )
        sat = None if info is None else info.get("saturation_threads")
        repeats = ((info or {}).get("repeats") or {}).get("text")
        if info is not None and info.get("too_few_thread_counts") is not None:
            text = "too few thread counts to read"
        elif info is not None and info.get("undetermined"):
            # no reading held by a majority of the repeats (analysis.requests.request_repeats)
            text = "the repeats' readings differ"
        elif sat is not None:
            ax.axvline(sat, ls="--", lw=1, color="k", gid="saturation spike")
            text = f"saturation at {sat} threads"
        else:
            text = f"no saturation up to {int(s['threads'].max())} threads"
        if repeats:
            text += f" ({repeats})"
        ax.set_title(f"{_label(pattern)}, N = {n}: {text}", fontsize=9)
        ax.set_xlabel("threads")
    fig.suptitle(title, y=1 - 0.1 / height, va="top")
    return fig, axes


def plot_requests(data: pd.DataFrame, doc: dict, *, table: pd.DataFrame) -> dict:
    """The requests family's figures, by file stem (`table`: the analysis's Thread-Latency
    table)."""
    out = {}
    for pattern in PATTERNS:
        fig, _ = plot_thread_latency(
            table,
            doc.get("sweeps", []),
            pattern=pattern,
            title=f"{doc['device']}: Thread-Latency, {_label(pattern)}",
        )
        out[f"requests_{pattern}"] = fig
    return out


def plot_l2_flush_gap(
    table: pd.DataFrame, *, size_bytes: int | None, title: str, undetermined: str | None = None
):
    """Copy time with and without a flushed L2 (left) and their gap (right) against the size;
    where no size is marked, the gap panel says why (`undetermined`)."""
    set_theme()
    fig, (ax, ax_gap) = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
    kib = table["size_bytes"] / 1024
    ax.plot(kib, table["unflushed_ms"] * 1e3, marker="o", ms=2.5, label="not flushed")
    ax.plot(kib, table["flushed_ms"] * 1e3, marker="o", ms=2.5, label="flushed")
    ax.set(xlabel="copy size (KiB)", ylabel="kernel time (µs)", title="copy time")
    ax.legend()
    ax_gap.plot(kib, table["gap_ms"] * 1e3, marker="o", ms=2.5, color="C2")
    ax_gap.set(xlabel="copy size (KiB)", ylabel="flushed - not flushed (µs)", title="gap")
    for a in (ax, ax_gap):
        if size_bytes is not None:
            a.axvline(size_bytes / 1024, ls="--", lw=1, color="k", gid="L2 size estimate")
    if size_bytes is None:
        why = f"no L2 size marked: {undetermined}" if undetermined else "no L2 size marked"
        ax_gap.text(0.02, 0.98, textwrap.fill(why, 60), ha="left", va="top", fontsize=7,
                    color="dimgrey", transform=ax_gap.transAxes, gid="note")  # fmt: skip
    fig.suptitle(title)
    return fig, (ax, ax_gap)


def plot_l2_flush(data: pd.DataFrame, doc: dict, *, table: pd.DataFrame) -> dict:
    """The l2_flush figure (`table`: the analysis's per-size medians and gap)."""
    q = doc["elements"]["l2"]["size_bytes"]
    size = q.get("value")
    note = f"L2 estimate {size / 1024:g} KiB" if size else "L2 size undetermined"
    fig, _ = plot_l2_flush_gap(
        table,
        size_bytes=size,
        title=f"{doc['device']}: L2 flush copy ({note})",
        undetermined=q.get("undetermined"),
    )
    return {"l2_flush": fig}
