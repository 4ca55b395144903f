"""Figures of the TLB and latency-pattern families: TPDS Fig. 10 (misses against array size as
the L2 TLB overflows, one set at a time) and TPDS Fig. 14 (latency of the six patterns)."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from . import set_theme

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
            ax.set(title=label)
            continue
        if rows.empty or page is None or column not in rows or rows[column].isna().all():
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
            ax.set(title=label)
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
            ax.axvline(entries * page / MIB, color="grey", lw=0.8, ls=":")
        ax.set(
            title=f"{label}: ways {ways}" if ways else label,
            xlabel="array size (MiB), one element per page",
            ylabel="missed entries per traversal",
        )
        ax.legend(fontsize=8)
    fig.suptitle(title)
    return fig, axes


def plot_tlb_reach(doc: dict, *, title: str):
    """First-miss array size N*(s) against stride: flat up to the page, then growing."""
    set_theme()
    rows = pd.DataFrame(doc.get("reach") or [])
    paired = pd.DataFrame(doc.get("reach_paired") or [])
    fig, ax = plt.subplots(figsize=(5.2, 3.6), layout="constrained")
    if not rows.empty and rows["fit_bytes"].notna().any():
        r = rows.dropna(subset=["fit_bytes"])
        label = "L2 TLB (threshold reading)" if not paired.empty else "threshold reading"
        ax.plot(r["stride_bytes"] / 1024, r["fit_bytes"] / MIB, marker="o", label=label)
    if not paired.empty:
        fit = paired["fit_elements"] * paired["stride_bytes"]
        ax.plot(
            paired["stride_bytes"] / 1024, fit / MIB, marker="s", label="L1 TLB (paired reading)"
        )
    if (not rows.empty and rows["fit_bytes"].notna().any()) or not paired.empty:
        ax.set(xscale="log", yscale="log")
        for element, ls in (("l1_tlb", ":"), ("l2_tlb", "--")):
            q = doc.get("elements", {}).get(element, {}).get("page_bytes") or {}
            if q.get("value"):
                ax.axvline(
                    q["value"] / 1024,
                    color="grey",
                    ls=ls,
                    lw=1,
                    label=f"{element} page {q['value'] // 1024} KiB",
                )
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "no TLB miss in the sweep", ha="center", transform=ax.transAxes)
    ax.set(xlabel="stride (KiB)", ylabel="largest array without a TLB miss (MiB)", title=title)
    return fig, ax


def _undetermined_notes(ax, doc: dict, paths: list[str], patterns: list[str], width: float):
    """An empty bar slot says why it is empty: the analysis's reason, written up the slot (once
    for the pattern where every path gives the same reason)."""
    for j, p in enumerate(patterns):
        why = {
            path: (doc["paths"][path].get(p) or {}).get("undetermined") or "not measured"
            for path in paths
            if (doc["paths"][path].get(p) or {}).get("value") is None
        }
        if not why:
            continue
        if len(why) == len(paths) and len(set(why.values())) == 1:
            spots = [(j, next(iter(why.values())), 0.8)]
        else:
            spots = [
                (j + (paths.index(path) - (len(paths) - 1) / 2) * width, f"{path}: {r}", width)
                for path, r in why.items()
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
        ax.bar(x, [m or 0 for m in med], width, label=f"{path} path")
        sub = table[table["path"] == path] if not table.empty else table
        for xi, p in zip(x, patterns, strict=True):
            lat = sub.loc[sub["pattern"] == p, "latency_cycles"] if not sub.empty else []
            if len(lat):
                lo, hi = np.percentile(lat, [5, 95])
                ax.plot([xi, xi], [lo, hi], color="black", lw=1, gid="5-95th percentile")
        for xi, m in zip(x, med, strict=True):
            if m:
                ax.text(xi, m, f"{m:.0f}", ha="center", va="bottom", fontsize=7)
    _undetermined_notes(ax, doc, paths, patterns, width)
    ax.set_xticks(np.arange(len(patterns)), patterns)
    ax.set(xlabel="access pattern", ylabel="median latency (cycles)", title=title)
    ax.legend(fontsize=8)
    return fig, ax


def plot_tlbs(data: pd.DataFrame, doc: dict) -> dict:
    """The tlbs family's figures, by file stem."""
    device = doc["device"]
    misses, _ = plot_tlb_misses(doc, title=f"{device}: TLB misses past the reach (TPDS Fig. 10)")
    reach, _ = plot_tlb_reach(doc, title=f"{device}: TLB reach by stride")
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
