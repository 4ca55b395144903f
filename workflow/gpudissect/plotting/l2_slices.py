"""L2 slice-map figure: the SM x slice latency matrix as a heat map (columns: the slice classes
the analysis found, or the lines where the classes are undetermined), columns ordered by the
partition of the first SM and then by latency; beside it, each SM's near and far latencies."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from . import placeholder, set_theme

FIGURE = "l2_slices_matrix"


def plot_l2_slices(data: pd.DataFrame, doc: dict, *, table: pd.DataFrame) -> dict:
    if table.empty:
        fig, _ = placeholder("L2 slice map", "no SM x slice latencies")
        return {FIGURE: fig}
    set_theme()
    m = table.pivot(index="sm", columns="column", values="cycles")
    far = table.pivot(index="sm", columns="column", values="far").astype(bool)
    order = sorted(m.columns, key=lambda k: (bool(far.iloc[0][k]), float(m[k].mean())))
    m, far = m[order], far[order]
    fig, (a, b) = plt.subplots(
        1, 2, figsize=(11, 4.2), layout="constrained", width_ratios=(4, 1), sharey=True
    )
    im = a.imshow(m.to_numpy(), aspect="auto", cmap="viridis", interpolation="nearest")
    kind = table["kind"].iloc[0]
    a.set(
        xlabel=f"{kind} (ordered: near to the first SM, then far; by mean latency)",
        ylabel="SM",
        title=f"first-touch L2 hit latency, SM x {kind}",
    )
    ticks = np.linspace(0, len(m.index) - 1, min(len(m.index), 12)).astype(int)
    a.set_yticks(ticks, [str(m.index[i]) for i in ticks])
    a.set_xticks([])
    a.grid(False)
    fig.colorbar(im, ax=a, label="cycles (raw)")
    y = np.arange(len(m.index))
    near = np.where(far.to_numpy(), np.nan, m.to_numpy())
    far_v = np.where(far.to_numpy(), m.to_numpy(), np.nan)
    with np.errstate(all="ignore"):
        b.plot(np.nanmedian(near, axis=1), y, ".", color="C0", label="near")
        b.plot(np.nanmedian(far_v, axis=1), y, ".", color="C3", label="far")
    b.set(xlabel="cycles", title="median per SM")
    b.legend(fontsize=7)
    q = (doc.get("elements") or {}).get("l2", {}).get("slices", {})
    note = f"{q['value']} slices" if q.get("value") is not None else "slices undetermined"
    fig.suptitle(f"{doc.get('device', '')}: L2 slice map ({note})")
    return {FIGURE: fig}
