"""Replacement policy of one cache set from the stage-2 policy walks (Mei & Chu, TPDS Sec. 4.2
step 4, Sec. 4.5, Fig. 11; NPC 2014 Sec. 3 (4)). Sees only traces.

Two walks over the ways + 1 lines of one set, both from a cold start:

- **A** (cyclic): the lines in turn. LRU and FIFO miss on every access; tree-PLRU misses in a
  fixed periodic pattern; a random policy misses aperiodically.
- **B** (the same lines in a fixed pseudo-random order, several elements of each): reuse
  distances vary, so LRU, FIFO and tree-PLRU predict different misses.

Rules, in order:

1. Each candidate deterministic policy (LRU, FIFO, and tree-PLRU where the ways are a power of
   two) is run as a hypothesis on the exact line sequence of both walks (fill the first free
   way, then the policy's victim) and its predicted misses are compared with the measured ones
   after the first two cycles; a candidate is consistent when at most 0.1% of the accesses
   disagree (walk A and walk B each). One consistent candidate is the policy. Accesses served
   by a faster cache in front (the constant L1 before the L1.5) never reach this set and are
   left out of the walk.
2. Otherwise walk A's misses are tested for periodicity (the paper's LRU criterion): aperiodic
   misses mean a non-deterministic policy. Because the set holds ways + 1 lines, exactly one is
   absent at any time, so each miss's victim is the line of the next miss; following the lines'
   ways from the cold fill (first free way first) reconstructs which way every miss replaced
   (TPDS Fig. 11). The replacement frequency per way estimates the policy; uniform frequencies
   (chi-square test) read `random`, others `non-lru` with the frequencies.
3. Too few misses, or a reconstruction the measured hits contradict, leave the policy
   undetermined.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

MISMATCH_TOLERANCE = 0.005  # periodicity: share of disagreeing accesses allowed
MISCLASSIFIED = 0.001  # share of in-band misclassified accesses a consistent policy may have
MIN_MISSES = 200  # fewest reconstructed replacements for frequencies
MAX_INCONSISTENT = 0.01


def _lru(ways: int) -> Callable:
    order: OrderedDict[int, None] = OrderedDict()  # ways, least recent first

    def step(way: int | None, hit: bool, fill: int | None) -> int:
        if hit:
            order.move_to_end(way)
            return way
        if fill is not None:
            order[fill] = None
            return fill
        victim, _ = order.popitem(last=False)
        order[victim] = None
        return victim

    return step


def _fifo(ways: int) -> Callable:
    order: list[int] = []

    def step(way: int | None, hit: bool, fill: int | None) -> int:
        if hit:
            return way
        if fill is not None:
            order.append(fill)
            return fill
        victim = order.pop(0)
        order.append(victim)
        return victim

    return step


def _plru(ways: int) -> Callable:
    bits = [0] * ways  # heap-numbered tree nodes 1..ways-1; 0: the victim is on the left

    def touch(way: int) -> None:
        node, lo, size = 1, 0, ways
        while node < ways:
            half = size // 2
            left = way < lo + half
            bits[node] = 1 if left else 0  # point away from the used way
            node, lo = (2 * node, lo) if left else (2 * node + 1, lo + half)
            size = half

    def step(way: int | None, hit: bool, fill: int | None) -> int:
        if hit:
            touch(way)
            return way
        if fill is not None:
            touch(fill)
            return fill
        node = 1
        while node < ways:
            node = 2 * node + bits[node]
        victim = node - ways
        touch(victim)
        return victim

    return step


POLICIES: dict[str, Callable[[int], Callable]] = {"lru": _lru, "fifo": _fifo, "plru": _plru}


def predict(lines: np.ndarray, ways: int, policy: str) -> np.ndarray:
    """Misses a `policy` set of `ways` ways would have on the line sequence, from cold."""
    step = POLICIES[policy](ways)
    where: dict[int, int] = {}  # line -> way
    holder: dict[int, int] = {}  # way -> line
    out = np.zeros(len(lines), dtype=bool)
    for i, line in enumerate(lines):
        line = int(line)
        if line in where:
            step(where[line], True, None)
            continue
        out[i] = True
        free = len(holder) if len(holder) < ways else None  # ways fill in order 0, 1, ...
        way = step(None, False, free)
        if way in holder:
            del where[holder[way]]
        holder[way], where[line] = line, way
    return out


def candidates(ways: int) -> list[str]:
    names = ["lru", "fifo"]
    if ways > 2 and ways & (ways - 1) == 0:  # a 2-way tree-PLRU is LRU
        names.append("plru")
    return names


@dataclass(frozen=True)
class Walk:
    """One walk from a cold start: the line of every access and whether it missed. `outlier`
    marks accesses far above the miss level (timing outliers): they count as misses only on a
    line's first access (the cold fill), and are left out of every comparison."""

    lines: np.ndarray
    missed: np.ndarray
    outlier: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.outlier is None:
            object.__setattr__(self, "outlier", np.zeros(len(self.lines), dtype=bool))
        first = np.zeros(len(self.lines), dtype=bool)
        first[np.unique(self.lines, return_index=True)[1]] = True
        object.__setattr__(self, "missed", np.asarray(self.missed, bool) | first)
        object.__setattr__(self, "outlier", np.asarray(self.outlier, bool) & ~first)


def mismatches(walk: Walk, ways: int, policy: str) -> tuple[int, int]:
    """(disagreements, compared accesses) after the first two cycles."""
    skip = 2 * (ways + 1)
    pred = predict(walk.lines, ways, policy)
    keep = ~walk.outlier[skip:]
    diff = (pred[skip:] != walk.missed[skip:])[keep]
    return int(diff.sum()), int(diff.size)


def consistent(walks: list[Walk], ways: int, policy: str) -> tuple[bool, int, int]:
    """Whether `policy` predicts the walks' misses: at most 0.1% of the compared accesses (and
    at least two) may disagree. Outliers above the miss band are already left out; what is
    left is a slow access inside the band, which is rare."""
    bad = total = 0
    for w in walks:
        b, t = mismatches(w, ways, policy)
        bad, total = bad + b, total + t
    return bad <= max(2.0, MISCLASSIFIED * total), bad, total


def periodic(missed: np.ndarray, cycle: int, *, max_cycles: int = 8) -> int | None:
    """Smallest period (a multiple of the cycle length) of the miss sequence after two cycles,
    allowing 0.5% disagreements; None when aperiodic."""
    m = np.asarray(missed, dtype=bool)[2 * cycle :]
    for r in range(1, max_cycles + 1):
        p = r * cycle
        if m.size <= 2 * p:
            break
        if np.mean(m[p:] != m[:-p]) <= MISMATCH_TOLERANCE:
            return p
    return None


@dataclass
class Reconstruction:
    ways: int
    replaced: list[int] = field(default_factory=list)  # way replaced by each miss, in order
    misses: int = 0
    inconsistent: int = 0  # accesses the one-absent-line model contradicts
    outliers: int = 0  # accesses far above the miss level
    stopped: int = 0  # walks cut short at an outlier on a present line
    counts: np.ndarray | None = None

    @property
    def frequencies(self) -> np.ndarray:
        return self.counts / max(self.counts.sum(), 1)


def reconstruct(walks: list[Walk], ways: int) -> Reconstruction:
    """Which way each miss replaced (module docstring, rule 2), pooled over the walks.

    State: the lines present with their ways, and the line last brought in (`pending`), whose
    way is that of the victim it evicted. The victim is the first present line that misses
    afterwards; it then takes the pending line's place as the one being brought in.
    """
    rec = Reconstruction(ways=ways, counts=np.zeros(ways, dtype=np.int64))
    for w in walks:
        where: dict[int, int] = {}
        pending: int | None = None
        for line, missed, outlier in zip(
            w.lines.tolist(), w.missed.tolist(), w.outlier.tolist(), strict=True
        ):
            if outlier:
                rec.outliers += 1
                if line == pending:
                    continue  # just brought in: a slow hit
                if line in where:
                    # a hit or the victim's miss, slowed down: the data cannot tell which, and
                    # a wrong guess would relabel every later way; the rest of this walk is
                    # left out (the stop does not depend on the victims, so no bias)
                    rec.stopped += 1
                    break
                missed = True  # an absent line: a miss
            if line == pending:
                rec.inconsistent += int(missed)  # it was just brought in: a slow hit
                continue
            if not missed:
                if line not in where:
                    rec.inconsistent += 1  # a line neither present nor pending hit
                continue
            if line not in where:
                if len(where) < ways and pending is None:
                    where[line] = len(where)  # cold fill: the next free way
                elif pending is None:
                    pending = line  # the first replacement: its victim shows at its miss
                else:
                    rec.inconsistent += 1  # two lines without a way: not ways + 1 lines
                continue
            if pending is None:
                rec.inconsistent += 1  # a present line missed with nothing brought in
                continue
            way = where.pop(line)
            where[pending] = way
            rec.replaced.append(way)
            rec.counts[way] += 1
            rec.misses += 1
            pending = line
    return rec


def uniform_p_value(counts: np.ndarray) -> float:
    """Pearson's chi-square test of `counts` against equal frequencies (what
    `scipy.stats.chisquare(counts)` computes; scipy.special keeps scipy.stats' import off
    this job)."""
    from scipy.special import chdtrc

    counts = np.asarray(counts, dtype=float)
    if counts.sum() <= 0:
        return 1.0
    expected = counts.mean()
    statistic = float(((counts - expected) ** 2 / expected).sum())
    return float(chdtrc(counts.size - 1, statistic))
