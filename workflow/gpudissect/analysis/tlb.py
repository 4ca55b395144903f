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

Sees only the trace (and the per-access addresses it records).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..exceptions import AnalysisError
from .misses import FirstMissDetector

_MAD_TO_SIGMA = 1.4826
ELEMENT_BYTES = 4


# --- latency levels ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Level:
    center: float  # median latency of the samples in the level
    lo: float  # samples in [lo, hi) belong to it
    hi: float
    count: int


def robust_sigma(values: np.ndarray) -> float:
    """Gaussian-equivalent spread (1.4826 MAD), at least 0.5 cycle (latencies are integers)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return 0.5
    return max(0.5, _MAD_TO_SIGMA * float(np.median(np.abs(v - np.median(v)))))


def find_levels(
    values: np.ndarray,
    *,
    sigma: float,
    min_count: int = 8,
    min_share: float = 0.002,
    valley_ratio: float = 0.6,
) -> list[Level]:
    """The discrete latency levels of `values` (ascending): peaks of the 1-cycle histogram,
    lightly smoothed, separated by valleys below `valley_ratio` of the smaller peak; levels with
    fewer than max(min_count, min_share * n) samples (timing outliers) are dropped."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return []
    # far outliers (preemption on a GPU) would make the histogram huge: ignore beyond 50x median
    v = v[v <= 50 * max(np.median(v), 1.0)]
    lo = np.floor(v.min()) - 8
    bins = np.floor(v - lo).astype(np.int64)
    hist = np.bincount(bins, minlength=int(bins.max()) + 9).astype(np.float64)
    width = max(0.6, 0.45 * sigma)
    half = int(np.ceil(4 * width))
    kernel = np.exp(-0.5 * (np.arange(-half, half + 1) / width) ** 2)
    smooth = np.convolve(hist, kernel / kernel.sum(), mode="same")
    peaks = [
        i
        for i in range(1, len(smooth) - 1)
        if smooth[i] > smooth[i - 1] and smooth[i] >= smooth[i + 1] and smooth[i] > 1e-9
    ]
    if not peaks:
        return []
    # basins: [edge_k, edge_k+1) around each peak, edges at the lowest point between peaks
    edges = [0]
    for a, b in zip(peaks[:-1], peaks[1:], strict=True):
        edges.append(a + int(np.argmin(smooth[a : b + 1])))
    edges.append(len(smooth))
    basins = [[p, edges[k], edges[k + 1]] for k, p in enumerate(peaks)]
    merged = True
    while merged and len(basins) > 1:  # merge peaks that no clear valley separates
        merged = False
        for k in range(len(basins) - 1):
            a, b = basins[k], basins[k + 1]
            valley = smooth[a[2]] if a[2] < len(smooth) else 0.0
            if valley > valley_ratio * min(smooth[a[0]], smooth[b[0]]):
                top = a[0] if smooth[a[0]] >= smooth[b[0]] else b[0]
                basins[k : k + 2] = [[top, a[1], b[2]]]
                merged = True
                break
    need = max(min_count, min_share * v.size)
    kept = []
    for _, a, b in basins:
        inside = v[(bins >= a) & (bins < b)]
        if inside.size >= need:
            kept.append((float(np.median(inside)), lo + a, lo + b))
    # between two levels the boundary is the midpoint of their medians: the valley of the
    # pooled histogram leans towards the smaller level, which would count its tail as the other
    levels = []
    for k, (center, a, b) in enumerate(kept):
        lower = a if k == 0 else (kept[k - 1][0] + center) / 2
        upper = b if k == len(kept) - 1 else (center + kept[k + 1][0]) / 2
        inside = v[(v >= lower) & (v < upper)]
        levels.append(Level(center, float(lower), float(upper), int(inside.size)))
    return levels


def assign(values: np.ndarray, levels: list[Level]) -> np.ndarray:
    """Index of the level each value falls in (-1: in none, e.g. a timing outlier)."""
    v = np.asarray(values, dtype=np.float64)
    out = np.full(v.shape, -1, dtype=np.int64)
    for k, lev in enumerate(levels):
        out[(v >= lev.lo) & (v < lev.hi)] = k
    return out


def level_containing(levels: list[Level], value: float) -> int | None:
    for k, lev in enumerate(levels):
        if lev.lo <= value < lev.hi:
            return k
    return None


# --- per-launch statistics --------------------------------------------------------------------
def misses_per_traversal(slow: np.ndarray, elements: int) -> tuple[float, float]:
    """Median and spread (max - min) of the slow accesses per full traversal of a cyclic walk
    of `elements` elements (consecutive windows of `elements` recorded steps). The median
    ignores a traversal with a stray timing outlier."""
    n = len(slow) // elements
    if n == 0:
        return float(np.sum(slow)) * elements / max(len(slow), 1), float("nan")
    per = np.asarray(slow[: n * elements]).reshape(n, elements).sum(axis=1)
    return float(np.median(per)), float(per.max() - per.min())


def at_or_above(values: np.ndarray, levels: list[Level], k: int) -> np.ndarray:
    """Whether each value lies in level k or a higher one (values in no level, such as timing
    outliers between levels, do not count)."""
    idx = assign(values, levels)
    return idx >= k


def miss_spacing(addresses: np.ndarray, slow: np.ndarray) -> tuple[int | None, float]:
    """The most common positive address distance between consecutive slow accesses, and the
    share of distances equal to it."""
    a = np.asarray(addresses)[np.asarray(slow, dtype=bool)]
    d = np.diff(a)
    d = d[d > 0]
    if d.size == 0:
        return None, 0.0
    values, counts = np.unique(d, return_counts=True)
    k = int(np.argmax(counts))
    return int(values[k]), float(counts[k] / d.size)


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


def merged_level(parts: list[Level], center: float) -> Level:
    """One level spanning `parts` (their samples together), centred at `center`."""
    return Level(
        center,
        min(lv.lo for lv in parts),
        max(lv.hi for lv in parts),
        sum(lv.count for lv in parts),
    )


REF_LEVEL_SHARE = 0.02


def _slow_threshold(lat: np.ndarray, ref: np.ndarray) -> tuple[Level, float, float]:
    """The base level and the value above which an access is a TLB miss: the base level's
    upper edge.

    The reference samples (walks of <= 3 elements) hit every TLB, so every latency level they
    fill is a data hit: on a GPU whose data hits come at several latencies (an H100's L2 slices
    lie at different distances from the SM, about 275 to 330 cycles) one short walk can land in a
    slower slice than the others. The base level is the span of the levels that hold at least
    `REF_LEVEL_SHARE` of the reference samples (one level where the hits are uniform)."""
    sigma = robust_sigma(ref)
    levels = find_levels(lat, sigma=sigma)
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


# --- the pages stage: levels, entries, sets, penalties ----------------------------------------
@dataclass(frozen=True)
class PageWalks:
    page_bytes: int
    levels: tuple[Level, ...]  # base, L1-TLB miss, L2-TLB miss (those found)
    l1_index: int | None  # index into levels
    l2_index: int | None
    counts: pd.DataFrame  # elements, l1_misses, l2_misses (per traversal), spreads
    # medians of the levels that set in together and were made the first miss level
    onset_parts: tuple[float, ...] = ()


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
    rows = []
    for m, g in df.groupby("elements", sort=True):
        g = g.sort_values("step")
        lat = g["latency_cycles"].to_numpy(np.float64)
        row = {"elements": int(m), "steps": len(g)}
        for name, k in (("l1", l1), ("l2", l2)):
            if k is None:
                row[f"{name}_misses"], row[f"{name}_spread"] = np.nan, np.nan
                continue
            mean, spread = misses_per_traversal(at_or_above(lat, levels, k), int(m))
            row[f"{name}_misses"], row[f"{name}_spread"] = mean, spread
        rows.append(row)
    return PageWalks(page, tuple(levels), l1, l2, pd.DataFrame(rows), parts)


@dataclass(frozen=True)
class SetStructure:
    entries: int | None
    sets: int | None
    ways: tuple[int, ...] | None
    increments: tuple[int, ...]
    policy: str | None
    evidence: str
    confidence: float


def set_structure(counts: pd.DataFrame, column: str) -> SetStructure:
    """Entries, sets and ways from misses per traversal against walk length (TPDS Fig. 10)."""
    c = counts[["elements", f"{column}_misses", f"{column}_spread"]].dropna()
    if c.empty:
        return SetStructure(None, None, None, (), None, "no walk was counted", 0.0)
    m = c["elements"].to_numpy(np.int64)
    k = np.rint(c[f"{column}_misses"].to_numpy()).astype(np.int64)
    # a walk of m pages holds every page of the shorter walks, so under LRU or FIFO an overflowed
    # set stays overflowed, and it misses at least ways + 1 >= 2 times a traversal: one miss a
    # traversal with a longer walk missing none is a stray timing outlier, not the TLB
    later_zero = np.flip(np.cumsum(np.flip(k == 0))) - (k == 0) > 0
    stray = (k == 1) & later_zero
    k = np.where(stray, 0, k)
    strays = (
        f" (single misses a traversal at {m[stray].tolist()[:8]} pages, each followed by a longer "
        "walk with none, taken as timing outliers)"
        if stray.any()
        else ""
    )
    missing = np.nonzero(k > 0)[0]
    if missing.size == 0:
        return SetStructure(
            None, None, None, (), None, f"no miss up to {m.max()} pages{strays}", 0.0
        )
    # entries: the largest walk before the first walk that misses, if the walks are dense there
    first = int(missing[0])
    if first == 0 or m[first] - m[first - 1] != 1 or np.any(k[first:] == 0):
        return SetStructure(
            None,
            None,
            None,
            (),
            None,
            f"misses begin between {m[max(first - 1, 0)]} and {m[first]} pages, but the walks "
            f"there are not one page apart (or some longer walk has no miss){strays}",
            0.0,
        )
    entries = int(m[first - 1])
    incs = []
    prev = 0
    for i in range(first, len(m)):
        if m[i] - m[i - 1] != 1:
            break
        incs.append(int(k[i] - prev))
        prev = int(k[i])
    # periodic: every traversal of the one-page-apart walks past the reach misses alike (stray
    # timing outliers or data misses may move a count by one or two)
    spread = c[f"{column}_spread"].to_numpy()[first : first + len(incs)]
    tolerance = np.maximum(2.0, 0.05 * k[first : first + len(incs)])
    periodic = bool(np.all(np.nan_to_num(spread, nan=0.0) <= tolerance))
    # leading increments > 1 are sets overflowing; a 1 means every set overflows already
    big = []
    for d in incs:
        if d <= 1:
            break
        big.append(d)
    complete = len(big) < len(incs) and incs[len(big)] == 1
    text = (
        f"{entries} pages fit; misses per traversal grow by {incs[:12]} as the walk grows by "
        f"one page past that{strays}"
    )
    if not big or not complete:
        stalls = len(big) < len(incs) and incs[len(big)] < 1
        why = (
            f": after {len(big)} growing steps the misses grow by {incs[len(big)]}, which no "
            "LRU or FIFO set overflow makes (once every set overflows, each further page adds "
            "one miss)"
            if stalls
            else ": the set overflows do not end within the swept walks"
        )
        return SetStructure(entries, None, None, tuple(incs), None, text + why, 0.3)
    for lru_extra, name in (
        (1, "every page of an overflowing set misses (ways + 1)"),
        (0, "ways = missed entries (TPDS Sec. 4.4 count)"),
    ):
        ways = tuple(d - lru_extra for d in big)
        if sum(ways) == entries and min(ways) > 0:
            policy = "lru" if periodic else "non-lru"
            return SetStructure(
                entries,
                len(ways),
                ways,
                tuple(incs),
                policy,
                text + f"; {len(ways)} set(s) overflow in turn, {name}: ways {list(ways)}, "
                f"sum {sum(ways)} = entries; misses per traversal "
                f"{'constant (periodic walk)' if periodic else 'vary between traversals'}",
                0.95 if periodic else 0.6,
            )
    return SetStructure(
        entries,
        None,
        None,
        tuple(incs),
        "non-lru" if not periodic else None,
        text + ": the increments do not add up to the entries under LRU",
        0.2,
    )


# --- the window stage ------------------------------------------------------------------------
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
