"""L2 footprint sweep figures: latency against footprint with the levels the analysis read,
and the per-access latency distribution of each plateau."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from . import set_theme, size_axis, size_text


def _plateau_of(sizes: pd.Series, plateaus: list[dict]) -> pd.Series:
    """The role of the plateau each footprint belongs to (from the result document)."""
    role = pd.Series(pd.NA, index=sizes.index, dtype="object")
    for p in plateaus:
        inside = sizes.between(p["first_footprint_bytes"], p["last_footprint_bytes"])
        role[inside] = p["role"]
    return role


def plot_l2(data: pd.DataFrame, doc: dict) -> dict:
    set_theme()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    s = (
        data.groupby("array_bytes")["latency_cycles"]
        .agg(
            median="median", p10=lambda x: np.percentile(x, 10), p90=lambda x: np.percentile(x, 90)
        )
        .reset_index()
    )
    x = s["array_bytes"]
    a.plot(x, s["median"], marker="o", label="median")
    a.fill_between(x, s["p10"], s["p90"], alpha=0.25, label="10-90th percentile")
    # the sizes the analysis reports, where it reports them (a step it read elsewhere, e.g. a
    # size found by the miss test below the change point, does not move the line)
    reported = doc.get("elements", {}).get("l2", {})
    for key, what, ls in (
        ("near_size_bytes", "near partition", ":"),
        ("size_bytes", "L2 size", "--"),
    ):
        size = (reported.get(key) or {}).get("value")
        if size:
            a.axvline(size, ls=ls, lw=1, color="k", label=f"reported {what} {size_text(size)}")
    # the levels the analysis reports, each over the footprints of its plateau
    plateaus = doc.get("plateaus", [])
    for p in plateaus:
        lo, hi = p["first_footprint_bytes"], p["last_footprint_bytes"]
        a.hlines(p["median_cycles"], lo, hi, colors="C3", lw=2, gid="plateau median levels")
        a.annotate(
            f"{p['role']} {p['median_cycles']:.0f}",
            (lo, p["median_cycles"]),
            textcoords="offset points",
            xytext=(0, 6),
            fontsize=8,
            color="C3",
        )
    a.set(
        xscale="log",
        xlabel="footprint (binary units)",
        ylabel="latency (cycles)",
        title="latency against footprint",
    )
    size_axis(a.xaxis)  # labels on powers of two only: labelled minor ticks overlapped
    a.legend(fontsize=8)
    if plateaus:
        shown = data.assign(plateau=_plateau_of(data["array_bytes"], plateaus))
        # rare timing outliers (hundreds of cycles slow) would squeeze the levels to the left
        lo = float(data["latency_cycles"].min())
        hi = float(np.quantile(data["latency_cycles"], 0.995))
        sns.histplot(
            shown.dropna(subset=["plateau"]),
            x="latency_cycles",
            hue="plateau",
            hue_order=list(dict.fromkeys(p["role"] for p in plateaus)),
            bins=80,
            binrange=(lo, max(hi, lo + 1)),
            element="step",
            ax=b,
        )
        b.set(
            xlabel="latency (cycles)",
            title="per-access latency by plateau (to the 99.5th percentile)",
        )
    else:
        first = doc["steps"][0]["footprint_before_bytes"] if doc.get("steps") else None
        fits = data if first is None else data[data["array_bytes"] <= first]
        sns.histplot(fits["latency_cycles"], bins=80, ax=b)
        b.set(xlabel="latency (cycles)", title="per-access latency, footprints that fit")
    fig.suptitle(f"{doc['device']}: L2 footprint sweep ({doc['path']} path)")
    return {"l2_footprint": fig}
