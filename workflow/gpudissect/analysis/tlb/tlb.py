"""TLB structure from the `tlbs` sweep (Mei & Chu, TPDS Sec. 4.4, Fig. 10; NPC Sec. 4.2).

The trace holds three stages of fine-grained P-chases on one load path (`cg` by default: data
stay in the L2 after the warm-up pass, so every latency step is a translation effect):

- `reach`: for each stride s, cyclic walks over m = 2, 3, ... elements (array m * s).
  * page size, by the spacing of L1-TLB misses: past the L1-TLB reach, a walk with s < page
    misses once per page (the first element of each page; the others hit the entry just filled),
    so consecutive missing accesses lie one page apart; with s >= page every access misses and
    they lie s apart. The page is that spacing at the smallest strides.
  * corroborated by the first-miss array size N*(s) (the largest array with no TLB miss):
    E x page for every s <= page, E x s beyond.
- `pages`: walks of m pages at stride = page (chosen from the reach stage). The latency levels
  (base = data hit with every TLB hit, then the L1-TLB-miss level, then the L2-TLB-miss level)
  are found from the histogram; entries = largest m with no miss of a level; sets and ways by
  TPDS Fig. 10's reading: adding one page past the reach makes one more set overflow, and an
  LRU set that overflows by one misses on all its pages every traversal (ways + 1); once every
  set overflows, each further page adds one miss. The increments of misses per traversal thus
  list the sets; their ways must add up to the entries.
- `window`: one cold walk over fresh pages (page-walk misses) of up to 2 GiB; a page-table
  window switch (TPDS Sec. 5.2(1), pattern P6) shows as a higher level at regularly spaced
  addresses; the window is that spacing.

Sees only the trace (and the per-access addresses it records). This module holds the reach
stage; the latency levels and miss counts are in `tlb_levels`, the pages stage in `tlb_pages`
(its set reading in `tlb_sets`), the window stage in `tlb_window`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...exceptions import AnalysisError
from ..common.misses import FirstMissDetector
from .tlb_levels import (
    ELEMENT_BYTES,
    Level,
    assign,
    at_or_above,
    find_levels,
    level_containing,
    merged_level,
    miss_spacing,
    misses_per_traversal,
    robust_sigma,
)
from .tlb_pages import PageWalks, fit_pages
from .tlb_window import Window, fit_window

# the stages' functions, for the sweep (which asks where to walk next) and the document
__all__ = [
    "ELEMENT_BYTES",
    "Level",
    "PageWalks",
    "Reach",
    "StrideReach",
    "Window",
    "assign",
    "at_or_above",
    "find_levels",
    "fit_pages",
    "fit_reach",
    "fit_window",
    "level_containing",
    "merged_level",
    "miss_spacing",
    "misses_per_traversal",
    "robust_sigma",
]


# --- the reach stage: page size and L1-TLB reach ----------------------------------------------
@dataclass(frozen=True)
class StrideReach:
    stride_bytes: int
    fit_bytes: int | None  # largest array with no TLB miss (None: none misses / undecided)
    fit_elements: int | None
    first_miss_elements: int | None
    spacing_bytes: int | None  # spacing of misses in the largest missing walk
    spacing_share: float


@dataclass(frozen=True)
class Reach:
    base: Level
    sigma: float
    strides: tuple[StrideReach, ...]
    page_bytes: int | None
    page_evidence: str
    page_confidence: float
    # (largest walk without, shortest walk with an L1-TLB miss) at the first stride >= page
    l1_entries_estimate: tuple[int, int] | None


REF_LEVEL_SHARE = 0.02


def _slow_threshold(
    lat: np.ndarray, ref: np.ndarray, levels: list[Level] | None = None
) -> tuple[Level, float, float]:
    """The base level and the value above which an access is a TLB miss: the base level's
    upper edge.

    The reference samples (walks of <= 3 elements) hit every TLB, so every latency level they
    fill is a data hit: on a GPU whose data hits come at several latencies (an H100's L2 slices
    lie at different distances from the SM, about 275 to 330 cycles) one short walk can land in a
    slower slice than the others. The base level is the span of the levels that hold at least
    `REF_LEVEL_SHARE` of the reference samples (one level where the hits are uniform).
    `levels`: `find_levels(lat, sigma=robust_sigma(ref))`, where the caller has them."""
    sigma = robust_sigma(ref)
    levels = find_levels(lat, sigma=sigma) if levels is None else levels
    idx = assign(ref, levels)
    held = [k for k in range(len(levels)) if np.mean(idx == k) >= REF_LEVEL_SHARE]
    k = level_containing(levels, float(np.median(ref)))
    if k is None:
        med = float(np.median(ref))
        base = Level(med, med - 3 * sigma, med + 3 * sigma, int(ref.size))
    elif len(held) < 2:
        base = levels[k]
    else:
        base = merged_level(levels[min(held) : max(held) + 1], levels[k].center)
    return base, sigma, base.hi


def fit_reach(df: pd.DataFrame) -> Reach | None:
    """Page size and L1-TLB reach from the `reach` stage rows (None when there are none)."""
    if df.empty:
        return None
    ref = df.loc[df["elements"] <= 3, "latency_cycles"].to_numpy(np.float64)
    if ref.size == 0:
        raise AnalysisError("the reach stage has no walk of <= 3 elements to set the base level")
    lat = df["latency_cycles"].to_numpy(np.float64)
    base, sigma, threshold = _slow_threshold(lat, ref)
    rows = []
    for stride, g in df.groupby("stride_bytes", sort=True):
        by_m = dict(tuple(g.groupby("elements", sort=True)))
        ms = sorted(by_m)
        groups = [(by_m[m]["latency_cycles"].to_numpy(np.float64) >= threshold) for m in ms]
        fit_e = first_e = None
        if len(ms) >= 3:
            det = FirstMissDetector(min_margin_cycles=0.5, min_relative_margin=0.0).fit(
                ms, [x.astype(np.float64) for x in groups]
            )
            if det.result is not None and det.reference_ok:
                fit_e, first_e = int(det.result.x_before), int(det.result.x_after)
        spacing, share = None, 0.0
        if first_e is not None:
            last = by_m[ms[-1]].sort_values("step")
            addr = last["position"].to_numpy(np.int64) * ELEMENT_BYTES
            spacing, share = miss_spacing(addr, last["latency_cycles"].to_numpy() >= threshold)
        rows.append(
            StrideReach(
                int(stride),
                None if fit_e is None else fit_e * int(stride),
                fit_e,
                first_e,
                spacing,
                share,
            )
        )
    page, evidence, confidence = _page_from_spacing(rows)
    l1 = None
    if page is not None:
        at_page = [r for r in rows if r.stride_bytes >= page and r.fit_elements is not None]
        if at_page:
            l1 = (at_page[0].fit_elements, at_page[0].first_miss_elements)
    return Reach(base, sigma, tuple(rows), page, evidence, confidence, l1)


def _page_from_spacing(rows: list[StrideReach]) -> tuple[int | None, str, float]:
    seen = [r for r in rows if r.spacing_bytes is not None]
    if not seen:
        return None, "no stride shows TLB misses within the swept arrays", 0.0
    small = seen[0]
    if small.spacing_bytes <= small.stride_bytes:
        return (
            None,
            f"slow accesses lie one stride apart already at the smallest stride "
            f"({small.stride_bytes} bytes): every access there is slow (data-cache misses, or "
            "pages no larger than the stride); sweep smaller strides or smaller arrays",
            0.0,
        )
    page = small.spacing_bytes
    agree = [r.spacing_bytes == (page if r.stride_bytes < page else r.stride_bytes) for r in seen]
    fits = {r.stride_bytes: r.fit_bytes for r in rows if r.fit_bytes is not None}
    table = ", ".join(
        f"{s // 1024} KiB: {'-' if f is None else f'{f / 2**20:g} MiB'}" for s, f in fits.items()
    )
    evidence = (
        f"past the L1-TLB reach, consecutive TLB misses lie {page} bytes apart at every stride "
        f"below it ({sum(agree)}/{len(agree)} strides agree: spacing = max(stride, page)); "
        f"largest array without a miss, N*(s), by stride: {table}"
    )
    confidence = float(np.mean(agree)) * float(np.mean([r.spacing_share for r in seen]))
    return page, evidence, confidence


def page_verdict(df: pd.DataFrame) -> tuple[str, int | None]:
    """Where the reach strides stand against the page, for a sweep that picks its strides:
    ("page", bytes) when misses lie further apart than the smallest stride that shows them;
    ("smaller", None) when they lie one stride apart there (the page is not above that stride);
    ("none", None) when no walk shows a TLB miss (the strides reach too little)."""
    reach = fit_reach(df)
    seen = [r for r in (reach.strides if reach else ()) if r.spacing_bytes is not None]
    if not seen:
        return "none", None
    if seen[0].spacing_bytes <= seen[0].stride_bytes:
        return "smaller", None
    return "page", reach.page_bytes
