"""TPDS Fig. 5: the classic P-chase both ways."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from . import set_theme


def plot_classic(data: pd.DataFrame, doc: dict) -> dict:
    set_theme()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    s = (
        data[data["method"] == "saavedra"]
        .groupby(["array_bytes", "stride_bytes"])["latency_cycles"]
        .mean()
        .reset_index()
    )
    s["array"] = [f"N = {n / 1024:g} KiB" for n in s["array_bytes"]]
    sns.lineplot(data=s, x="stride_bytes", y="latency_cycles", hue="array", marker="o", ax=a)
    a.set(
        xscale="log",
        xlabel="stride s (bytes)",
        ylabel="average latency (cycles)",
        title="Saavedra1992: stride varies",
    )
    a.set_xscale("log", base=2)
    w = data[data["method"] == "wong"].groupby("array_bytes")["latency_cycles"].mean().reset_index()
    sns.lineplot(data=w, x=w["array_bytes"] / 1024, y="latency_cycles", marker="o", ax=b)
    stride = int(data.loc[data["method"] == "wong", "stride_bytes"].iloc[0])
    b.set(
        xlabel="array size N (KiB)",
        ylabel="average latency (cycles)",
        title=f"Wong2010: size varies (s = {stride} B)",
    )
    fig.suptitle(f"{doc['device']}: classic P-chase on the {doc['path']} path")
    return {"pchase_classic": fig}
