"""Figures of the TLB and latency-pattern families: TPDS Fig. 10 (misses against array size as
the L2 TLB overflows, one set at a time) and TPDS Fig. 14 (latency of the six patterns)."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from . import set_theme, size_axis, size_text

MIB = 2**20


def fitted_misses(extra_pages: int, ways: list[int]) -> int:
    """Missed entries per traversal of the model the analysis fits (TPDS Fig. 10): the sets
    overflow one per extra page in the order found, every page of an overflowing LRU set
    misses (ways + 1), and past the last set each extra page adds one miss."""
    if extra_pages <= 0:
        return 0
    full = min(extra_pages, len(ways))
    return sum(w + 1 for w in ways[:full]) + max(0, extra_pages - len(ways))


def _model_label(ways: list[int]) -> str:
    if len(ways) == 1:
        return f"fitted: 1 set of {ways[0]} ways (LRU)"
    return f"fitted: {len(ways)} sets of {'/'.join(map(str, ways))} ways (LRU)"


def _why_no_misses(doc: dict, rows: pd.DataFrame, page, name: str, column: str) -> str:
    """What an empty misses panel says instead of data."""
    if page is None:
        why = (doc.get("elements", {}).get("l2_tlb", {}).get("page_bytes") or {}).get(
            "undetermined"
        )
        return f"page undetermined: {why}" if why else "page undetermined"
    if rows.empty:
        return "no stride = page walks in the trace"
    return f"no {name.upper()} TLB misses counted in the stride = page walks"


def plot_tlb_misses(doc: dict, *, title: str):
    """Misses per traversal of the stride = page walks against array size (TPDS Fig. 10), for
    the L1 and L2 TLB, with the misses of the set structure the analysis fitted dashed."""
    set_theme()
    rows = pd.DataFrame(doc.get("pages") or [])
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
    # the stride = page walks run at the page of the level the threshold reading found
    page = (doc.get("elements", {}).get("l2_tlb", {}).get("page_bytes") or {}).get("value")
    for ax, name, label in ((axes[0], "l1", "L1 TLB"), (axes[1], "l2", "L2 TLB")):
        column = f"{name}_misses"
        if name == "l1" and doc.get("reach_paired"):
            ax.text(
                0.5,
                0.5,
                "read address by address\n(its penalty hides in the data latencies):\n"
                "see the reach figure",
                ha="center",
                va="center",
                transform=ax.transAxes,
            )
            ax.set(title=label, xticks=[], yticks=[])
            continue
        if rows.empty or page is None or column not in rows or rows[column].isna().all():
            ax.text(
                0.5,
                0.5,
                textwrap.fill(_why_no_misses(doc, rows, page, name, column), 50),
                ha="center",
                va="center",
                fontsize=8,
                transform=ax.transAxes,
            )
            ax.set(title=label, xticks=[], yticks=[])
            continue
        entries = (doc["elements"][f"{name}_tlb"].get("entries") or {}).get("value")
        r = rows.dropna(subset=[column]).sort_values("elements")
        if entries is not None:  # the interesting part: just past the reach
            r = r[(r["elements"] >= entries - 2) & (r["elements"] <= entries + 16)]
        size = r["elements"] * page / MIB
        ax.plot(size, r[column], marker="o", ms=4, label="measured")
        ways = (doc["elements"][f"{name}_tlb"].get("ways_per_set") or {}).get("value")
        if entries and ways:
            model = [fitted_misses(int(m) - entries, ways) for m in r["elements"]]
            ax.plot(size, model, ls="--", lw=1, label=_model_label(ways))
        if entries:
            ax.axvline(
                entries * page / MIB,
                color="grey",
                lw=0.8,
                ls=":",
                label=f"reach: {entries} entries",
            )
        if not ways:  # the caption's fitted misses are not drawn: say so, and why
            ax.text(
                0.98,
                0.04,
                f"no set structure fitted:\n{name.upper()} TLB ways undetermined",
                ha="right",
                va="bottom",
                fontsize=7,
                color="dimgrey",
                transform=ax.transAxes,
                gid="note",
            )
        ax.set(
            title=f"{label}: ways {ways}" if ways else label,
            xlabel="array size (MiB), one element per page",
            ylabel="missed entries per traversal",
        )
        ax.legend(fontsize=8)
    fig.suptitle(title)
    return fig, axes


def plot_tlb_reach(data: pd.DataFrame, doc: dict, *, title: str):
    """Mean latency against array size of the reach walks (TPDS Fig. 9), one line per stride;
    the reach each TLB level was reported with (entries x page) marked."""
    set_theme()
    reach = data[data["stage"] == "reach"] if "stage" in data else data.iloc[:0]
    fig, ax = plt.subplots(figsize=(6.4, 3.8), layout="constrained")
    if reach.empty:
        ax.text(0.5, 0.5, "no reach walks in the trace", ha="center", transform=ax.transAxes)
        ax.set(title=title)
        return fig, ax
    means = reach.groupby(["stride_bytes", "array_bytes"])["latency_cycles"].mean()
    for stride, line in means.groupby(level="stride_bytes"):
        sizes = line.index.get_level_values("array_bytes")
        ax.plot(sizes, line.values, marker="o", ms=2, lw=1, label=f"stride {size_text(stride)}")
    elements = doc.get("elements", {})
    for element, what, ls in (("l1_tlb", "L1 TLB", ":"), ("l2_tlb", "L2 TLB", "--")):
        page = (elements.get(element, {}).get("page_bytes") or {}).get("value")
        entries = (elements.get(element, {}).get("entries") or {}).get("value")
        if page and entries:
            ax.axvline(
                entries * page,
                color="k",
                ls=ls,
                lw=1,
                label=f"{what} reach {size_text(entries * page)} "
                f"({entries} x {size_text(page)} pages)",
            )
    ax.set_xscale("log")
    size_axis(ax.xaxis)
    ax.set(xlabel="array size (binary units)", ylabel="mean latency (cycles)", title=title)
    ax.legend(fontsize=7)
    return fig, ax


def _undetermined(doc: dict, path: str, pattern: str) -> str | None:
    """Why a path's pattern has no median (None where it has one)."""
    q = doc["paths"][path].get(pattern) or {}
    return None if q.get("value") is not None else q.get("undetermined") or "not measured"


def _undetermined_notes(ax, doc: dict, paths: list[str], patterns: list[str], width: float):
    """An empty bar slot says why it is empty: the analysis's reason, written up the slot (once
    for the pattern where every path gives the same reason, once for the panel where every
    pattern does)."""
    why = {(path, p): _undetermined(doc, path, p) for path in paths for p in patterns}
    reasons = set(why.values())
    if paths and None not in reasons and len(reasons) == 1:
        note = f"{patterns[0]}-{patterns[-1]} undetermined: {reasons.pop()}"
        ax.text(0.5, 0.5, textwrap.fill(note, 70), ha="center", va="center", fontsize=8,
                color="dimgrey", transform=ax.transAxes, gid="note")  # fmt: skip
        return
    for j, p in enumerate(patterns):
        empty = {path: why[path, p] for path in paths if why[path, p] is not None}
        if not empty:
            continue
        if len(empty) == len(paths) and len(set(empty.values())) == 1:
            spots = [(j, next(iter(empty.values())), 0.8)]
        else:
            spots = [
                (j + (paths.index(path) - (len(paths) - 1) / 2) * width, f"{path}: {r}", width)
                for path, r in empty.items()
            ]
        for x, reason, room in spots:
            ax.text(
                x,
                0.5,
                textwrap.fill(f"{p} undetermined: {reason}", 48 if room > 0.5 else 40),
                rotation=90,
                ha="center",
                va="center",
                fontsize=7,
                color="dimgrey",
                transform=ax.get_xaxis_transform(),
                gid="note",
            )


def plot_latency_patterns(table: pd.DataFrame, doc: dict, *, title: str):
    """Median latency per pattern and path (TPDS Fig. 14), with the spread of the accesses; a
    pattern without a median says why in its slot."""
    set_theme()
    paths = list(doc.get("paths", {}))
    fig, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
    patterns = ["P1", "P2", "P3", "P4", "P5", "P6"]
    width = 0.8 / max(len(paths), 1)
    for k, path in enumerate(paths):
        med = [(doc["paths"][path].get(p) or {}).get("value") for p in patterns]
        x = np.arange(len(patterns)) + (k - (len(paths) - 1) / 2) * width
        shown = [(xi, m) for xi, m in zip(x, med, strict=True) if m is not None]
        if shown:  # a path without any median has no bars, and no legend entry
            xs, ms = zip(*shown, strict=True)
            ax.bar(xs, ms, width, color=f"C{k}", label=f"{path} path")
        sub = table[table["path"] == path] if not table.empty else table
        for xi, p, m in zip(x, patterns, med, strict=True):
            lat = sub.loc[sub["pattern"] == p, "latency_cycles"] if not sub.empty else []
            top = m
            if m is not None and len(lat):
                lo, hi = np.percentile(lat, [5, 95])
                ax.plot([xi, xi], [lo, hi], color="black", lw=1, gid="5-95th percentile")
                top = max(m, hi)
            if m:  # the value above its whisker, where the whisker does not cross it
                ax.text(xi, top, f"{m:.0f}", ha="center", va="bottom", fontsize=7)
    _undetermined_notes(ax, doc, paths, patterns, width)
    ax.set_xticks(np.arange(len(patterns)), patterns)
    ax.set_xlim(-0.5, len(patterns) - 0.5)
    ax.set(xlabel="access pattern", ylabel="median latency (cycles)", title=title)
    if ax.containers:
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    else:
        ax.set_yticks([])
    return fig, ax


def plot_tlbs(data: pd.DataFrame, doc: dict) -> dict:
    """The tlbs family's figures, by file stem."""
    device = doc["device"]
    misses, _ = plot_tlb_misses(doc, title=f"{device}: TLB misses past the reach (TPDS Fig. 10)")
    reach, _ = plot_tlb_reach(data, doc, title=f"{device}: latency against array size by stride")
    return {"tlbs_set_misses": misses, "tlbs_reach": reach}


def plot_patterns(data: pd.DataFrame, doc: dict, *, table: pd.DataFrame) -> dict:
    """The latency_patterns family's figure, by file stem (`table`: the analysis's classified
    latencies)."""
    fig, _ = plot_latency_patterns(
        table,
        doc,
        title=f"{doc['device']}: global-memory latency patterns (TPDS Fig. 14)",
    )
    return {"latency_patterns": fig}
