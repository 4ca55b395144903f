"""The pages stage of the `tlbs` analysis (TPDS Sec. 4.4, Fig. 10): walks of m pages at stride =
page. Their latency levels (base, L1-TLB miss, L2-TLB miss) and, per walk, the misses per
traversal of each level, which `tlb_sets` reads as entries, sets and ways. Sees only the trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

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
)


@dataclass(frozen=True)
class PageWalks:
    page_bytes: int
    levels: tuple[Level, ...]  # base, L1-TLB miss, L2-TLB miss (those found)
    l1_index: int | None  # index into levels
    l2_index: int | None
    counts: pd.DataFrame  # elements, l1_misses, l2_misses (per traversal), spreads
    # medians of the levels that set in together and were made the first miss level
    onset_parts: tuple[float, ...] = ()
    # per walk length: accesses of the counted traversals in no level (timing outliers, which
    # a count from one or two traversals may have taken from a miss)
    unplaced: dict[int, int] = field(default_factory=dict)


def merge_into_base(levels: list[Level], base_range: tuple[float, float]) -> list[Level]:
    """The levels whose medians lie inside the reach stage's base level `base_range` (walks of
    <= 3 elements: data hits, no TLB miss) made one: on a GPU whose data hits come at several
    latencies (L2 slices at different distances), the histogram of longer walks can split them,
    and none of those parts is a TLB miss."""
    lo, hi = base_range
    inside = [lv for lv in levels if lo <= lv.center < hi]
    if len(inside) < 2:
        return levels
    merged = merged_level(inside, max(inside, key=lambda lv: lv.count).center)
    return sorted([lv for lv in levels if lv not in inside] + [merged], key=lambda lv: lv.center)


def with_base(levels: list[Level], lat: np.ndarray, base_range: tuple[float, float]) -> list[Level]:
    """The reach stage's base level put back where the pooled histogram of the page walks
    dropped it as too small a share: where every level's unit is one page, every access of a
    walk past the L1 TLB's reach misses it, and the thousands of long walks outnumber the few
    short ones that hit. Its samples are no timing outliers: the reach stage's short walks
    read them. The level above starts where the base ends."""
    lo, hi = base_range
    inside = lat[(lat >= lo) & (lat < hi)]
    if inside.size < MIN_BASE_SAMPLES:
        return levels
    base = Level(float(np.median(inside)), float(lo), float(hi), int(inside.size))
    out = [base]
    for lv in levels:
        if lv.hi <= lo:
            out.append(lv)
        elif lv.lo >= hi:
            out.append(lv)
        elif lv.center >= hi:  # overlaps the base from above: it starts where the base ends
            out.append(Level(lv.center, float(hi), lv.hi, int(np.sum((lat >= hi) & (lat < lv.hi)))))
        elif lv.center < lo:
            out.append(Level(lv.center, lv.lo, float(lo), int(np.sum((lat >= lv.lo) & (lat < lo)))))
    return sorted(out, key=lambda lv: lv.center)


MIN_BASE_SAMPLES = 8  # find_levels' min_count: fewer are timing outliers whatever their range


ANY_ABOVE = -1  # key of _sustained_onsets: the levels above the base together


def _sustained_onsets(walk_levels: list[tuple[int, pd.Series]], b: int) -> dict[int, int]:
    """For each level above the base (and for all of them together, ANY_ABOVE), the shortest
    walk from which every longer walk has at least three accesses in it."""
    onset: dict[int, int] = {}
    alive: set[int] | None = None
    for m, counts in reversed(walk_levels):
        here = {int(k) for k, c in counts.items() if k > b and c >= 3}
        if sum(c for k, c in counts.items() if k > b) >= 3:
            here.add(ANY_ABOVE)
        alive = here if alive is None else alive & here
        for k in alive:
            onset[k] = m
    return onset


def _appearances(
    df: pd.DataFrame, lat: np.ndarray, levels: list[Level], b: int
) -> tuple[list[tuple[int, pd.Series]], dict[int, int]]:
    """Accesses per level in each walk, and the shortest walk in which each level above the
    base holds at least max(3, 2%) of the accesses."""
    idx = assign(lat, levels)
    walk_levels = []
    appear: dict[int, int] = {}
    for m, g in df.assign(level=idx).groupby("elements", sort=True):
        counts = g["level"].value_counts()
        walk_levels.append((int(m), counts))
        for k, c in counts.items():
            if k > b and k not in appear and c >= max(3, 0.02 * len(g)):
                appear[int(k)] = int(m)
    return walk_levels, appear


def page_levels(
    df: pd.DataFrame,
    sigma: float,
    base_value: float,
    base_range: tuple[float, float] | None = None,
) -> tuple[list[Level], int, int | None, int | None, tuple[float, ...]]:
    """Levels of the stride = page walks: the base level and the first two levels above it to
    appear as the walk grows (L1-TLB miss, then L2-TLB miss). Adjacent levels that set in
    with the first are one miss event at several latencies (on the H100 an L2-TLB miss comes
    at two, and which of them first passes a share of a walk is chance): they are made one
    level, and their medians are returned."""
    lat = df["latency_cycles"].to_numpy(np.float64)
    levels = find_levels(lat, sigma=sigma)
    if base_range is not None:
        levels = merge_into_base(levels, base_range)
        if level_containing(levels, base_value) is None:
            levels = with_base(levels, lat, base_range)
    b = level_containing(levels, base_value)
    if b is None:
        return levels, -1, None, None, ()
    walk_levels, appear = _appearances(df, lat, levels, b)
    parts: tuple[float, ...] = ()
    if appear:
        l1 = min(appear, key=lambda k: (appear[k], k))
        # together: sustained from the walk where slow accesses begin for good, at the latest
        # from the walk where the first level passes its share
        onset = _sustained_onsets(walk_levels, b)
        start = onset.get(ANY_ABOVE, appear[l1])
        together = {k for k, m in onset.items() if k > b and start <= m <= appear[l1]}
        lo = hi = l1
        while lo - 1 > b and lo - 1 in together:
            lo -= 1
        while hi + 1 in together:
            hi += 1
        if hi > lo:  # levels above the base merge: b keeps its index
            group = levels[lo : hi + 1]
            inside = lat[(lat >= group[0].lo) & (lat < group[-1].hi)]
            parts = tuple(lv.center for lv in group)
            merged = merged_level(group, float(np.median(inside)))
            levels = [*levels[:lo], merged, *levels[hi + 1 :]]
            walk_levels, appear = _appearances(df, lat, levels, b)
    order = sorted(appear, key=lambda k: (appear[k], k))
    l1 = order[0] if order else None
    l2 = next((k for k in order[1:] if k > l1), None) if l1 is not None else None
    return levels, b, l1, l2, parts


def fit_pages(
    df: pd.DataFrame,
    *,
    sigma: float,
    base_value: float,
    base_range: tuple[float, float] | None = None,
) -> PageWalks | None:
    if df.empty:
        return None
    page = int(df["stride_bytes"].iloc[0])
    levels, b, l1, l2, parts = page_levels(df, sigma, base_value, base_range)
    if b < 0:
        return PageWalks(page, tuple(levels), None, None, pd.DataFrame())
    rows, unplaced = [], {}
    for m, g in df.groupby("elements", sort=True):
        g = g.sort_values("step")
        lat = g["latency_cycles"].to_numpy(np.float64)
        row = {"elements": int(m), "steps": len(g)}
        counted = lat[: max(len(lat) // int(m), 1) * int(m)]
        unplaced[int(m)] = int(np.sum(assign(counted, levels) < 0))
        for name, k in (("l1", l1), ("l2", l2)):
            if k is None:
                row[f"{name}_misses"], row[f"{name}_spread"] = np.nan, np.nan
                continue
            mean, spread = misses_per_traversal(at_or_above(lat, levels, k), int(m))
            row[f"{name}_misses"], row[f"{name}_spread"] = mean, spread
        rows.append(row)
    return PageWalks(page, tuple(levels), l1, l2, pd.DataFrame(rows), parts, unplaced)


def level_unit(df: pd.DataFrame, walks: PageWalks, k: int) -> tuple[int, float]:
    """The unit (bytes one entry covers) of the level `k` of the stride = page walks: the most
    common distance between consecutive accesses at or above that level in the longest walk
    that misses it. A level whose entry covers u > page bytes (a larger page, or pages it
    coalesces) misses on the first access of each unit only: its misses lie u apart, a
    multiple of the page the walks step by (the reach stage sees only the nearest level's
    unit). Returns (the page, 0.0) when no walk shows the level's misses apart."""
    page = walks.page_bytes
    for m in sorted(df["elements"].unique(), reverse=True):
        g = df[df["elements"] == m].sort_values("step")
        lat = g["latency_cycles"].to_numpy(np.float64)
        slow = at_or_above(lat, list(walks.levels), k)
        if slow.sum() < 3:
            continue
        addr = g["position"].to_numpy(np.int64) * ELEMENT_BYTES
        spacing, share = miss_spacing(addr, slow)
        if spacing is None or spacing <= page or spacing % page or spacing & (spacing - 1):
            return page, 0.0
        return spacing, share
    return page, 0.0


def in_units(walks: PageWalks, unit_bytes: int) -> tuple[pd.DataFrame, dict[int, int]]:
    """The counts (and unplaced accesses) of the walks that span whole units of `unit_bytes`,
    with `elements` counted in units: a level of u-byte units sees a walk of m pages as m *
    page / u entries, and misses once per unit. The steps are counted in units too, so that
    steps / elements stays the traversals behind each count."""
    per = unit_bytes // walks.page_bytes
    c = walks.counts[walks.counts["elements"] % per == 0].copy()
    unplaced = {int(m) // per: n for m, n in walks.unplaced.items() if m % per == 0}
    c["elements"] = c["elements"] // per
    if "steps" in c:
        c["steps"] = c["steps"] // per
    return c.reset_index(drop=True), unplaced
