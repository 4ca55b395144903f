"""Figures of the bank-conflict sweep: latency against stride (TPDS Figs. 18-19, NPC Figs. 5 and
7) and against the conflict degree of the fitted model (TPDS Table VIII)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FuncFormatter, ScalarFormatter

from . import set_theme


def _minor_label(ax, value: float) -> str:
    """A minor tick's label on the log latency axis: every one on an axis short of a decade,
    only 2x and 5x where the axis spans more (else "600 700 800 900" run into each other)."""
    low, high = ax.get_ylim()
    digit = round(value / 10 ** np.floor(np.log10(value)))
    if high > 10 * low and digit not in (2, 5):
        return ""
    return f"{value:g}"


def empty_figure(title: str, reason: str):
    """A placeholder figure for a device the sweep could not run on."""
    set_theme()
    fig, ax = plt.subplots(figsize=(5, 3), layout="constrained")
    ax.axis("off")
    ax.text(0.5, 0.5, reason, ha="center", va="center", wrap=True)
    fig.suptitle(title)
    return fig, ax


def _fit_label(law: dict | None) -> str:
    """The linear fit's name in a legend: "model", or "rejected linear fit" where the analysis
    rejected it as the latency law (`model.linear_law`)."""
    return "rejected linear fit" if law and not law.get("accepted") else "model"


def plot_stride_latency(
    points: pd.DataFrame, *, base: float, slope: float, title: str, law: dict | None = None
):
    """Mean latency per load against stride, a line per bank mode (and element size); the
    fitted model's prediction ``base + slope (degree - 1)`` dashed (named a rejected fit where
    the analysis's verdict `law` rejects it).

    `points`: columns bank_mode_bytes, element_bytes, stride_elements, latency_cycles, degree.
    """
    set_theme()
    df = points.assign(
        series=[
            f"{m}-byte mode, {e}-byte elements"
            for m, e in zip(points["bank_mode_bytes"], points["element_bytes"], strict=True)
        ],
        model_cycles=base + slope * (points["degree"] - 1),
    )
    fig, ax = plt.subplots(figsize=(7.5, 3.8), layout="constrained")
    order = sorted(df["series"].unique())
    palette = dict(zip(order, sns.color_palette(n_colors=len(order)), strict=True))
    for name in order:
        s = df[df["series"] == name].sort_values("stride_elements")
        ax.plot(
            s["stride_elements"],
            s["latency_cycles"],
            marker="o",
            ms=3,
            lw=1,
            color=palette[name],
            label=f"{name} (measured)",
        )
        ax.plot(
            s["stride_elements"],
            s["model_cycles"],
            ls="--",
            lw=1,
            color=palette[name],
            alpha=0.7,
            label=f"{name} ({_fit_label(law)})",
        )
    ax.set_yscale("log")
    # plain numbers: a short log axis' default labels read "3x10^1"
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: _minor_label(ax, v)))
    ax.grid(True, which="minor", axis="y", lw=0.5)
    ax.set(xlabel="stride (elements)", ylabel="latency per load (cycles)", title=title)
    ax.legend(fontsize=7)
    return fig, ax


def plot_degree_latency(
    points: pd.DataFrame, *, base: float, slope: float, title: str, law: dict | None = None
):
    """Latency against the model's conflict degree (Table VIII), every point and the fitted
    line: dashed black, or dotted grey and named rejected where the verdict `law` rejects it."""
    set_theme()
    fig, ax = plt.subplots(figsize=(5.5, 3.8), layout="constrained")
    # each mode beside the other (not on top of it: the 4-byte points used to hide under the
    # 8-byte ones), spread by a jitter drawn from a fixed seed so identical runs draw
    # identical figures
    rng = np.random.default_rng(0)
    modes = sorted(points["bank_mode_bytes"].unique())
    for k, (mode, marker) in enumerate(zip(modes, "os^D", strict=False)):
        g = points[points["bank_mode_bytes"] == mode]
        shift = (k - (len(modes) - 1) / 2) * 0.12
        x = g["degree"].to_numpy(float) * 2 ** (shift + rng.uniform(-0.04, 0.04, len(g)))
        ax.scatter(
            x,
            g["latency_cycles"],
            s=14,
            marker=marker,
            alpha=0.7,
            color=f"C{k}",
            edgecolors="k",
            linewidths=0.3,
            label=f"{mode}",
        )
    d = np.array(sorted(points["degree"].unique()))
    rejected = bool(law) and not law.get("accepted")
    ax.plot(
        d,
        base + slope * (d - 1),
        ls=":" if rejected else "--",
        color="0.5" if rejected else "k",
        lw=1,
        label=f"{base:.1f} + {slope:.2f} (d - 1)" + (", rejected" if rejected else ""),
    )
    ax.set_xscale("log", base=2)
    ax.set_xticks(d, [str(int(v)) for v in d])
    ax.set(xlabel="conflict degree (ways)", ylabel="latency per load (cycles)", title=title)
    ax.legend(title="mode (bytes) / fit", fontsize=7)
    return fig, ax


def plot_bank_conflicts(data: pd.DataFrame, doc: dict) -> dict:
    """The bank_conflicts family's figures, by file stem."""
    device = doc["device"]
    if "model" not in doc:
        reason = next(iter(doc["elements"]["shared"].values())).get("undetermined", "no data")
        return {
            "bank_conflicts_stride": empty_figure(f"{device}: bank conflicts", reason)[0],
            "bank_conflicts_degree": empty_figure(f"{device}: bank conflicts", reason)[0],
        }
    points = pd.DataFrame(doc["points"])
    m = doc["model"]
    sel = m["selected"]
    label = f"{sel['banks']} banks x {sel['bank_width_bytes']} B"
    stride, _ = plot_stride_latency(
        points,
        base=m["base_cycles"],
        slope=m["slope_cycles"],
        title=f"{device}: shared latency vs stride (model {label})",
        law=m.get("linear_law"),
    )
    degree, _ = plot_degree_latency(
        points,
        base=m["base_cycles"],
        slope=m["slope_cycles"],
        title=f"{device}: latency vs conflict degree",
        law=m.get("linear_law"),
    )
    return {"bank_conflicts_stride": stride, "bank_conflicts_degree": degree}
