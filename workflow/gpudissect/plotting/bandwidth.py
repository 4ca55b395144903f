"""Figures of the bandwidth sweep: streaming GiB/s of each level against CTAs per SM, a panel
per direction (read, write), the interquartile range of the repetitions as error bars and the
theoretical DRAM bandwidth as a horizontal line; and the L1 capacity series, GiB/s against the
footprint per SM, with the L1 size the analysis read from it."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import pandas as pd

from . import set_theme
from .banks import empty_figure

GIB = 2**30
LEVEL_LABELS = {
    "l1": "L1 footprint",
    "l2_near": "near L2 footprint",
    "l2": "L2 footprint (both partitions)",
    "dram": "DRAM footprint",
}
LEVEL_COLOURS = {"l1": "C0", "l2_near": "C4", "l2": "C1", "dram": "C2"}
CAPACITY = "l1_capacity"


def plot_bandwidth_sweep(table: pd.DataFrame, *, ceiling_gbps: float | None, title: str):
    """`table`: the analysis's points (level, direction, ctas_per_sm, gbps, gbps_q25/q75)."""
    set_theme()
    directions = [d for d in ("read", "write") if d in set(table["direction"])]
    fig, axes = plt.subplots(
        1,
        len(directions),
        figsize=(4.6 * len(directions), 3.6),
        squeeze=False,
        layout="constrained",
    )
    scale = 1e9 / GIB
    for ax, direction in zip(axes[0], directions, strict=True):
        d = table[table["direction"] == direction]
        for level in LEVEL_LABELS:
            s = d[d["level"] == level].sort_values("ctas_per_sm")
            if s.empty:
                continue
            y = s["gbps"] * scale
            err = [(s["gbps"] - s["gbps_q25"]) * scale, (s["gbps_q75"] - s["gbps"]) * scale]
            ax.errorbar(
                s["ctas_per_sm"],
                y,
                yerr=err,
                marker="o",
                ms=3,
                capsize=2,
                color=LEVEL_COLOURS[level],
                label=LEVEL_LABELS[level],
            )
        if ceiling_gbps:
            ax.axhline(ceiling_gbps * scale, ls=":", lw=1, color="k", gid="theoretical DRAM")
        ax.set_xscale("log", base=2)
        ax.set(xlabel="CTAs per SM", ylabel="bandwidth (GiB/s)", title=f"{direction}s")
        ax.legend(fontsize=7)
    fig.suptitle(title)
    return fig, axes


def plot_l1_capacity(table: pd.DataFrame, *, size: dict, stage1_bytes: int, title: str):
    """`table`: the capacity series' points (footprint_bytes_per_sm, gbps, quartiles)."""
    set_theme()
    fig, ax = plt.subplots(figsize=(6, 3.6), layout="constrained")
    s = table.sort_values("footprint_bytes_per_sm")
    kib, scale = s["footprint_bytes_per_sm"] / 1024, 1e9 / GIB
    err = [(s["gbps"] - s["gbps_q25"]) * scale, (s["gbps_q75"] - s["gbps"]) * scale]
    ax.errorbar(kib, s["gbps"] * scale, yerr=err, marker="o", ms=3, capsize=2, label="L1 reads")
    if stage1_bytes:
        ax.axvline(stage1_bytes / 1024, ls=":", lw=1, color="k", gid="cache_stage1 L1 size")
    if size.get("value") is not None:
        ax.axvline(size["value"] / 1024, ls="--", lw=1, color="C3", gid="L1 size estimate")
    else:  # the prose speaks of the estimate: say why there is none
        note = f"no L1 size marked: {size.get('undetermined') or 'undetermined'}"
        # lower left: below the L1's plateau, before the rate has fallen
        ax.text(0.02, 0.03, textwrap.fill(note, 42), ha="left", va="bottom", fontsize=6,
                color="dimgrey", transform=ax.transAxes, gid="note")  # fmt: skip
    ax.set(xlabel="footprint per SM (KiB)", ylabel="bandwidth (GiB/s)")
    ax.legend(fontsize=7)
    fig.suptitle(title)
    return fig, ax


def plot_bandwidth(data: pd.DataFrame, doc: dict, *, table: pd.DataFrame) -> dict:
    device = doc["device"]
    if table is None or table.empty:
        reason = doc["elements"]["dram"]["read_bandwidth_gibps"].get("undetermined", "no data")
        return {
            stem: empty_figure(f"{device}: bandwidth", reason)[0]
            for stem in ("bandwidth_ctas", "bandwidth_l1_capacity")
        }
    ceiling = doc.get("dram_theoretical_gbps")
    levels = table[table["level"] != CAPACITY]
    fig, _ = plot_bandwidth_sweep(
        levels, ceiling_gbps=ceiling, title=f"{device}: streaming bandwidth per level"
    )
    out = {"bandwidth_ctas": fig}
    capacity = table[table["level"] == CAPACITY]
    size = doc["elements"].get("l1d", {}).get("size_bytes")
    if capacity.empty or size is None:
        reason = "no L1 capacity series was run (it needs cache_stage1's L1 size)"
        out["bandwidth_l1_capacity"] = empty_figure(f"{device}: L1 capacity", reason)[0]
    else:
        note = f"{size['value']} B" if size.get("value") is not None else "undetermined"
        out["bandwidth_l1_capacity"] = plot_l1_capacity(
            capacity,
            size=size,
            stage1_bytes=(doc.get("footprints") or {}).get("l1_bytes", 0),
            title=f"{device}: L1 without shared memory (estimate {note})",
        )[0]
    return out
