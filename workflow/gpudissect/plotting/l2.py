"""L2 footprint sweep figures: latency against footprint, per-access latency distribution."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from . import set_theme


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
    x = s["array_bytes"] / 2**20
    a.plot(x, s["median"], marker="o", label="median")
    a.fill_between(x, s["p10"], s["p90"], alpha=0.25, label="10-90th percentile")
    for st in doc.get("steps", []):
        a.axvline(st["footprint_before_bytes"] / 2**20, ls="--", lw=1, color="k")
    a.set(
        xscale="log",
        xlabel="footprint (MiB)",
        ylabel="latency (cycles)",
        title="latency against footprint",
    )
    a.legend()
    first = doc["steps"][0]["footprint_before_bytes"] if doc.get("steps") else None
    fits = data if first is None else data[data["array_bytes"] <= first]
    sns.histplot(fits["latency_cycles"], bins=80, ax=b)
    b.set(xlabel="latency (cycles)", title="per-access latency, footprints that fit")
    fig.suptitle(f"{doc['device']}: L2 footprint sweep ({doc['path']} path)")
    return {"l2_footprint": fig}
