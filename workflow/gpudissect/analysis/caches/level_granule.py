"""The miss granule g of one cache level (stage 1 of the fine-grained P-chase, TPDS Sec. 4.2 step
2, "the distance between missing accesses"; see `cache_levels`): the largest power of two that
divides (nearly) all missed addresses at stride 4, from a cold walk or TPDS's warm walks just
past the size. Sees only addresses and latencies.

"Nearly": a timing outlier is slow wherever it falls, so a few slow accesses lie off the granule.
The granule g doubles while 95% of the misses lie on multiples of 2g, or while the misses off
them are as few as the level's timing-outlier rate explains (one-sided binomial tests: those at
odd multiples of g against the accesses there, all of them against the accesses off multiples of
2g). A level with a long granule has few misses (a 256-B line: 64 in a 16 KiB walk), so a share
alone lets four outliers read it as 32 B; at the true granule half the misses lie on its odd
multiples, far more than outliers put on those few addresses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..common.misses import binom_sf
from .level_size import Classifier

GRANULE_TOLERANCE = 0.05  # share of missed addresses allowed off the granule (outliers)
GRANULE_ALPHA = 0.01  # significance of "more misses off 2g than timing outliers explain"
MIN_GRANULE_MISSES = 16  # fewest classified misses the granule rule works with

COLD_PHASE = "granule_cold"  # the cold stride-4 walk
WARM_PHASE = "granule"  # TPDS's warm stride-4 walks just past C


def cold_granule_bytes(record_steps: int, limit_bytes: int | None = None) -> int:
    """Array of the cold walk: one pass of `record_steps` loads at stride 4, within the limit."""
    n = 4 * record_steps
    return min(n, limit_bytes) if limit_bytes else n


def granule_sizes(size_bytes: int) -> tuple[int, int]:
    """The two array sizes the warm granule walk uses at stride 4: C + 4 and C + C/8."""
    return size_bytes + 4, size_bytes + max(4, (size_bytes // 8) // 4 * 4)


@dataclass(frozen=True)
class GranuleFinding:
    granule_bytes: int | None
    misses: int
    off_granule: int  # misses off the granule (outliers, or a wrong model)
    odd_multiples: int  # misses at odd multiples of the granule: they bound it from above
    reason: str | None


def _outliers_explain(misses: int, accesses: int, rate: float | None) -> bool:
    """Whether `misses` slow accesses among `accesses` are as few as timing outliers at `rate`
    make (P(at least that many) >= GRANULE_ALPHA)."""
    if misses == 0:
        return True
    if rate is None or accesses == 0:
        return False
    return float(binom_sf(misses - 1, accesses, rate)) >= GRANULE_ALPHA


def miss_granule(
    addresses_bytes: np.ndarray,
    missed: np.ndarray,
    *,
    where: str = "just past the cache size",
    outlier_rate: float | None = None,
) -> GranuleFinding:
    """Largest power of two dividing all but a few missed addresses (see module docstring);
    `outlier_rate`: the level's share of slow accesses among hits (None: the 95% rule only)."""
    every = np.asarray(addresses_bytes, dtype=np.int64)
    addr = every[np.asarray(missed, dtype=bool)]
    n = int(addr.size)
    if n < MIN_GRANULE_MISSES:
        return GranuleFinding(
            None,
            n,
            0,
            0,
            f"only {n} misses at stride 4 {where}; need >= {MIN_GRANULE_MISSES}",
        )

    def doubles(g: int) -> bool:
        off = int(np.sum(addr % (2 * g) != 0))
        if off <= GRANULE_TOLERANCE * n:
            return True
        odd = int(np.sum(addr % (2 * g) == g))
        return _outliers_explain(
            odd, int(np.sum(every % (2 * g) == g)), outlier_rate
        ) and _outliers_explain(off, int(np.sum(every % (2 * g) != 0)), outlier_rate)

    g = 4
    while g < (1 << 24) and doubles(g):
        g *= 2
    off = int(np.sum(addr % g != 0))
    odd = int(np.sum(addr % (2 * g) == g))
    if odd == 0:
        return GranuleFinding(
            None,
            n,
            off,
            0,
            f"every missed address {where} is a multiple of {2 * g} bytes: no bound",
        )
    return GranuleFinding(g, n, off, odd, None)


def cold_granule(addresses_bytes, latency, classifier: Classifier) -> GranuleFinding:
    """The granule from a cold walk: every slow access is a first touch, whatever level (L2,
    DRAM, a TLB miss on top) served it, so slow accesses count, not only those of the miss
    band."""
    return miss_granule(
        addresses_bytes,
        classifier.slow(latency),
        where="in the cold walk",
        outlier_rate=classifier.outlier_rate,
    )


def warm_granule(addresses_bytes, latency, classifier: Classifier) -> GranuleFinding:
    """The granule from TPDS's warm walks just past C (misses in the level's miss band)."""
    return miss_granule(
        addresses_bytes, classifier.miss(latency), outlier_rate=classifier.outlier_rate
    )


def level_granule(df: pd.DataFrame, classifier: Classifier) -> tuple[GranuleFinding, str | None]:
    """(granule, phase that decided it) from one level's rows: the cold walk, else the warm
    walks (a level the copy filled shows no cold misses)."""
    cold = df[df["phase"] == COLD_PHASE]
    warm = df[df["phase"] == WARM_PHASE]
    found = GranuleFinding(None, 0, 0, 0, "no stride-4 walk in the trace")
    if len(cold):
        found = cold_granule(cold["address_bytes"], cold["latency_cycles"], classifier)
        if found.granule_bytes is not None:
            return found, COLD_PHASE
    if len(warm):
        w = warm_granule(warm["address_bytes"], warm["latency_cycles"], classifier)
        if w.granule_bytes is not None or not len(cold):
            return w, WARM_PHASE if w.granule_bytes is not None else None
        reason = f"{found.reason}; {w.reason}"
        return GranuleFinding(None, w.misses, w.off_granule, w.odd_multiples, reason), None
    return found, None
