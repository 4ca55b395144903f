"""Figures: each function takes a DataFrame and returns (fig, ax); the caller saves."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import seaborn as sns  # noqa: E402


def set_theme() -> None:
    """The one place the figure theme is set."""
    sns.set_theme(context="paper", style="whitegrid", palette="colorblind", font_scale=1.1)
