"""The window stage of the `tlbs` analysis (TPDS Sec. 5.2(1), pattern P6): one cold walk over
fresh pages; a page-table window switch shows as a higher level at regularly spaced addresses,
and the window is that spacing. Sees only the trace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .tlb_levels import ELEMENT_BYTES, assign, find_levels


@dataclass(frozen=True)
class Window:
    window_bytes: int | None
    switch_penalty_cycles: float | None
    cold_latency_cycles: float | None
    switch_addresses: tuple[int, ...]
    evidence: str
    confidence: float


def fit_window(df: pd.DataFrame, *, sigma: float) -> Window:
    if df.empty:
        return Window(None, None, None, (), "no window probe in the trace", 0.0)
    # the first access of a launch starts the walk: it is excluded
    body = df[df["step"] > 0]
    lat = body["latency_cycles"].to_numpy(np.float64)
    levels = find_levels(lat, sigma=sigma, min_count=2, min_share=0.0)
    if not levels:
        return Window(None, None, None, (), "no latency level in the probe", 0.0)
    cold = max(range(len(levels)), key=lambda k: levels[k].count)
    span = int((body["position"].max() + 1) * ELEMENT_BYTES)
    reps = body["repetition"].nunique()
    higher = [k for k in range(cold + 1, len(levels))]
    addr = body["position"].to_numpy(np.int64) * ELEMENT_BYTES
    idx = assign(lat, levels)
    for k in higher:
        hits = pd.Series(addr[idx == k]).value_counts()
        regular = np.sort(hits[hits >= max(2, (reps + 1) // 2)].index.to_numpy())
        if regular.size == 0:
            continue
        spacing = np.diff(np.concatenate([[0], regular]))
        window = int(np.median(spacing))
        consistent = bool(np.all(spacing == window))
        if not consistent:
            return Window(
                None,
                None,
                levels[cold].center,
                (),
                f"a {levels[k].center:.0f}-cycle level above the cold walk's "
                f"{levels[cold].center:.0f} recurs at addresses "
                f"{[int(a) for a in regular[:8]]} from the array start, which are not equally "
                f"spaced: no page-table window (switches would recur every window)",
                0.0,
            )
        pen = float(levels[k].center - levels[cold].center)
        expected = span // window
        return Window(
            window,
            pen,
            levels[cold].center,
            tuple(int(a) for a in regular),
            f"cold walk over {span / 2**20:g} MiB of fresh pages ({reps} launches): the "
            f"{levels[k].center:.0f}-cycle level (+{pen:.0f} over the cold walk's "
            f"{levels[cold].center:.0f}) occurs at addresses {[int(a) for a in regular[:6]]} "
            f"from the array start, every {window} bytes"
            + ("" if consistent else " (spacing not constant)"),
            (0.95 if consistent and regular.size >= 2 else 0.5)
            * min(1.0, regular.size / max(expected, 1)),
        )
    return Window(
        None,
        None,
        levels[cold].center,
        (),
        f"no recurring level above the cold walk ({levels[cold].center:.0f} cycles) over "
        f"{span / 2**20:g} MiB of fresh pages: no page-table window switch, or a window larger "
        "than the probe",
        0.0,
    )
