"""Replacement rules (analysis.caches.replacement) on hand-made walks."""

import numpy as np
import pytest

from gpudissect.analysis.caches.replacement import (
    Walk,
    consistent,
    periodic,
    predict,
    reconstruct,
    uniform_p_value,
)


def test_lru_fifo_plru_predictions_by_hand():
    # 2 ways, lines A B A C A: LRU keeps A (C evicts B): misses A B - C -;
    # FIFO evicts A at C (oldest fill): A B - C A
    seq = np.array([0, 1, 0, 2, 0])
    assert predict(seq, 2, "lru").tolist() == [True, True, False, True, False]
    assert predict(seq, 2, "fifo").tolist() == [True, True, False, True, True]
    # 4-way tree-PLRU: fill A B C D, touch C then A, miss E: PLRU evicts D (its tree points
    # right, then right again), LRU evicts B. Then D: PLRU misses (and evicts B: the root now
    # points left, the left node to way 1), LRU hits; then B misses under both
    seq = np.array([0, 1, 2, 3, 2, 0, 4, 3, 1])
    assert predict(seq, 4, "plru").tolist()[-2:] == [True, True]
    assert predict(seq, 4, "lru").tolist()[-2:] == [False, True]


def test_cyclic_lru_walk_is_periodic_and_consistent():
    lines = np.tile(np.arange(5), 40)
    walk = Walk(lines, np.ones(lines.size, dtype=bool))
    assert consistent([walk], 4, "lru")[0]
    assert periodic(walk.missed, 5) == 5


def test_reconstruction_recovers_weighted_victims():
    # simulate a 4-way set with victim weights 1/6, 1/2, 1/6, 1/6 over 5 cyclic lines
    rng = np.random.default_rng(1)
    weights = np.array([1, 3, 1, 1]) / 6
    way_of, lines, missed, counts = {}, [], [], np.zeros(4)
    holder = {}
    for i in range(30000):
        line = i % 5
        lines.append(line)
        if line in way_of:
            missed.append(False)
            continue
        missed.append(True)
        if len(holder) < 4:
            w = len(holder)
        else:
            w = int(rng.choice(4, p=weights))
            counts[w] += 1
            del way_of[holder[w]]
        holder[w], way_of[line] = line, w
    rec = reconstruct([Walk(np.array(lines), np.array(missed))], 4)
    assert rec.inconsistent == 0
    assert np.allclose(rec.counts, counts[: len(rec.counts)], atol=1)
    assert np.allclose(rec.frequencies, weights, atol=0.02)


@pytest.mark.parametrize(
    "counts", [[3, 4, 5, 6], [0, 0, 7], [100, 2, 3, 1, 5, 6, 7, 8], [250, 251, 249, 250]]
)
def test_uniform_p_value_is_pearsons_chi_square(counts):
    # the reference is scipy's own implementation of the same test
    from scipy.stats import chisquare

    assert uniform_p_value(np.array(counts)) == pytest.approx(chisquare(counts).pvalue, rel=1e-12)


def test_uniform_p_value_without_counts_is_one():
    assert uniform_p_value(np.zeros(4)) == 1.0
