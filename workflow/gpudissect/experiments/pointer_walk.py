"""Pointer walks over chosen lines (`kernels/pointer_walk.cu`): the work one launch runs, and the
packing of many small tests (visit these lines in this order, time these visits) into few
launches.

A pointer chain visits each 8-byte word at most once (the word holds the next address), so a
line visited several times in one launch is visited at a different word of it each time: the
k-th visit of a line in a launch reads its word k. A timed visit must read a sector the previous
visit of its line filled (a cache that fills only the requested sector would otherwise time a
sector miss on a present line), so the packer skips a word where the pair would straddle two
sectors, and starts a new launch when a line runs out of words or the records run out of
shared memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat

import numpy as np

from ..patterns import all_distinct

WORD_BYTES = 8
SECTOR_BYTES = 32
# the walk's shared memory: the sink (8 bytes), then per record its latency and its step (4 + 4),
# and the sentinel step (4)
SHARED_FIXED_BYTES = 12


def max_records(shared_buffer_bytes: int) -> int:
    """Timed loads one launch can keep in `shared_buffer_bytes` of shared memory."""
    return max((shared_buffer_bytes - SHARED_FIXED_BYTES) // 8, 0)


@dataclass(frozen=True)
class PointerWalkWork:
    """One launch: one thread walks `p = *p` over the words at `offsets_bytes` (distinct, 8-byte
    aligned, from the base of a window of `window_bytes`, a power of two, whose base address is
    a multiple of `window_bytes`, so that offsets and addresses agree in every bit below it), in
    order, through ld.global.ca, and times the loads at `record_steps` (sorted positions in the
    walk). Every launch of one experiment has the same `shared_buffer_bytes` (carved from the
    L1's array) and carveout."""

    window_bytes: int
    offsets_bytes: np.ndarray  # int64
    record_steps: np.ndarray  # uint32
    shared_buffer_bytes: int
    carveout_pct: int | None = None

    def __post_init__(self) -> None:
        w, off, rec = self.window_bytes, self.offsets_bytes, self.record_steps
        if w < 4096 or w & (w - 1):
            raise ValueError(f"window_bytes must be a power of two >= 4096, got {w}")
        if off.dtype != np.int64 or off.ndim != 1 or len(off) == 0:
            raise TypeError("offsets_bytes must be a non-empty 1-D int64 array")
        if off.min() < 0 or off.max() >= w or np.any(off % WORD_BYTES):
            raise ValueError("offsets_bytes must be 8-byte aligned words inside the window")
        if not all_distinct(off):
            raise ValueError("a pointer walk visits each word at most once")
        if rec.dtype != np.uint32 or (len(rec) and (np.any(np.diff(rec.astype(np.int64)) <= 0))):
            raise TypeError("record_steps must be strictly increasing uint32 positions")
        if len(rec) and int(rec[-1]) >= len(off):
            raise ValueError("record_steps must be positions of the walk")
        if len(rec) > max_records(self.shared_buffer_bytes):
            raise ValueError(
                f"{len(rec)} records do not fit {self.shared_buffer_bytes} bytes of shared memory"
            )


@dataclass(frozen=True)
class WalkResult:
    latency_cycles: np.ndarray  # uint32, one per record step
    sm_clock_mhz: float


@dataclass(frozen=True)
class WalkTest:
    """One test: visit `lines` (line numbers in the window) in order; time the visits at
    positions `timed` (ascending)."""

    lines: np.ndarray
    timed: tuple[int, ...]


@dataclass(frozen=True)
class Launch:
    work: PointerWalkWork
    tests: tuple[int, ...]  # indices of the tests it runs, in order
    records: tuple[int, ...]  # timed loads of each of those tests


# a test of up to this many visits is placed visit by visit; a longer one by array operations
# (which cost some 150 us whatever the size: most tests visit a few dozen lines)
ARRAY_VISITS = 200


class _Slots:
    """Word slots of the lines of one launch being packed: the next free word of every line
    seen (a dict: a window of many GiB has too many lines for an array indexed by line)."""

    def __init__(self, words_per_line: int) -> None:
        self.words = words_per_line
        self.next: dict[int, int] = {}

    def place(self, lines: np.ndarray, timed: set[int]) -> list[int] | None:
        """The word of each visit: a line's visits take its next free words in order, except
        that the visit before a timed visit of the same line skips a word that would end its
        sector (so the timed visit reads the sector it filled). None (and nothing taken) when
        a line runs out."""
        lines = np.asarray(lines, dtype=np.int64)
        if len(lines) > ARRAY_VISITS:
            return self._place_arrays(lines, timed)
        per_sector = SECTOR_BYTES // WORD_BYTES
        seq = lines.tolist()
        n = len(seq)
        before_timed = [False] * n  # the visits followed, in their line, by a timed visit
        last: dict[int, int] = {}
        for i, line in enumerate(seq):
            j = last.get(line)
            if j is not None and i in timed:
                before_timed[j] = True
            last[line] = i
        free = self.next
        taken: dict[int, int] = {}  # the next free word of each line of this test
        out = [0] * n
        for i, line in enumerate(seq):
            slot = taken.get(line)
            if slot is None:
                slot = free.get(line, 0)
            if before_timed[i] and slot % per_sector == per_sector - 1:
                slot += 1
            out[i] = slot
            taken[line] = slot + 1
        if taken and max(taken.values()) > self.words:
            return None
        free.update(taken)
        return out

    def _place_arrays(self, lines: np.ndarray, timed: set[int]) -> list[int] | None:
        """`place` of a long test, by array operations over its visits grouped by line."""
        per_sector = SECTOR_BYTES // WORD_BYTES
        n = len(lines)
        # visits grouped by line, in walk order within a line
        order = np.argsort(lines, kind="stable")
        grouped = lines[order]
        first = np.r_[True, grouped[1:] != grouped[:-1]]
        start = np.maximum.accumulate(np.where(first, np.arange(n), 0))
        distinct = grouped[first].tolist()
        free = np.fromiter(map(self.next.get, distinct, repeat(0)), np.int64, len(distinct))
        slot = free[np.cumsum(first) - 1] + (np.arange(n) - start)
        # the visit before each timed one of the same line (its predecessor in the group)
        where = np.empty(n, dtype=np.int64)
        where[order] = np.arange(n)
        skip = np.zeros(n, dtype=np.int64)
        timed_at = np.fromiter(timed, dtype=np.int64, count=len(timed))
        timed_at = timed_at[timed_at < n]
        cand = where[timed_at]
        cand = np.sort(cand[~first[cand]] - 1)
        # only a line with a candidate at a sector's last word can skip (a skip shifts the
        # line's later visits, so its candidates are then taken one by one)
        lines_that_may = set(start[cand[slot[cand] % per_sector == per_sector - 1]].tolist())
        shift: dict[int, int] = {}
        for i in (
            cand[np.isin(start[cand], list(lines_that_may))].tolist() if lines_that_may else ()
        ):
            g = int(start[i])
            if (int(slot[i]) + shift.get(g, 0)) % per_sector == per_sector - 1:
                skip[i] = 1
                shift[g] = shift.get(g, 0) + 1
        if shift:
            run = np.cumsum(skip)
            before = run - skip
            slot = slot + run - before[start]
        last = np.r_[first[1:], True]  # the last visit of each line
        if int(slot[last].max()) >= self.words:
            return None
        self.next.update(zip(distinct, (slot[last] + 1).tolist(), strict=True))
        out = np.empty(n, dtype=np.int64)
        out[order] = slot
        return out.tolist()


def pack(
    tests: Sequence[WalkTest],
    *,
    window_bytes: int,
    line_bytes: int,
    shared_buffer_bytes: int,
    carveout_pct: int | None,
    max_steps: int = 1 << 20,
) -> list[Launch]:
    """Launches that run `tests` in order, as few as the words of each line and the records of
    the shared memory allow."""
    words = line_bytes // WORD_BYTES
    limit = max_records(shared_buffer_bytes)
    launches: list[Launch] = []
    cur_off: list[np.ndarray] = []
    cur_rec: list[np.ndarray] = []
    cur_tests: list[int] = []
    cur_counts: list[int] = []
    slots = _Slots(words)
    steps = records = 0

    def flush() -> None:
        nonlocal slots, steps, records
        if cur_tests:
            work = PointerWalkWork(
                window_bytes=window_bytes,
                offsets_bytes=np.concatenate(cur_off).astype(np.int64),
                record_steps=np.concatenate(cur_rec).astype(np.uint32),
                shared_buffer_bytes=shared_buffer_bytes,
                carveout_pct=carveout_pct,
            )
            launches.append(Launch(work, tuple(cur_tests), tuple(cur_counts)))
        cur_off.clear(), cur_rec.clear(), cur_tests.clear(), cur_counts.clear()
        slots, steps, records = _Slots(words), 0, 0

    for i, test in enumerate(tests):
        lines = np.asarray(test.lines, dtype=np.int64)
        if len(test.timed) > limit or len(lines) > max_steps:
            raise ValueError(
                f"test {i}: {len(lines)} visits with {len(test.timed)} timed do not fit one "
                f"launch ({limit} records, {max_steps} steps)"
            )
        timed = set(test.timed)
        placed = None
        if records + len(timed) <= limit and steps + len(lines) <= max_steps:
            placed = slots.place(lines, timed)
        if placed is None:
            flush()
            placed = slots.place(lines, timed)
            if placed is None:
                raise ValueError(
                    f"test {i} visits one line more than its {words} words allow in one launch"
                )
        offsets = lines * line_bytes + np.asarray(placed, dtype=np.int64) * WORD_BYTES
        if offsets.min() < 0 or offsets.max() >= window_bytes:
            raise ValueError(f"test {i} visits a line outside the window of {window_bytes} bytes")
        cur_off.append(offsets)
        cur_rec.append(steps + np.asarray(sorted(timed), dtype=np.int64))
        cur_tests.append(i)
        cur_counts.append(len(timed))
        steps += len(lines)
        records += len(timed)
    flush()
    return launches
