"""Figures: each function takes a DataFrame and returns (fig, ax); the caller saves."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import seaborn as sns  # noqa: E402


def set_theme() -> None:
    """The one place the figure theme is set."""
    # a fixed title height: matplotlib's automatic one measures every axis' tick labels on
    # every draw (a third of the drawing time); no figure here has ticks above its axes
    sns.set_theme(
        context="paper",
        style="whitegrid",
        palette="colorblind",
        font_scale=1.1,
        rc={"axes.titley": 1.0},
    )


def placeholder(title: str, reason: str):
    """A figure that says why there is nothing to plot (the pipeline still expects the file)."""
    import matplotlib.pyplot as plt

    set_theme()
    fig, ax = plt.subplots(figsize=(6, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, f"{title}\nnothing measured: {reason}", ha="center", va="center", wrap=True)
    return fig, ax


def size_text(size_bytes: float) -> str:
    """A size in the largest binary unit that keeps it at least 1 ("16 KiB", "1.5 MiB")."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:.4g} {unit}"
    return f"{size_bytes:g} B"


def size_axis(axis) -> None:
    """A log axis of sizes in bytes, ticked at powers of two written out in binary units (the
    default labels of a log axis read "3x10^1")."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=2, numticks=9))
    axis.set_major_formatter(FuncFormatter(lambda v, _: size_text(v)))
    axis.set_minor_formatter(NullFormatter())
