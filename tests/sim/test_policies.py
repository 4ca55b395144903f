"""Replacement policies on hand sequences; the weighted Fermi policy's frequencies."""

from __future__ import annotations

import numpy as np
import pytest

from gpudissect.sim.cache import Cache, CacheSpec
from gpudissect.sim.noise import Rng
from gpudissect.sim.policies import (
    FifoPolicy,
    LruPolicy,
    PolicySpec,
    RandomPolicy,
    SrripPolicy,
    TreePlruPolicy,
    WeightedRandomPolicy,
)


def test_lru():
    p = LruPolicy(ways=3)
    for w in (0, 1, 2):
        p.insert(w)
    p.touch(0)  # use order now 1, 2, 0: way 1 is least recent
    assert p.victim() == 1
    p.insert(1)  # order 2, 0, 1
    assert p.victim() == 2
    p.reset()
    assert p.victim() == 0  # all equal after reset: lowest way


def test_fifo_ignores_hits():
    p = FifoPolicy(ways=3)
    for w in (0, 1, 2):
        p.insert(w)
    p.touch(0)  # a hit does not refresh way 0: it is still the oldest fill
    assert p.victim() == 0
    p.insert(0)  # fills now 1, 2, 0
    assert p.victim() == 1


def test_tree_plru():
    # 4 ways: root node 1 chooses halves {0,1}/{2,3}; node 2 chooses 0/1, node 3 chooses 2/3.
    p = TreePlruPolicy(ways=4)
    for w in (0, 1, 2, 3):
        p.insert(w)
    # after using 3 last: root points left (away from 3), node 2 points away from 1 (to 0)
    assert p.victim() == 0
    p.touch(0)  # root -> right; node 3 still points away from 3 -> 2
    assert p.victim() == 2
    p.touch(2)  # root -> left; node 2 points away from 0 -> 1
    assert p.victim() == 1


def test_srrip_keeps_a_line_that_hit_past_lines_touched_once():
    p = SrripPolicy(ways=4)
    for w in (0, 1, 2, 3):
        p.insert(w)  # all predicted distant (2)
    p.touch(0)  # way 0 near (0)
    # no way at 3: every way ages once (0 -> 1, 2 -> 3); the first at 3 is way 1
    assert p.victim() == 1
    p.insert(1)  # the new line: 2
    assert p.victim() == 2  # ways 2, 3 still at 3
    p.insert(2)
    assert p.victim() == 3
    p.insert(3)
    # ways 1-3 at 2, way 0 at 1: one more ageing puts 1-3 at 3 first; way 0 (hit) stays
    assert p.victim() == 1
    assert p.rrpv[0] == 2


def test_random_stays_in_range_and_uses_all_ways():
    p = RandomPolicy(ways=5, rng=Rng(seed=3))
    seen = {p.victim() for _ in range(500)}
    assert seen == set(range(5))


def test_weighted_subset_for_smaller_set():
    # a 2-way set with weights (1/6, 1/2, ...) uses 1/6 : 1/2, i.e. 1/4 and 3/4
    p = WeightedRandomPolicy(ways=2, weights=(1 / 6, 1 / 2, 1 / 6, 1 / 6), rng=Rng(seed=4))
    n = 40_000
    share0 = sum(p.victim() == 0 for _ in range(n)) / n
    assert share0 == pytest.approx(0.25, abs=0.01)


def test_fermi_l1_weighted_frequencies():
    # One 4-way set (a 512 B cache of 128 B lines) cycling through 5 lines: after the 4 cold
    # fills every access to the line not present misses and replaces one way. TPDS 4.5: ways
    # are replaced with probability 1/6, 1/2, 1/6, 1/6. Count which way each miss replaced.
    spec = CacheSpec(
        name="l1d",
        size_bytes=512,
        line_bytes=128,
        set_ways=(4,),
        hit_latency_cycles=1,
        policy=PolicySpec("weighted_random", (1 / 6, 1 / 2, 1 / 6, 1 / 6)),
    )
    cache = Cache(spec, rng=Rng(seed=2017))
    counts = np.zeros(4)
    misses, line = 0, 0
    while misses < 100_000:
        result = cache.access(128 * (line % 5))
        line += 1
        if not result.hit and result.evicted is not None:
            counts[result.way] += 1
            misses += 1
    assert counts / misses == pytest.approx([1 / 6, 1 / 2, 1 / 6, 1 / 6], abs=0.01)
