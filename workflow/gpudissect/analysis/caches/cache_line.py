"""The line size b of one cache level from capacity against stride (stage 1, after the size C
and the miss granule g). Sees only traces: per-walk latencies, classified by the level's
`Classifier`.

A walk of n elements at stride s holds min(s, b) bytes of cache per element: below the line
consecutive elements share lines (every line is touched), at or past it each element takes a
line of its own. So at most C / min(s, b) elements fit, and the count that fits falls as C / s
while s < b and stops falling at s = b (it stays C / b). For each candidate P = g, 2g, 4g, ...
the rule walks n = 7/8 C / P elements at stride 2P and, failing that, at 3P/2 (and, where
every candidate overflows at both, at 5P/2):

- if P < b, the line is at least 2P and every stride is over P, so at most C / (3P/2)
  elements fit: the walk overflows by at least 31% whatever the set mapping or the policy;
- if P = b, each element takes its own line and 7/8 of the lines fit, provided the stride
  spreads them over the sets. Stride 2b does on hashed caches (the Hopper L1 keeps C / b
  elements at every power-of-two stride) but uses only the even sets of a cache indexed by
  line number mod S when S is even; stride 3b/2 touches two lines of every three (none whose
  number is 2 mod 3), spread over power-of-two bit-indexed sets, but can crowd an XOR hash and
  misses a third of the sets when S is a multiple of 3 (48 sets: neither stride fits);
  stride 5b/2 touches lines 5j and 5j + 2, each run covering every set when S is prime to 5.
  Only a modulo mapping with S a multiple of 30 defeats all three.

b is the smallest P at which a walk fits. A walk "fits" when its slow accesses are not
significant against the timing-outlier rate, or, on hashed or randomly replaced caches where a
few sets overflow at 7/8 load, when its miss share is below `LINE_RATIO` of that of a walk of
5/4 C / P elements at the same stride (which overflows by capacity if P = b). That longer walk
also confirms the count settles: if it fit too, the line would be at most P/2, contradicting
the smaller candidates, and the line is undetermined.

Walks longer than the timed buffer are timed in up to `max_windows` windows spread over one
pass (a non-LRU cache need not spread its misses evenly over the walk).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..common.misses import binom_sf

LINE_FILL = 7 / 8  # the test walk: 7/8 C / P elements
LINE_CHECK = 5 / 4  # the check walk: 5/4 C / P elements (within 64 KiB on the constant L1.5)
# A walk that fits shows at most a few percent of misses (sets overflowing on a hashed cache),
# against most accesses for the same stride at 5/4 C / P; a walk that overflows by 31% or more
# misses on a quarter or more of its accesses on every cache measured (LRU: all of them; the
# Hopper L1: ~75% at 18% over its size).
LINE_RATIO = 0.25
LINE_ALPHA = 0.01  # significance of "this walk misses"

WalkKey = tuple[int, int, bool]  # (candidate P, stride, check walk)


@dataclass(frozen=True)
class LineWalk:
    """One walk's timed accesses, pooled over its windows."""

    candidate_bytes: int
    stride_bytes: int
    check: bool
    elements: int
    slow: int
    accesses: int
    p_value: float  # P(this many slow accesses or more | timing outliers only)

    @property
    def share(self) -> float:
        return self.slow / max(self.accesses, 1)

    @property
    def significant(self) -> bool:
        return self.p_value < LINE_ALPHA

    @property
    def overflows(self) -> bool:
        """Decided without the check walk: significant, and a share no check can excuse."""
        return self.significant and self.share >= LINE_RATIO

    def describe(self) -> str:
        return (
            f"{self.elements} elements at stride {self.stride_bytes} B: {self.slow}/"
            f"{self.accesses} slow (p={self.p_value:.2g})"
        )


def line_walk(
    slow: np.ndarray,
    *,
    outlier_rate: float,
    candidate_bytes: int,
    stride_bytes: int,
    check: bool,
    elements: int,
) -> LineWalk:
    """Pool a walk's slow flags (all its windows) and test them against the outlier rate."""
    slow = np.asarray(slow, dtype=bool)
    k, n = int(slow.sum()), int(slow.size)
    p = float(binom_sf(k - 1, n, outlier_rate)) if k else 1.0
    return LineWalk(candidate_bytes, stride_bytes, check, elements, k, n, p)


def walk_elements(size_bytes: int, candidate_bytes: int, *, check: bool) -> int:
    """Elements of the test walk (7/8 C / P) or of the check walk (5/4 C / P)."""
    share = LINE_CHECK if check else LINE_FILL
    return max(1, int(np.ceil(share * size_bytes / candidate_bytes)))


def candidate_strides(candidate_bytes: int) -> tuple[int, ...]:
    """Strides a candidate is tried at, in order: 2P, 3P/2, 5P/2 (whole 4-byte elements)."""
    p = candidate_bytes
    return tuple(s for s in (2 * p, 3 * p // 2, 5 * p // 2) if s % 4 == 0)


def candidates(first_bytes: int, max_line_bytes: int) -> list[int]:
    out, line = [], first_bytes
    while line <= max_line_bytes:
        out.append(line)
        line *= 2
    return out


def windows(elements: int, record_steps: int, max_windows: int) -> list[int]:
    """First element (position in the walk) of each timed window of `record_steps` loads: one
    window while the walk is no longer than the buffer, else windows spread evenly over one
    pass (contiguous when `max_windows` of them cover it)."""
    if elements <= record_steps:
        return [0]
    w = min(-(-elements // record_steps), max_windows)
    return [k * elements // w for k in range(w)]


@dataclass(frozen=True)
class LineFinding:
    line_bytes: int | None
    reason: str | None  # why undetermined
    next_walk: WalkKey | None  # the walk the rule needs next (the sweep runs it)
    confidence: float = 0.0
    log: tuple[str, ...] = ()  # one entry per walk judged
    stride_bytes: int | None = None  # the stride whose walk fitted
    checked: bool = False  # the check walk bounded the count from above


def _verdict(test: LineWalk, check: LineWalk | None, can_check: bool) -> tuple[bool | None, str]:
    """(fits, note) of a test walk; fits is None while the check walk is still needed."""
    if not test.significant:
        return True, ""
    if test.overflows:
        return False, ""
    if not can_check:
        return False, " (few misses, but no check walk fits the address limit)"
    if check is None:
        return None, ""
    ratio = test.share / check.share if check.share > 0 else float("inf")
    return ratio < LINE_RATIO, f", {ratio:.2f} of the check walk's miss share"


def locate_line(
    walks: dict[WalkKey, LineWalk],
    *,
    size_bytes: int,
    first_bytes: int,
    max_line_bytes: int,
    runnable: Callable[[int, int], bool] = lambda elements, stride: True,
) -> LineFinding:
    """The line from the walks run so far, or the walk to run next (see module docstring).

    `first_bytes`: the smallest candidate (the miss granule: a line holds whole granules).
    `runnable(elements, stride)`: whether the load path can address that walk's array.

    The candidates are searched at strides 2P and 3P/2 first, and only when no candidate fits
    at either, again at 5P/2: below the line no stride fits, so the first search cannot stop
    early, and the third stride costs walks only on caches whose set count the first two
    crowd (traces recorded without it stay decidable wherever they were before).
    """
    log: list[str] = []
    for strides_of in (_first_strides, _third_stride):
        found = _search(walks, strides_of, size_bytes, first_bytes, max_line_bytes, runnable, log)
        if found is not None:
            return found
    reason = (
        f"no candidate up to {max_line_bytes} B fits: the count of elements that fit keeps "
        "falling with the stride (the line is longer, or the set mapping crowds every stride "
        "tried)"
    )
    return LineFinding(None, "; ".join([reason, *log]), None, log=tuple(log))


def _first_strides(candidate_bytes: int) -> tuple[int, ...]:
    return candidate_strides(candidate_bytes)[:2]


def _third_stride(candidate_bytes: int) -> tuple[int, ...]:
    return candidate_strides(candidate_bytes)[2:]


def _search(
    walks: dict[WalkKey, LineWalk],
    strides_of: Callable[[int], tuple[int, ...]],
    size_bytes: int,
    first_bytes: int,
    max_line_bytes: int,
    runnable: Callable[[int, int], bool],
    log: list[str],
) -> LineFinding | None:
    """The smallest candidate whose walk at one of `strides_of(P)` fits (a finding), the walk
    still needed, a reason to stop; None when every candidate overflows at these strides."""
    unfinished = "the trace stops before the line search ends"
    for p in candidates(first_bytes, max_line_bytes):
        n_test = walk_elements(size_bytes, p, check=False)
        n_check = walk_elements(size_bytes, p, check=True)
        tried = strides_of(p)
        strides = [s for s in tried if runnable(n_test, s)]
        if tried and not strides:
            reason = (
                f"no walk of {n_test} elements at a stride of {list(tried)} B fits the load "
                f"path's address limit (candidate {p} B)"
            )
            return LineFinding(None, "; ".join([reason, *log]), None, log=tuple(log))
        for s in strides:
            test = walks.get((p, s, False))
            if test is None:
                return LineFinding(None, unfinished, (p, s, False))
            check, can_check = walks.get((p, s, True)), runnable(n_check, s)
            fits, note = _verdict(test, check, can_check)
            if fits is None:
                return LineFinding(None, unfinished, (p, s, True))
            log.append(f"P={p} B: {test.describe()}{note} -> {'fits' if fits else 'overflows'}")
            if fits:
                return _fitting(p, s, test, check, can_check, n_check, log)
    return None


def _fitting(
    p: int,
    s: int,
    test: LineWalk,
    check: LineWalk | None,
    can_check: bool,
    n_check: int,
    log: list[str],
) -> LineFinding:
    """The finding once the walk of candidate `p` at stride `s` fits: its check walk bounds
    the count from above (or is still needed, or cannot be addressed)."""
    excess = test.share / LINE_RATIO
    if check is not None and test.significant:
        excess = test.share / check.share / LINE_RATIO
    if not can_check:
        log.append(f"no check walk ({n_check} elements exceed the address limit)")
        return LineFinding(p, None, None, 0.5 * (1.0 - excess), tuple(log), s)
    if check is None:
        return LineFinding(None, "the trace stops before the line search ends", (p, s, True))
    log.append(f"check: {check.describe()}")
    if not check.significant:
        reason = (
            f"a walk of 5/4 C / {p} elements at stride {s} B fits too, so the line would "
            f"be at most {p // 2} B, yet every smaller candidate overflowed: the set "
            "mapping crowds the strides tried"
        )
        return LineFinding(None, "; ".join([reason, *log]), None, log=tuple(log))
    conf = (1.0 - check.p_value) * (1.0 - min(excess, 1.0))
    return LineFinding(p, None, None, conf, tuple(log), s, checked=True)
