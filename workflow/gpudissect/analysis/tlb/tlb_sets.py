"""Entries, sets and ways of one TLB level from misses per traversal against walk length (TPDS
Sec. 4.4, Fig. 10). Sees only the counts the pages stage made of the trace (`tlb.fit_pages`).

A walk of m pages at stride = page holds every page of the shorter walks, so under LRU or FIFO
a set that overflows stays overflowed, and a set of w ways holding w + 1 pages misses on all of
them every traversal. The largest walk without a miss fills every set exactly (its length is
the entries); from there each further page either overflows one more set (misses grow by
ways + 1) or lands in a set that overflowed already (misses grow by one). The increments thus
list the sets in the order the pages reach them, with a 1 wherever a page returns to an
overflowed set before the others have overflowed (an unequal table whose largest set takes two
consecutive pages); the reading is complete when the ways add up to the entries and the next
page adds one miss.

Long walks fit in a launch's buffer only a few times, so their counts have no median over three
traversals to drop a stray timing outlier: one miscounted miss moves one increment up and the
next down (equal sets of 16 read as 15 and 17, whose sum is still right). Where the counts
allow it, the simplest structure is preferred: equal sets whose predicted counts lie within
the counting error of every walk. A count from `MEDIAN_TRAVERSALS` traversals or more has none
(the median drops an outlier); one from fewer may be off by one unseen outlier plus each of its
accesses that fell in no latency level (an outlier on a miss lifts it above every level).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

MEDIAN_TRAVERSALS = 3  # a median over this many traversals drops one stray outlier


@dataclass(frozen=True)
class SetStructure:
    entries: int | None
    sets: int | None
    ways: tuple[int, ...] | None
    increments: tuple[int, ...]
    policy: str | None
    evidence: str
    confidence: float


def _strays(m: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, str]:
    """Single misses a traversal with a longer walk missing none: an overflowed set misses at
    least ways + 1 >= 2 times a traversal and stays overflowed, so these are timing outliers."""
    later_zero = np.flip(np.cumsum(np.flip(k == 0))) - (k == 0) > 0
    stray = (k == 1) & later_zero
    note = (
        f" (single misses a traversal at {m[stray].tolist()[:8]} pages, each followed by a longer "
        "walk with none, taken as timing outliers)"
        if stray.any()
        else ""
    )
    return stray, note


def read_ways(incs: list[int], entries: int, lru_extra: int) -> tuple[int, ...] | None:
    """Ways of the sets in the order they overflow, from the increments past the reach (None:
    they do not add up to `entries`, or no page after the last overflow confirms the end).

    `lru_extra` 1: an overflowing set adds ways + 1 misses, a page into a set that overflowed
    already adds 1; 0: TPDS's count (an increment is the ways), read while increments exceed 1.
    """
    ways: list[int] = []
    for d in incs:
        if sum(ways) >= entries and ways:
            return tuple(ways) if d == 1 and sum(ways) == entries else None
        if d > 1:
            ways.append(d - lru_extra)
        elif d == 1 and lru_extra and ways:
            continue
        else:
            return None
    return None


def overflows_end(increments: list[int], *, entries: int) -> bool:
    """Whether the one-page-apart walks past the reach can stop (the sweep asks): the last two
    pages added one miss each, and the sets that overflowed so far account for every entry (a
    set of w ways adds w + 1 misses, or w in TPDS's count). Two pages returning to the largest
    set before the others overflow also add one miss each; that alone does not end the walks."""
    big = [d for d in increments if d > 1]
    return len(increments) >= 3 and increments[-2:] == [1, 1] and sum(big) >= entries > 0


def _equal_sets(
    m: np.ndarray, k: np.ndarray, tolerance: np.ndarray, entries: int, first: int
) -> tuple[int, ...] | None:
    """Equal LRU sets (entries / S ways each, consecutive pages in different sets) whose
    predicted misses lie within `tolerance` of every one-page-apart walk past the reach; of
    several, the closest. The walks must reach past the last set's overflow."""
    dense = first + int(np.argmin(np.r_[np.diff(m[first:]) == 1, False]))
    j = m[first : dense + 1] - entries
    observed, tol = k[first : dense + 1], tolerance[first : dense + 1]
    best: tuple[float, tuple[int, ...]] | None = None
    for sets in range(1, entries + 1):
        if entries % sets or j.size == 0 or j.max() <= sets:
            continue
        ways = entries // sets
        # the walks until every set overflowed and one page after (later ones add one miss a
        # page whatever the sets)
        near = j <= sets + 1
        predicted = np.minimum(j, sets) * (ways + 1) + np.maximum(j - sets, 0)
        off = np.abs(predicted - observed)[near]
        if np.all(off <= tol[near]) and (best is None or off.sum() < best[0]):
            best = (float(off.sum()), (ways,) * sets)
    return None if best is None else best[1]


def set_structure(
    counts: pd.DataFrame, column: str, *, unplaced: dict[int, int] | None = None
) -> SetStructure:
    """Entries, sets and ways from misses per traversal against walk length (TPDS Fig. 10).
    `unplaced`: per walk length, the counted accesses that fell in no latency level."""
    c = counts[["elements", f"{column}_misses", f"{column}_spread"]].dropna()
    if c.empty:
        return SetStructure(None, None, None, (), None, "no walk was counted", 0.0)
    m = c["elements"].to_numpy(np.int64)
    k = np.rint(c[f"{column}_misses"].to_numpy()).astype(np.int64)
    stray, strays = _strays(m, k)
    k = np.where(stray, 0, k)
    missing = np.nonzero(k > 0)[0]
    if missing.size == 0:
        return SetStructure(
            None, None, None, (), None, f"no miss up to {m.max()} pages{strays}", 0.0
        )
    # entries: the largest walk before the first walk that misses, if the walks are dense there
    first = int(missing[0])
    quiet = first + np.nonzero(k[first:] == 0)[0]
    if first == 0:
        why = f"the shortest walk ({m[0]} pages) already misses"
    elif m[first] - m[first - 1] != 1:
        why = (
            f"misses begin between {m[first - 1]} and {m[first]} pages, but the walks there are "
            "not one page apart"
        )
    elif quiet.size:
        longer = ", ".join(str(x) for x in m[quiet[:4]]) + (" ..." if quiet.size > 4 else "")
        why = (
            f"misses begin between {m[first - 1]} and {m[first]} pages, but longer walks miss "
            f"nothing ({longer} pages): where the overflow begins does not hold from walk to walk"
        )
    else:
        why = None
    if why is not None:
        return SetStructure(None, None, None, (), None, f"{why}{strays}", 0.0)
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
    text = (
        f"{entries} pages fit; misses per traversal grow by {incs[:12]} as the walk grows by "
        f"one page past that{strays}"
    )
    traversals = _traversals(counts.loc[c.index], m)
    lost = np.array([(unplaced or {}).get(int(x), 0) for x in m])
    error = np.where(traversals < MEDIAN_TRAVERSALS, 1 + lost, 0)
    return _reading(entries, incs, periodic, text, _equal_sets(m, k, error, entries, first))


def _traversals(rows: pd.DataFrame, m: np.ndarray) -> np.ndarray:
    """Full traversals behind each walk's count (many when the counts carry no step total)."""
    if "steps" not in rows:
        return np.full(m.shape, MEDIAN_TRAVERSALS)
    return rows["steps"].to_numpy(np.int64) // np.maximum(m, 1)


def _reading(
    entries: int,
    incs: list[int],
    periodic: bool,
    text: str,
    equal: tuple[int, ...] | None,
) -> SetStructure:
    """The structure the increments give, or the equal sets the counts also allow."""
    for lru_extra, name in (
        (1, "every page of an overflowing set misses (ways + 1)"),
        (0, "ways = missed entries (TPDS Sec. 4.4 count)"),
    ):
        ways = read_ways(incs, entries, lru_extra)
        if ways is None or min(ways) <= 0:
            continue
        if equal is not None and len(set(ways)) > 1:
            text += (
                f"; read as ways {list(ways)}, but equal sets of {equal[0]} predict every count "
                f"within its counting error (counts from fewer than {MEDIAN_TRAVERSALS} "
                "traversals: one miss plus their accesses in no level): the simpler structure "
                "is taken"
            )
            ways, name = equal, "equal sets, every page of an overflowing set misses (ways + 1)"
        # a structure the counts allow but do not pin down is less certain than one they read
        certainty = 0.7 if name.startswith("equal") else 1.0
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
            (0.95 if periodic else 0.6) * certainty,
        )
    if equal is not None:
        return SetStructure(
            entries,
            len(equal),
            equal,
            tuple(incs),
            "lru" if periodic else "non-lru",
            text + f"; equal sets of {equal[0]} ways predict every count within its counting "
            f"error (counts from fewer than {MEDIAN_TRAVERSALS} traversals: one miss plus their "
            f"accesses in no level): {len(equal)} set(s), sum {sum(equal)} = entries",
            0.6,
        )
    return _unread(entries, incs, periodic, text)


def _unread(entries: int, incs: list[int], periodic: bool, text: str) -> SetStructure:
    """Why the increments give no structure: they stall, never end, or do not add up."""
    big = []  # leading increments > 1: sets overflowing before any page returns to one
    for d in incs:
        if d <= 1:
            break
        big.append(d)
    if not big or len(big) == len(incs) or incs[len(big)] != 1:
        stalls = len(big) < len(incs) and incs[len(big)] < 1
        why = (
            f": after {len(big)} growing steps the misses grow by {incs[len(big)]}, which no "
            "LRU or FIFO set overflow makes (once every set overflows, each further page adds "
            "one miss)"
            if stalls
            else ": the set overflows do not end within the swept walks"
        )
        return SetStructure(entries, None, None, tuple(incs), None, text + why, 0.3)
    return SetStructure(
        entries,
        None,
        None,
        tuple(incs),
        "non-lru" if not periodic else None,
        text + ": the increments do not add up to the entries under LRU",
        0.2,
    )
