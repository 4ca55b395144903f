"""The decisions the adaptive `l1_sets` sweep takes while it runs, one narrow function each; the
analysis takes the same ones again from the trace alone."""

from __future__ import annotations

import numpy as np


def hit_threshold(hit_cycles: np.ndarray, miss_cycles: np.ndarray) -> float | None:
    """The latency between an L1 hit and an L1 miss: the midpoint of the two medians, or None
    when the two samples overlap around it (more than a tenth of either on the wrong side)."""
    hits = np.asarray(hit_cycles, dtype=float)
    misses = np.asarray(miss_cycles, dtype=float)
    if len(hits) == 0 or len(misses) == 0:
        return None
    h, m = float(np.median(hits)), float(np.median(misses))
    if m <= h:
        return None
    cut = (h + m) / 2
    if np.mean(hits > cut) > 0.1 or np.mean(misses <= cut) > 0.1:
        return None
    return cut


def evicted(latency_cycles, threshold: float) -> np.ndarray:
    """Whether each timed access missed."""
    return np.asarray(latency_cycles, dtype=float) > threshold


def walk_hits(latency_cycles, threshold: float, miss_tolerance: int) -> bool:
    """Whether a cyclic walk's timed pass still hits: at most `miss_tolerance` misses (a timing
    outlier reads as a miss; an overflowing set misses with all its lines)."""
    return int(np.sum(evicted(latency_cycles, threshold))) <= miss_tolerance


def overloaded(latency_cycles, threshold: float, lines: int) -> bool:
    """Whether a cyclic walk of `lines` distinct lines overloads a set, from its timed passes
    (whole passes of `lines` records each): a miss in every one. W + 1 lines of one W-way set
    cannot all stay whatever the policy keeps, so each pass misses at least once (pigeonhole);
    a walk that puts no more lines in any set than it has ways stops missing once its lines
    are in (its first, untimed passes), whatever the sets held before. A trace of one timed
    access per test (a target after its candidates) reads as that access's miss."""
    miss = evicted(latency_cycles, threshold)
    if len(miss) == 0:
        return False
    passes = max(len(miss) // lines, 1)
    return bool(miss[: passes * lines].reshape(passes, -1).any(axis=1).all())
