"""Translation levels whose miss penalty hides in the spread of data latencies (Hopper).

The threshold reading of `tlb.fit_reach` counts an access as a TLB miss when it is slower than
every data hit. On a GPU whose L2 hit latency depends on the address (L2 slices at different
distances from the SM: 275 to 330 cycles on an H100), an L1-TLB miss of about 10 cycles stays
inside that spread and the threshold sees nothing. One address's latency, though, repeats to a
cycle or two, so this module compares every address with itself across walks of growing length
(TPDS Sec. 4.4's reach walks, read pairwise):

- `shift_onsets`: per stride, the first pair of consecutive walks in which the shared
  addresses' median latencies rise by more than noise explains; the risen addresses lie one
  translation unit apart (or one stride apart when the stride is larger), which gives the
  unit (the page of this level) as in TPDS Sec. 4.4's miss spacing.
- `hidden_level`: the level those onsets describe, when its reach is smaller than that of the
  level the threshold reading found (that one is then the next level, the L2 TLB): its page,
  entries (the brackets of every stride intersected), the set reading and the penalty.

Sees only the trace's reach-stage rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..common.misses import binom_sf
from .tlb_levels import ELEMENT_BYTES, robust_sigma


@dataclass(frozen=True)
class ShiftOnset:
    """Where the walks of one stride first pay a small translation penalty, read address by
    address: the walk of `fit_elements` and the next one, of `first_elements`, share the
    `fit_elements` addresses of the shorter; those whose median latency rose by more than the
    noise allows (and stays risen in the next walk) are `shifted_bytes` (byte offsets)."""

    stride_bytes: int
    fit_elements: int
    first_elements: int
    shifted_bytes: tuple[int, ...]
    common: int  # addresses the two walks share
    penalty_cycles: float  # median rise of the shifted addresses
    threshold_cycles: float  # a rise above this counts
    spacing_bytes: int | None
    spacing_share: float

    @property
    def fit_bytes(self) -> int:
        return self.fit_elements * self.stride_bytes


def address_medians(walk: pd.DataFrame) -> pd.Series:
    """Median latency of each address of one walk over its recorded traversals (the first
    record of a launch is left out: it also times the start of the walk)."""
    body = walk[walk["step"] > 0]
    return body.groupby("position")["latency_cycles"].median()


def _medians_by_walk(g: pd.DataFrame) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """`address_medians` of every walk of one stride, in one grouping: per walk length, the
    addresses (ascending) and their medians."""
    body = g[g["step"] > 0]
    med = body.groupby(["elements", "position"], sort=True)["latency_cycles"].median()
    return {
        int(m): (s.index.get_level_values(1).to_numpy(np.int64), s.to_numpy(np.float64))
        for m, s in med.groupby(level=0, sort=True)
    }


def shift_onsets(
    df: pd.DataFrame,
    *,
    alpha: float = 1e-6,
    min_shift_cycles: float = 3.0,
    min_addresses: int = 3,
    spacing_share: float = 0.6,
    unit_classes: bool = False,
) -> list[ShiftOnset]:
    """The first paired-address onset of every stride of the reach stage (none where no walk
    pair shows one): `stride_onset` of each stride's walks."""
    out = []
    for stride, g in df.groupby("stride_bytes", sort=True):
        onset = stride_onset(
            int(stride), _medians_by_walk(g), alpha=alpha, min_shift_cycles=min_shift_cycles,
            min_addresses=min_addresses, spacing_share=spacing_share, unit_classes=unit_classes,
        )  # fmt: skip
        if onset is not None:
            out.append(onset)
    return out


def stride_onset(
    stride: int,
    medians: dict[int, tuple[np.ndarray, np.ndarray]],
    *,
    alpha: float = 1e-6,
    min_shift_cycles: float = 3.0,
    min_addresses: int = 3,
    spacing_share: float = 0.6,
    unit_classes: bool = False,
    pairs: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] | None = None,
) -> ShiftOnset | None:
    """The first paired-address onset of the walks of one stride, given per walk length its
    addresses (ascending) and their median latencies over the walk's recorded traversals.

    A GPU whose data latency differs from address to address (L2 slices at different
    distances) hides a translation penalty of a few cycles in the spread of a walk's latencies,
    but one address's latency repeats to a cycle or two. So each address is compared with
    itself: between two consecutive walks of a stride, the longer one holds every address of
    the shorter, and d = the rise of each common address's median latency. Without a new miss
    d is noise of robust spread sigma (that of the pairs before, once they hold 20 differences;
    else pooled over all pairs of the stride); past a
    translation level's reach the addresses that now miss it (all, or the first of each
    translation unit) rise by its penalty. An onset is the first pair in which more addresses
    rise by over 3 sigma than the rate of such rises in the same pairs explains (binomial test
    at `alpha`; with `unit_classes`, where that fails or its risen addresses fail the checks
    below, the same test over the first address of each unit alone, `_unit_rise`), whose risen
    addresses (rise above 3 sigma of the pairs before it and above a quarter of the median
    rise, or 3 sigma if less) are at least `min_addresses`, regularly spaced (the most common
    spacing is at least `spacing_share` of all: the translation unit, or the stride) and still
    risen in the walk after (a slow traversal of one walk is not a level).

    The unit classes are for walks over a mapping the experiment made (`tlb_mappings`): over a
    plain allocation an H100's walks at 512 KiB and 2 MiB also show small rises of one residue
    class (addresses 8 or 32 MiB apart, 6 of 96) before the L1 TLB's reach, in some runs and
    not others, which would set its unit and reach there.

    `pairs`: the common addresses and rises of walk pairs read before (keyed by the two walk
    lengths), kept by the caller between calls on a growing set of walks and filled here."""
    ms = sorted(medians)
    if len(ms) < 3:
        return None
    pairs = {} if pairs is None else pairs
    read = []
    # each walk's medians are sorted by address (one per address): the addresses two walks
    # share, and their medians, by a sorted intersection
    for a, b in zip(ms[:-1], ms[1:], strict=True):
        if (a, b) not in pairs:
            (at_a, med_a), (at_b, med_b) = medians[a], medians[b]
            common = np.intersect1d(at_a, at_b, assume_unique=True)
            d = med_b[np.searchsorted(at_b, common)] - med_a[np.searchsorted(at_a, common)]
            pairs[(a, b)] = (common, d)
        read.append((a, *pairs[(a, b)]))
    pooled = np.concatenate([d for _, _, d in read])
    if pooled.size < 10:
        return None
    sigma = robust_sigma(pooled)
    null = max(float(np.mean(pooled > 3 * sigma)), 0.002)
    for i, (a, common, d) in enumerate(read[:-1]):
        # the noise is that of the pairs before this one once they hold 20 differences:
        # the pooled spread also holds the walks past every later level (an
        # H100 run's pooled sigma of 4.4 cycles hid a 10-cycle L1-TLB onset that the pairs
        # before it, at 1.5, show in all 16 addresses)
        before = np.concatenate([p[2] for p in read[:i]]) if i else np.empty(0)
        if before.size >= 20:
            sigma_before = robust_sigma(before)
            null_before = max(float(np.mean(before > 3 * sigma_before)), 0.002)
        else:
            sigma_before, null_before = sigma, null
        over = d > 3 * sigma_before
        # the addresses that may have risen: all of them, or (`unit_classes`) the first
        # address of each translation unit
        for among, whole in _risen_candidates(
            common, over, stride, null_before, alpha, min_addresses, unit_classes
        ):
            onset = _onset(
                stride, (a, ms[i + 1], ms[i + 2]), medians, common, d, among,
                sigma=sigma, sigma_before=sigma_before, min_shift_cycles=min_shift_cycles,
                min_addresses=min_addresses, spacing_share=spacing_share, whole=whole,
            )  # fmt: skip
            if onset is not None:
                return onset
    return None


def _onset(
    stride: int,
    walks: tuple[int, int, int],
    medians: dict[int, tuple[np.ndarray, np.ndarray]],
    common: np.ndarray,
    d: np.ndarray,
    among: np.ndarray,
    *,
    sigma: float,
    sigma_before: float,
    min_shift_cycles: float,
    min_addresses: int,
    spacing_share: float,
    whole: bool = False,
) -> ShiftOnset | None:
    """The onset between walks a and b (c the walk after) over the addresses `among`, if their
    rises make one (`shift_onsets`). `whole`: `among` is one unit class, every member of which
    a level's overflow raises (the class test chose it), so all of it is taken as risen, and
    it must stay risen by half its median rise in the walk after."""
    a, b, c = walks
    if whole:
        rise = d[among]
        if rise.size < min_addresses or np.median(rise) < min_shift_cycles:
            return None
        cut = 0.5 * float(np.median(rise))
        risen = among
    else:
        rise = d[(d > 3 * sigma_before) & among]
        if rise.size < min_addresses or np.median(rise) < min_shift_cycles:
            return None
        # which addresses rose: above the noise of the pairs before this one and a quarter of
        # the typical rise, so that the smaller genuine rises of a slice-dependent penalty stay
        cut = max(3 * sigma_before, min(3 * sigma, 0.25 * float(np.median(rise))))
        risen = (d > cut) & among
    shifted = common[risen]
    if shifted.size < min_addresses:
        return None
    later = _at(medians[c], shifted) - _at(medians[a], shifted)
    if float(np.nanmedian(later)) < cut:
        return None  # a slow traversal of one walk, not a level
    addr = np.sort(shifted) * ELEMENT_BYTES
    values, counts = np.unique(np.diff(addr), return_counts=True)
    k = int(np.argmax(counts))
    share = float(counts[k] / counts.sum())
    if share < spacing_share:
        return None
    return ShiftOnset(
        stride,
        a,
        b,
        tuple(int(x) for x in addr),
        int(common.size),
        float(np.median(d[risen])),
        float(cut),
        int(values[k]),
        share,
    )


def _at(walk: tuple[np.ndarray, np.ndarray], positions: np.ndarray) -> np.ndarray:
    """The walk's medians at `positions` (NaN where it holds no such address)."""
    at, med = walk
    if at.size == 0:
        return np.full(positions.size, np.nan)
    i = np.minimum(np.searchsorted(at, positions), at.size - 1)
    return np.where(at[i] == positions, med[i], np.nan)


def _risen_candidates(
    positions: np.ndarray,
    over: np.ndarray,
    stride: int,
    null: float,
    alpha: float,
    least: int,
    unit_classes: bool,
) -> list[tuple[np.ndarray, bool]]:
    """The sets of addresses that may have risen, in the order to try them, each with whether
    it is a unit class (taken whole): the first address of each unit alone where it explains
    every rise beyond the noise (the rises outside it are no more than the noise's rate), else
    all addresses (if their rises pass the test), then that class. Without `unit_classes`, all
    addresses only."""
    unit = _unit_rise(positions, over, stride, null, alpha, least) if unit_classes else None
    if unit is not None and binom_sf(over[~unit].sum() - 1, int((~unit).sum()), null) >= alpha:
        return [(unit, True)]
    every = (
        [(np.ones(over.size, dtype=bool), False)]
        if binom_sf(over.sum() - 1, over.size, null) < alpha
        else []
    )
    return every + ([(unit, True)] if unit is not None else [])


def _unit_rise(
    positions: np.ndarray,
    over: np.ndarray,
    stride: int,
    null: float,
    alpha: float,
    min_addresses: int,
) -> np.ndarray | None:
    """The addresses of one residue class of the walk's elements (every r-th element, r a power
    of two) in which the rises cannot be noise, or None.

    At a stride below a translation unit of r strides, a walk one unit past the level's reach
    misses only on the first access of each unit: 1 in r addresses rises, too few among all of
    them for the binomial test, but all of one residue class mod r. Each class of each r is
    tested at the noise's rate of rises, the p-value multiplied by the number of classes
    tested (Bonferroni); the class of the smallest p-value is taken if that passes `alpha`."""
    element = np.asarray(positions, dtype=np.int64) * ELEMENT_BYTES // stride
    best: tuple[float, int, int] = (1.0, 0, 0)  # p-value, r, residue
    r = 2
    while over.size // r >= min_addresses:
        size = np.bincount(element % r, minlength=r)
        k = np.bincount(element % r, weights=over, minlength=r).astype(np.int64)
        for offset in np.flatnonzero(k >= min_addresses):
            p = float(binom_sf(k[offset] - 1, size[offset], null))
            if p < best[0]:
                best = (p, r, int(offset))
        r *= 2
    p, r_best, offset = best
    classes = r - 2  # 2 + 4 + ... + r / 2
    if r_best == 0 or p * classes >= alpha:
        return None
    return element % r_best == offset


# --- the level the onsets describe -------------------------------------------------------------
@dataclass(frozen=True)
class HiddenLevel:
    page_bytes: int | None
    page_evidence: str
    page_confidence: float
    entries: int | None
    entries_bracket: tuple[int, int]  # inclusive
    entries_evidence: str
    reach_bytes: int  # largest array without a miss at the smallest stride
    one_set: bool | None  # every address of a walk one entry too long rose (stride >= page)
    set_evidence: str
    penalty_cycles: float
    penalty_evidence: str
    onsets: tuple[ShiftOnset, ...]


def _units(elements: int, stride: int, page: int) -> int:
    """Translation units a walk of `elements` from offset 0 at `stride` touches."""
    return (elements - 1) * stride // page + 1 if stride < page else elements


def _page(onsets: list[ShiftOnset]) -> tuple[int | None, str, float]:
    small = onsets[0]
    if small.spacing_bytes is None or small.spacing_bytes <= small.stride_bytes:
        return (
            None,
            f"the risen addresses lie one stride apart already at the smallest stride "
            f"({small.stride_bytes} bytes): the unit is no larger than it; sweep smaller strides",
            0.0,
        )
    page = small.spacing_bytes
    agree = [o.spacing_bytes == max(o.stride_bytes, page) for o in onsets]
    evidence = (
        f"walk by walk, the addresses whose own latency rose past this level's reach lie {page} "
        f"bytes apart at strides below it ({sum(agree)}/{len(agree)} strides agree: spacing = "
        "max(stride, unit)); "
        + ", ".join(
            f"stride {o.stride_bytes // 1024} KiB: {len(o.shifted_bytes)} of {o.common} "
            f"addresses rose between walks of {o.fit_elements} and {o.first_elements}"
            for o in onsets
        )
    )
    return page, evidence, float(np.mean(agree)) * float(np.mean([o.spacing_share for o in onsets]))


def hidden_level(
    onsets: list[ShiftOnset], *, threshold_reach_bytes: int | None
) -> HiddenLevel | None:
    """The translation level of the paired onsets, if it lies in front of the level the
    threshold reading found (reach at most half of `threshold_reach_bytes`; None: that reading
    found none); else None (the threshold reading already has it)."""
    if not onsets:
        return None
    onsets = sorted(onsets, key=lambda o: o.stride_bytes)
    reach = onsets[0].fit_bytes
    if threshold_reach_bytes is not None and 2 * reach > threshold_reach_bytes:
        return None
    page, page_evidence, page_confidence = _page(onsets)
    if page is None:
        return HiddenLevel(
            None, page_evidence, 0.0, None, (0, 0), page_evidence, reach, None,
            page_evidence, float(np.median([o.penalty_cycles for o in onsets])),
            "", tuple(onsets),
        )  # fmt: skip
    # entries: every stride brackets them; strides whose bracket misses the smallest stride's
    # belong to another level (a further TLB overflowing at the same walk)
    brackets = []
    for o in onsets:
        lo = _units(o.fit_elements, o.stride_bytes, page)
        hi = _units(o.first_elements, o.stride_bytes, page) - 1
        brackets.append((o, lo, max(lo, hi)))
    lo, hi = brackets[0][1], brackets[0][2]
    used = []
    for o, a, b in brackets:
        if a <= hi and b >= lo:
            lo, hi = max(lo, a), min(hi, b)
            used.append(o)
    text = "; ".join(
        f"stride {o.stride_bytes // 1024} KiB: {a}..{b}" for o, a, b in brackets if o in used
    )
    entries = lo if lo == hi else None
    entries_evidence = (
        f"units of {page} bytes that fit, by stride (walks without and with the rise): {text}"
        + (f"; together exactly {lo}" if entries else f"; together {lo}..{hi}")
    )
    # the set reading (TPDS Fig. 10): at a stride of a unit or more every address is its own
    # unit, so a fully associative LRU level one entry short misses on every address
    full = [o for o in used if o.stride_bytes >= page]
    one_set = None
    set_evidence = "no stride of at least one unit shows the onset"
    if full:
        shares = [len(o.shifted_bytes) / max(o.common, 1) for o in full]
        one_set = bool(min(shares) >= 0.9)
        set_evidence = ", ".join(
            f"stride {o.stride_bytes // 1024} KiB: {len(o.shifted_bytes)} of the {o.common} "
            f"addresses rose from {o.fit_elements} to {o.first_elements} units"
            for o in full
        ) + (
            ": every unit of the walk misses once the level overflows (one fully associative "
            "set; a cyclic walk cannot tell LRU from FIFO)"
            if one_set
            else ": only some units miss (set-associative); these walks do not count the sets"
        )
    pens = [o.penalty_cycles for o in used]
    penalty_evidence = (
        f"median rise of the risen addresses: {', '.join(f'{p:.1f}' for p in pens)} cycles "
        f"at strides {', '.join(str(o.stride_bytes // 1024) for o in used)} KiB"
    )
    return HiddenLevel(
        page, page_evidence, page_confidence, entries, (lo, hi), entries_evidence, reach,
        one_set, set_evidence, float(np.median(pens)), penalty_evidence, tuple(onsets),
    )  # fmt: skip
