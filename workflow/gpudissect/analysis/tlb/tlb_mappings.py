"""TLB reach under controlled mappings (the `tlb_mappings` trace): coalescing and levels.

Each series of the trace is one layout (`contiguous`, `scattered`) and one stride: cyclic walks
of m elements (TPDS Sec. 4.4's reach walks). Read per series:

- the latency levels (pooled over the whole trace: the same translation levels under every
  layout), the base being the levels of the walks of <= 3 elements (every TLB hits);
- for each level above the base, its onset: the shortest walk from which every longer walk has
  at least two accesses per traversal at or above it (an overflowed LRU set misses ways + 1 >=
  2 times a traversal; one slow access is a timing outlier), and the longest walk before it;
  the level's reach is that walk's span (elements x stride);
- a level whose penalty hides in the spread of data latencies (an H100's L1 TLB:
  `tlb_shift`), by the paired-address reading: a separate level when its reach is below half
  of the first threshold level's.

The TLB levels, nearest first, are the hidden level (if any) and the threshold levels; level k
of the latency histogram is TLB level k's miss (all nearer levels missed too). Then, per TLB
level, the reaches of the two layouts at the smallest stride both overflow it:

- equal reach: the entry covers the same memory whatever lies behind it: not coalesced
  (`coalesced_pages` = 1; the unit may still be larger than a chunk: `tlbs` reads it);
- a smaller scattered reach: coalescing. Under the scattered layout each chunk takes its own
  entry, so at stride s the scattered reach is entries x s and the coalescing factor is
  (contiguous reach / scattered reach) x s / chunk.

A level whose onset in a series coincides with the onset of the level before it is not read
there (it may overflow earlier: nothing looks it up before the level in front misses).
`page_table.tlb_levels` counts the TLB levels the scattered walks overflow (a third level: a
further latency step beyond the L2 TLB's reach, before the walks' largest span).

Sees only the trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..common.misses import binom_sf
from ..common.result import header, quantity, undetermined
from .tlb import _slow_threshold
from .tlb_levels import (
    ELEMENT_BYTES,
    Level,
    at_or_above,
    find_levels,
    level_containing,
    miss_spacing,
    robust_sigma,
)
from .tlb_pages import merge_into_base
from .tlb_shift import _units, stride_onset
from .tlb_walks import SeriesWalks

MIN_MISSES = 2.0  # per traversal, for a walk to count as past a level's reach
TAIL_ALPHA = 0.05  # a walk's misses exceed the data latencies' tail at this significance (each
# of the walks from the onset on must)
HIDDEN = -1  # the level key of the paired-address reading
EQUAL_REL = 0.1  # reaches within 10% of each other are equal (the layouts' entries may differ
# by a few: an entry the driver or another context uses)
LEVEL_NAMES = ("l1_tlb", "l2_tlb", "l3_tlb", "l4_tlb")


@dataclass(frozen=True)
class Onset:
    level: int  # latency level index (>= 1 above the base), or HIDDEN
    fit_elements: int | None  # longest walk before the onset (None: the shortest walk misses)
    first_elements: int
    stride_bytes: int
    penalty_cycles: float | None = None  # paired reading's rise
    # the most common distance between missing accesses (the entry's unit when the stride is
    # below it, else the stride): the longest walk's, or the paired reading's risen addresses
    spacing_bytes: int | None = None

    @property
    def reach_bytes(self) -> int | None:
        return None if self.fit_elements is None else self.fit_elements * self.stride_bytes


def latency_levels(df: pd.DataFrame) -> tuple[list[Level], int]:
    """The latency levels of the trace and the index of the base (data hits, no TLB miss)."""
    ref = df.loc[df["elements"] <= 3, "latency_cycles"].to_numpy(np.float64)
    return levels_of(df["latency_cycles"].to_numpy(np.float64), ref)


def levels_of(lat: np.ndarray, ref: np.ndarray) -> tuple[list[Level], int]:
    """`latency_levels` of the latencies `lat` (float64), `ref` those of the walks of <= 3
    elements among them (every TLB hits), in the trace's order."""
    if ref.size == 0:
        ref = lat[:64]
    sigma = robust_sigma(ref)
    found = find_levels(lat, sigma=sigma)
    base, _, _ = _slow_threshold(lat, ref, found)
    levels = merge_into_base(found, (base.lo, base.hi))
    b = level_containing(levels, base.center)
    if b is None:
        levels = sorted([*levels, base], key=lambda lv: lv.center)
        b = levels.index(base)
    return levels, b


def _as_walks(df: pd.DataFrame | SeriesWalks) -> SeriesWalks:
    """One series' walks (built from its rows where given those)."""
    return df if isinstance(df, SeriesWalks) else SeriesWalks.of_frame(df)


def threshold_onsets(df: pd.DataFrame | SeriesWalks, levels: list[Level], base: int) -> list[Onset]:
    """The sustained onset of every level above the base in one series' walks."""
    walks = _as_walks(df)
    stride = walks.stride_bytes
    ms = walks.lengths()
    positions, latencies = walks.positions(ms[-1]), walks.latencies(ms[-1])  # the longest
    out = []
    for k in range(base + 1, len(levels)):
        misses = {m: walks.misses(m, levels, k) for m in ms}
        first = None
        for m in reversed(ms):
            if misses[m] < MIN_MISSES:
                break
            first = m
        if first is not None:
            first = _above_tail(ms, misses, first)
        if first is None:
            continue
        before = [m for m in ms if m < first]
        spacing, _ = miss_spacing(positions * ELEMENT_BYTES, at_or_above(latencies, levels, k))
        out.append(Onset(k - base, before[-1] if before else None, first, stride, None, spacing))
    return out


def _above_tail(ms: list[int], misses: dict[int, float], first: int) -> int | None:
    """The onset `first` moved to the first walk from which every longer walk has more misses
    than the tail of the data latencies explains (None: no such walk). The tail is the rate of
    accesses at or above the level in the walks before the onset (per element and traversal);
    a walk exceeds it where its count is significant at `TAIL_ALPHA` (binomial). An H100 run's
    data latencies reached 354 cycles where the level boundary lay at 348: a fixed 0.3% of
    every walk's accesses read as the L2-TLB miss level, two or more a traversal from walks of
    1000 elements on, long before its reach."""
    for _ in range(2):  # the rate again from the walks before the moved onset
        before = [m for m in ms if m < first]
        if not before:
            return first
        rate = sum(misses[m] for m in before) / sum(before)
        if rate == 0:
            return first
        moved = None
        for m in reversed([m for m in ms if m >= first]):
            if binom_sf(round(misses[m]) - 1, m, rate) >= TAIL_ALPHA:
                break
            moved = m
        if moved is None or moved == first:
            return moved
        first = moved
    return first


def paired_onset(df: pd.DataFrame | SeriesWalks) -> Onset | None:
    """The hidden level's onset in one series. Its rise is read over the first address of each
    translation unit where too few of all addresses rise (`stride_onset`'s `unit_classes`): at
    a stride of one chunk below a larger unit (an H100's L1 TLB: 16 MiB units walked at 2 MiB,
    where coalescing would show) 1 address in 8 rises."""
    walks = _as_walks(df)
    medians = {m: walks.medians(m) for m in walks.lengths()}
    o = stride_onset(walks.stride_bytes, medians, unit_classes=True, pairs=walks.pairs)
    if o is None:
        return None
    return Onset(
        HIDDEN, o.fit_elements, o.first_elements, o.stride_bytes, o.penalty_cycles, o.spacing_bytes
    )


def series_onsets(
    df: pd.DataFrame | SeriesWalks, levels: list[Level], base: int, paired: Onset | None = None
) -> list[Onset]:
    """Onsets of one series, nearest level first: the hidden level (paired reading, or
    `paired` where the caller read it) when its reach is below half the first threshold
    level's, then the threshold levels."""
    walks = _as_walks(df)
    found = threshold_onsets(walks, levels, base)
    paired = paired if paired is not None else paired_onset(walks)
    if paired is not None and paired.fit_elements is not None:
        first = found[0].first_elements if found else None
        if first is None or 2 * paired.first_elements <= first:
            found = [paired, *found]
    return found


def onset_brackets(
    df: pd.DataFrame,
    *,
    layout: str,
    stride_bytes: int,
    levels: tuple[list[Level], int] | None = None,
) -> list[tuple[int, int]]:
    """`series_brackets` of the walks of one layout and stride among `df` (the levels from
    all of `df` where not given)."""
    if df.empty:
        return []
    levels = levels if levels is not None else latency_levels(df)
    keep = (df["layout"] == layout).to_numpy() & (df["stride_bytes"] == stride_bytes).to_numpy()
    if not keep.any():
        return []
    return series_brackets(SeriesWalks.of_frame(df if keep.all() else df[keep]), levels)


def series_brackets(walks: SeriesWalks, levels: tuple[list[Level], int]) -> list[tuple[int, int]]:
    """For the sweep: (longest walk without, shortest with) of each onset of one series, for
    the bisection to narrow to one element. The levels are `latency_levels` of all walks so
    far, read by the sweep: one series alone may hold too few data hits to place the base's
    upper edge. `walks` keeps what it read of each walk, and the sweep keeps `walks` between
    rounds: each walk is read once."""
    if not len(walks):
        return []
    levels, base = levels
    paired = paired_onset(walks)
    found = [
        (o.fit_elements, o.first_elements)
        for o in series_onsets(walks, levels, base, paired)
        if o.fit_elements is not None
    ]
    # the hidden level's onset too where the threshold reading puts an onset in front of it:
    # levels read from the walks so far (one series early in the sweep) can be off, and the
    # reading of the whole trace then keeps the hidden onset, which must be one element apart
    if paired is not None and paired.fit_elements is not None:
        found.append((paired.fit_elements, paired.first_elements))
    return sorted(set(found))


# --- across series and layouts ----------------------------------------------------------------
@dataclass(frozen=True)
class SeriesReading:
    layout: str
    stride_bytes: int
    chunk_bytes: int
    max_elements: int
    walks: int
    onsets: tuple[Onset, ...]

    @property
    def span_bytes(self) -> int:
        return self.max_elements * self.stride_bytes

    def onset(self, level: int) -> Onset | None:
        """Level `level`'s onset here, unless it coincides with the level before's."""
        keys = [o.level for o in self.onsets]
        if level not in keys:
            return None
        i = keys.index(level)
        o = self.onsets[i]
        if o.fit_elements is None:
            return None
        if i > 0 and _same_onset(self.onsets[i - 1].first_elements, o.first_elements):
            return None
        return o


def _same_onset(a: int | None, b: int | None) -> bool:
    """Two levels' onsets in one series are one (a slower share of one level's misses) when
    they lie within 2 elements or 1% of each other: an H100's L2-TLB misses at 32 MiB read
    388 cycles from 2049 elements and a share of them 419 cycles from 2050."""
    if a is None or b is None:
        return a == b
    return abs(a - b) <= max(2, min(a, b) // 100)


def read_series(df: pd.DataFrame, levels: list[Level], base: int) -> list[SeriesReading]:
    out = []
    for (layout, stride), g in df.groupby(["layout", "stride_bytes"], sort=True):
        out.append(
            SeriesReading(
                str(layout),
                int(stride),
                int(g["chunk_bytes"].iloc[0]),
                int(g["elements"].max()),
                int(g["elements"].nunique()),
                tuple(series_onsets(SeriesWalks.of_frame(g), levels, base)),
            )
        )
    return out


def _mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:g} MiB"


def _reach(series: list[SeriesReading], layout: str, level: int):
    """(onset, series) of `layout`'s smallest stride that reads `level`, else None."""
    for s in sorted(series, key=lambda s: s.stride_bytes):
        if s.layout == layout and s.onset(level) is not None:
            return s.onset(level), s
    return None


def _why_they_end(mine: list[SeriesReading], params: dict[str, Any]) -> str:
    """What ended the longest walks of one layout: the records of one launch, or the range
    mapped (the longest contiguous series, itself bounded by the device memory)."""
    steps, traversals = params.get("max_record_steps"), params.get("traversals")
    if not (mine and steps and traversals):
        return ""
    cap = int(steps) // int(traversals)
    mapped = max(s.span_bytes for s in mine)

    def end(s: SeriesReading) -> str:
        if s.max_elements >= int(steps) - 1:  # a contiguous series extended to one traversal
            return f"the records hold no traversal of a longer walk ({steps} records)"
        if s.max_elements >= cap:
            return f"the records hold no longer walk ({steps} / {traversals} traversals)"
        if s.span_bytes >= mapped:
            return "the mapped range (the longest series' max_array_bytes, at most the memory)"
        return "the series' max_array_bytes, its onsets as many as the scattered walks'"

    ends = [f"{_mib(s.span_bytes)} at stride {_mib(s.stride_bytes)}: {end(s)}" for s in mine]
    return f"; the walks end at {', '.join(ends)}"


def _reach_quantity(
    series, layout: str, level: int, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    found = _reach(series, layout, level)
    mine = [s for s in series if s.layout == layout]
    if found is None:
        spans = ", ".join(f"{_mib(s.span_bytes)} at stride {_mib(s.stride_bytes)}" for s in mine)
        why = _why_they_end(mine, params or {}) if layout == "contiguous" else ""
        return undetermined(
            f"no {layout} walk reads this level's onset (walks up to {spans or 'none'}): its "
            f"reach lies beyond them, or it overflows with the level in front of it{why}"
        )
    o, s = found
    return quantity(
        o.reach_bytes,
        unit="bytes",
        confidence=0.9 if o.first_elements - o.fit_elements == 1 else 0.6,
        method=f"reach walks over the {layout} mapping (one element per stride, cyclic, LRU "
        f"overflow: >= {MIN_MISSES:g} misses per traversal in every longer walk)",
        evidence=f"stride {_mib(s.stride_bytes)}: walks of {o.fit_elements} elements fit, from "
        f"{o.first_elements} on every walk misses ({s.walks} walks up to {s.max_elements})",
    )


def entries_quantity(series: list[SeriesReading], level: int) -> dict[str, Any]:
    """The level's entries from the contiguous walks: the translation units that fit. The unit
    is the spacing of the misses where it exceeds the stride (else each element is a unit of
    its own); every stride that reads the level brackets the units between its walks without
    and with the overflow, and the brackets intersected give the count. Over a mapping the
    experiment made, the count does not depend on where the driver put the pages."""
    read = sorted(
        ((s, s.onset(level)) for s in series if s.layout == "contiguous" and s.onset(level)),
        key=lambda x: x[0].stride_bytes,
    )
    if not read:
        return undetermined("no contiguous walk reads this level's onset")
    read, aliased = _unaliased(series, read, level)
    if not read:
        return undetermined("; ".join(aliased))
    spaced = [
        o.spacing_bytes for s, o in read if o.spacing_bytes and o.spacing_bytes > s.stride_bytes
    ]
    unit = max(spaced) if spaced else read[0][0].stride_bytes
    lo, hi, parts = 0, None, []
    for s, o in read:
        a = _units(o.fit_elements, s.stride_bytes, unit)
        b = max(a, _units(o.first_elements, s.stride_bytes, unit) - 1)
        parts.append(f"stride {_mib(s.stride_bytes)}: {a}..{b}")
        lo, hi = max(lo, a), b if hi is None else min(hi, b)
    text = (
        f"units of {_mib(unit)} that fit, by stride (walks without and with the overflow): "
        + ", ".join(parts)
    )
    if hi < lo:
        return undetermined(f"{text}: the brackets do not overlap")
    if hi > lo:
        return undetermined(f"{text}: together {lo}..{hi}, the walks are not one unit apart")
    return quantity(
        lo,
        unit="entries",
        confidence=0.9,
        method="reach walks over the contiguous mapping: translation units (the spacing of the "
        "misses, or the stride) that fit, each stride's bracket intersected",
        evidence=f"{text}; together exactly {lo}",
    )


def _unaliased(series: list[SeriesReading], read, level: int):
    """The contiguous readings whose count can be the level's entries, and why the others
    cannot. Where the contiguous misses lie one stride apart, every element takes an entry of
    its own under either mapping, so the scattered walks at that stride must fit as many: where
    they fit another count, the elements fall into some of the level's sets only (set bits
    below the stride: the A100 twin's 4096-entry L2 TLB fits 2048 elements of 16 MiB contiguous
    and 512 scattered), and neither count is the entries."""
    kept, why = [], []
    for s, o in read:
        x = next(
            (t for t in series if t.layout == "scattered" and t.stride_bytes == s.stride_bytes),
            None,
        )
        ox = x.onset(level) if x is not None else None
        apart = not o.spacing_bytes or o.spacing_bytes <= s.stride_bytes
        if apart and ox is not None and abs(ox.fit_elements / o.fit_elements - 1) > EQUAL_REL:
            why.append(
                f"stride {_mib(s.stride_bytes)}: {o.fit_elements} elements fit contiguous, "
                f"{ox.fit_elements} scattered, one element per entry under either mapping: "
                "the elements fill some of the level's sets only"
            )
            continue
        kept.append((s, o))
    return kept, why


def coalescing(series: list[SeriesReading], level: int, *, nearest: bool) -> dict[str, Any]:
    """`coalesced_pages` of one level (module docstring); `nearest`: the level every access
    looks up (its reach bounds the factor even where only one layout overflows it)."""
    strides = sorted({s.stride_bytes for s in series})
    skipped: list[str] = []
    method = (
        "the level's reach under a physically contiguous mapping against a scattered one of the "
        "same virtual range (chunks in shuffled order), at the same stride: equal - the entry "
        "covers the same memory whatever is behind it; smaller scattered - the entry coalesces "
        "contiguous chunks, factor = reach ratio x stride / chunk"
    )
    for stride in strides:
        c = next((s for s in series if s.layout == "contiguous" and s.stride_bytes == stride), None)
        x = next((s for s in series if s.layout == "scattered" and s.stride_bytes == stride), None)
        if c is None or x is None:
            continue
        oc, ox = c.onset(level), x.onset(level)
        chunk = x.chunk_bytes
        # a coalesced block of K chunks shows only where the stride is below it: at one chunk,
        # or below the unit the contiguous misses lie apart
        unit = oc.spacing_bytes if oc is not None else None
        shows = stride == chunk or (unit is not None and unit > stride)
        if oc is not None and ox is not None:
            ratio = oc.reach_bytes / ox.reach_bytes
            text = (
                f"stride {_mib(stride)}: reach {_mib(oc.reach_bytes)} contiguous "
                f"({oc.fit_elements} elements), {_mib(ox.reach_bytes)} scattered "
                f"({ox.fit_elements}): ratio {ratio:.3f}"
            )
            if abs(ratio - 1) <= EQUAL_REL:
                if not shows:
                    skipped.append(
                        f"{text}, but the contiguous misses lie one stride apart (the entry's "
                        "unit is not above the stride: one element per entry under either "
                        "mapping, so coalescing cannot show there)"
                    )
                    continue
                where = (
                    "one chunk"
                    if stride == chunk
                    else f"below the contiguous unit ({_mib(unit)}: misses lie that far apart)"
                )
                return quantity(
                    1,
                    unit="pages",
                    confidence=0.9,
                    method=method,
                    evidence=f"{text}; the stride is {where}, so a coalesced block would show",
                )
            if ratio < 1:
                return undetermined(f"{text}: the scattered mapping reaches further")
            if not shows:
                # one element per entry under either mapping: the reaches differ by how the
                # two layouts' units fall into the level's sets, not by coalescing
                skipped.append(
                    f"{text}, but the contiguous misses lie one stride apart (one element per "
                    "entry under either mapping: the ratio is not a coalescing factor)"
                )
                continue
            k = ratio * stride / chunk
            p2 = 2 ** round(np.log2(k))
            dev = abs(k - p2) / p2
            return quantity(
                int(p2),
                unit="pages",
                confidence=max(0.1, 0.95 - 2 * dev),
                method=method,
                evidence=f"{text}; factor {k:.2f} chunks of {_mib(chunk)}",
            )
        if (
            oc is not None
            and ox is None
            and shows
            and x.span_bytes >= (1 - EQUAL_REL) * oc.reach_bytes
        ):
            return quantity(
                1,
                unit="pages",
                confidence=0.7,
                method=method,
                evidence=f"stride {_mib(stride)}: contiguous reach {_mib(oc.reach_bytes)}; the "
                f"scattered walks up to {_mib(x.span_bytes)} show no onset of it: the scattered "
                "reach is not smaller",
            )
        if ox is not None and oc is None and c.span_bytes > ox.reach_bytes:
            text = (
                f"stride {_mib(stride)}: scattered reach {_mib(ox.reach_bytes)}; the contiguous "
                f"walks up to {_mib(c.span_bytes)} show no onset"
            )
            if not nearest:  # its lookups there are only the misses of the levels in front
                return undetermined(
                    f"{text}, but a farther level is looked up only on the misses of the levels "
                    "in front of it, which the contiguous mapping makes fewer: no bound"
                )
            bound = c.span_bytes / ox.reach_bytes * stride / chunk
            return undetermined(
                f"{text}: coalesced by at least {bound:.1f} chunks, the factor needs longer "
                "contiguous walks"
            )
    if skipped:
        return undetermined("; ".join(skipped))
    return undetermined(
        "no stride at which both mappings read this level's reach (or one reach and walks of "
        "the other past it)"
    )


def _penalty(levels: list[Level], base: int, level: int, onset: Onset | None) -> dict[str, Any]:
    if level == HIDDEN:
        if onset is None or onset.penalty_cycles is None:
            return undetermined("the hidden level's rise was not read")
        return quantity(
            round(onset.penalty_cycles, 2),
            unit="cycles",
            confidence=0.7,
            method="paired-address reading: median rise of the addresses that rose",
            evidence=f"stride {_mib(onset.stride_bytes)}, walks of {onset.fit_elements} -> "
            f"{onset.first_elements}",
        )
    here, below = levels[base + level], levels[base + level - 1]
    return quantity(
        round(here.center - below.center, 2),
        unit="cycles",
        confidence=0.8,
        method="latency level of this TLB level's miss minus the level below it",
        evidence=f"{here.center:g} - {below.center:g} cycles ({here.count} accesses)",
    )


def analyse(
    data: pd.DataFrame, *, provenance: dict[str, Any], inputs: dict | None = None
) -> dict[str, Any]:
    """The `tlb_mappings` result document for one device."""
    doc = header("tlb_mappings", provenance)
    if data.empty:
        reason = "the trace holds no walk"
        doc["elements"] = {"l1_tlb": {"coalesced_pages": undetermined(reason)}}
        doc["page_table"] = {"tlb_levels": undetermined(reason)}
        return doc
    levels, base = latency_levels(data)
    series = read_series(data, levels, base)
    params = provenance.get("config", {}).get("parameters", {})
    found = sorted({o.level for s in series for o in s.onsets}, key=lambda k: (k != HIDDEN, k))
    # a latency level that only ever sets in with the level before it has no reach of its own:
    # not a TLB level (the slower part of that level's misses, e.g. a longer page walk)
    keys = [k for k in found if any(s.onset(k) is not None for s in series)]
    elements: dict[str, dict[str, Any]] = {}
    for i, (name, key) in enumerate(zip(LEVEL_NAMES, keys, strict=False)):
        onset = _reach(series, "scattered", key) or _reach(series, "contiguous", key)
        elements[name] = {
            "coalesced_pages": coalescing(series, key, nearest=i == 0),
            "entries": entries_quantity(series, key),
            "reach_contiguous_bytes": _reach_quantity(series, "contiguous", key, params),
            "reach_scattered_bytes": _reach_quantity(series, "scattered", key),
            "miss_penalty_cycles": _penalty(levels, base, key, onset[0] if onset else None),
        }
    doc["elements"] = elements
    joined = [levels[base + k].center for k in found if k not in keys and k != HIDDEN]
    doc["page_table"] = {"tlb_levels": _level_count(series, keys, joined)}
    doc["levels"] = [
        {
            "latency_cycles": lv.center,
            "samples": lv.count,
            "base": i == base,
            "tlb_level": (i - base) in keys,
        }
        for i, lv in enumerate(levels)
    ]
    doc["walk_series"] = [
        {
            "layout": s.layout,
            "stride_bytes": s.stride_bytes,
            "walks": s.walks,
            "max_elements": s.max_elements,
            "onsets": [
                {
                    "level": "hidden" if o.level == HIDDEN else o.level,
                    "fit_elements": o.fit_elements,
                    "first_elements": o.first_elements,
                    "reach_bytes": o.reach_bytes,
                }
                for o in s.onsets
            ],
        }
        for s in series
    ]
    return doc


def _level_count(
    series: list[SeriesReading], keys: list[int], joined: list[float]
) -> dict[str, Any]:
    scattered = [s for s in series if s.layout == "scattered"]
    seen = [k for k in keys if any(s.onset(k) is not None for s in scattered)]
    if not scattered or not seen:
        return undetermined("no scattered walk overflows a TLB level")
    span = max(s.span_bytes for s in scattered)
    reaches = [_reach(series, "scattered", k)[0].reach_bytes for k in seen]
    return quantity(
        len(seen),
        unit="levels",
        confidence=0.8,
        method="TLB levels the scattered walks overflow one after another: each a latency "
        "step of its own past the previous level's reach (the paired-address reading for a "
        "level hidden in the data latencies)",
        evidence="scattered reaches "
        + ", ".join(_mib(r) for r in reaches)
        + f"; no further step up to the longest scattered walk ({_mib(span)}): a level with a "
        "larger reach would not show"
        + (
            f"; the latency level(s) at {', '.join(f'{c:g}' for c in joined)} cycles set in "
            "only together with the level below (no reach of their own: a slower share of "
            "that level's misses, not a further TLB)"
            if joined
            else ""
        ),
    )
