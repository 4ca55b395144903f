"""Timing-overhead figure: per path, the raw per-access latencies against the latency per load
of the chains timed as a whole, and the parts of the raw latency the analysis found."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from . import placeholder, set_theme

FIGURE = "timing_overhead"
PARTS = (
    ("load_to_use_latency_cycles", "load (pointer chase)"),
    ("index_arithmetic_cycles", "index arithmetic"),
    ("store_clock_cycles", "window's store + clock read"),
)


def _value(q: dict | None) -> float:
    return float(q["value"]) if q and q.get("value") is not None else 0.0


def plot_timing_overhead(data: pd.DataFrame, doc: dict) -> dict:
    paths = list(doc.get("paths") or {})
    if not paths:
        fig, _ = placeholder("timing overhead", "no load path measured")
        return {FIGURE: fig}
    set_theme()
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
    for i, path in enumerate(paths):
        raw = data.loc[(data["kind"] == "window") & (data["path"] == path), "cycles"]
        lo, hi = np.percentile(raw, [0.5, 99.5]) if len(raw) else (0, 1)
        bins = np.arange(np.floor(lo) - 0.5, np.ceil(hi) + 1.5)
        # no edges: the theme's white edges wash out bins a pixel or two wide
        a.hist(raw.clip(lo, hi), bins=bins, alpha=0.6, color=f"C{i}", lw=0, label=f"{path}: raw")
        q = doc["paths"][path]
        for name, ls, what in (
            ("index_chase_latency_cycles", ":", "index chase"),
            ("load_to_use_latency_cycles", "--", "pointer chase"),
        ):
            if q[name].get("value") is not None:
                a.axvline(q[name]["value"], color=f"C{i}", ls=ls, lw=1.2, gid=f"{path}: {what}")
    a.set(
        xlabel="cycles",
        ylabel="timed accesses",
        title="raw accesses; per load: dotted index, dashed pointer chase",
    )
    a.legend(fontsize=7)
    bottom = np.zeros(len(paths))
    for k, (name, label) in enumerate(PARTS):
        heights = np.array([_value(doc["paths"][p].get(name)) for p in paths])
        b.bar(paths, heights, bottom=bottom, color=f"C{k + 3}", label=label)
        bottom += heights
    for x, p in enumerate(paths):
        raw_q = doc["paths"][p].get("raw_latency_cycles") or {}
        if raw_q.get("value") is not None:
            b.plot([x - 0.4, x + 0.4], [raw_q["value"]] * 2, color="k", lw=1.5, gid="raw latency")
    b.set(ylabel="cycles", title="raw latency (black) and its parts")
    b.legend(fontsize=7)
    fig.suptitle(f"{doc.get('device', '')}: timing overhead of the timed window (TPDS Sec. 4.2)")
    return {FIGURE: fig}
