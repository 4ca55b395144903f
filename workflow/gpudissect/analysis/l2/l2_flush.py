"""L2 size from the flushed / unflushed copy times (Lashgar, Salehi & Baniasadi, Sec. 3.3,
Fig. 2). Sees only the trace.

Per size, the gap is the median flushed time minus the median unflushed time. While the source
fits in the L2, every extra byte is one more L2 hit in the unflushed copy, so the gap grows in
proportion to the size; beyond the L2 size it stops growing ("the performance gap saturates").
The estimate is the size where that proportional growth ends: a line is fitted to the sizes
whose gap is at most half the peak gap (before the peak); the first size whose gap falls behind
it by more than ``LINE_TOLERANCE`` (or three times the spread of the repetitions) lies past the
L2. With a random-replacement L2 some lines survive past the capacity, so the gap's peak lies
above the L2 size, and the gap still grows, more slowly, for a size or two: the first size past
the L2 can stay within the tolerance. So the size is the last one before the steps that each add
less than ``1 - STEP_DROP`` of the rise's growth per step, every one of them up to the first
size off the line (the last size on the line where no such run of steps leads there).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ...exceptions import AnalysisError
from ..common.result import quantity, undetermined

LINE_TOLERANCE = 0.03
STEP_DROP = 0.25  # a step past the L2 adds at most 3/4 of a step's growth on the rise


def gap_table(data: pd.DataFrame) -> pd.DataFrame:
    need = {"size_bytes", "flushed", "elapsed_ms"}
    if not need <= set(data.columns):
        raise AnalysisError(f"trace lacks columns {sorted(need - set(data.columns))}")
    med = data.groupby(["size_bytes", "flushed"])["elapsed_ms"].median().unstack("flushed")
    if True not in med.columns or False not in med.columns:
        raise AnalysisError("the trace needs flushed and unflushed copies")
    out = pd.DataFrame(
        {
            "size_bytes": med.index.to_numpy(dtype=np.int64),
            "unflushed_ms": med[False].to_numpy(),
            "flushed_ms": med[True].to_numpy(),
        }
    )
    out["gap_ms"] = out["flushed_ms"] - out["unflushed_ms"]
    return out.dropna().reset_index(drop=True)


def figure_table(data: pd.DataFrame, doc: dict[str, Any]) -> pd.DataFrame:
    """The table the figure draws: per size, the median copy times and their gap."""
    return gap_table(data)


def analyse(
    data: pd.DataFrame, *, provenance: dict[str, Any], inputs: dict | None = None
) -> dict[str, Any]:
    table = gap_table(data)
    x = table["size_bytes"].to_numpy(dtype=np.float64)
    y = table["gap_ms"].to_numpy()
    doc_base = {
        "device": provenance["device"],
        "analysis": "l2_flush",
        "trace": {k: provenance.get(k) for k in ("git_commit", "config_hash", "created_utc")},
        "device_info": provenance.get("device_info", {}),
        "clocks_before": provenance.get("clocks_before"),
        "clocks_after": provenance.get("clocks_after"),
        "gaps": table.round(6).to_dict(orient="records"),
    }
    if len(x) < 5:
        size = undetermined(f"only {len(x)} sizes swept; need >= 5")
        return doc_base | {"elements": {"l2": {"size_bytes": size}}}
    rep = data.groupby(["size_bytes", "flushed"])["elapsed_ms"]
    spread = float(np.nanmedian(rep.quantile(0.75) - rep.quantile(0.25)))
    step = int(np.min(np.diff(x)))
    peak = int(np.argmax(y))
    rising = (np.arange(len(x)) <= peak) & (y <= 0.5 * y[peak])
    if peak < 2 or rising.sum() < 2 or y[peak] - y[0] <= 3 * max(spread, 1e-12):
        size = undetermined(
            "the flushed/unflushed gap does not rise beyond its noise; no L2 effect in the "
            "swept sizes"
        )
        return doc_base | {"elements": {"l2": {"size_bytes": size}}}
    slope, icpt = np.polyfit(x[rising], y[rising], 1)
    line = icpt + slope * x
    tol = np.maximum(LINE_TOLERANCE * line, 3 * spread)
    off = np.nonzero((np.arange(len(x)) > np.nonzero(rising)[0][-1]) & (line - y > tol))[0]
    fit = f"initial rise {slope * 2**20:.4g} ms/MiB through {int(rising.sum())} sizes"
    if off.size == 0:
        size = undetermined(
            f"the gap keeps its initial growth up to {int(x[-1])} bytes ({fit}): the L2 holds "
            "at least the largest size swept; sweep larger sizes"
        )
    else:
        at, meet = _last_full_step(
            x, y, slope, 3 * spread, int(np.nonzero(rising)[0][-1]), int(off[0])
        )
        after = y[off[0] :]
        flat = float(np.ptp(after) / max(y[peak], 1e-30)) if after.size > 1 else 1.0
        size = quantity(
            at,
            unit="bytes",
            confidence=max(0.0, 1.0 - abs(x[peak] - at) / max(at, 1)) * (1 - min(flat, 1) / 2),
            method=(
                "copy with and without a flushed L2 (Lashgar Sec. 3.3): last size whose "
                "flushed/unflushed gap still follows its initial linear growth (within "
                f"{LINE_TOLERANCE:.0%} or three times the repetition spread)"
            ),
            evidence=(
                f"{fit}; falls behind it at {int(x[off[0]])} bytes{meet}; the gap peaks at "
                f"{int(x[peak])} bytes; sweep step {step} bytes"
            ),
        )
        # the next size swept is past the L2: the size is in [at, that size)
        after_at = x[x > at]
        if after_at.size:
            size["resolution_bytes"] = int(after_at[0]) - at
    return doc_base | {"elements": {"l2": {"size_bytes": size}}}


def _last_full_step(
    x: np.ndarray, y: np.ndarray, expected: float, noise: float, last_rising: int, first_off: int
) -> tuple[int, str]:
    """The L2 size: the size before the first step from which every step up to the first size
    off the rise adds less than (1 - `STEP_DROP`) of the rise's increment (`expected` per
    byte), beyond `noise`; the last size on the rise where no step does. Returns the size and a
    note for the evidence."""
    short = [
        y[k] - y[k - 1] < (1 - STEP_DROP) * expected * (x[k] - x[k - 1]) - noise
        for k in range(last_rising + 1, first_off + 1)
    ]
    for i, k in enumerate(range(last_rising + 1, first_off)):
        if all(short[i:]):
            share = (y[k] - y[k - 1]) / (expected * (x[k] - x[k - 1]))
            note = (
                f"; from {int(x[k])} bytes on each step adds less than "
                f"{1 - STEP_DROP:.0%} of the rise's ({share:.0%} at the first)"
            )
            return int(x[k - 1]), note
    return int(x[first_off - 1]), ""
