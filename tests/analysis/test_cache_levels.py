"""Stage-1 rules (analysis.cache_levels) on synthetic data with answers derived by hand."""

import numpy as np

from gpudissect.analysis.cache_levels import Classifier, line_test, miss_granule


def test_granule_is_the_largest_power_of_two_dividing_the_misses():
    # misses at lines 0..7 of 64 B (addresses 0, 64, ..., 448): odd multiples of 64 occur,
    # so the granule is 64 (not 128)
    addr = np.arange(0, 512, 4)
    missed = addr % 64 == 0
    g = miss_granule(np.tile(addr, 3), np.tile(missed, 3))
    assert g.granule_bytes == 64 and g.off_granule == 0


def test_granule_tolerates_a_few_outliers():
    rng = np.random.default_rng(0)
    addr = np.tile(np.arange(0, 4096, 4), 4)
    missed = addr % 32 == 0
    noise = rng.random(addr.size) < 0.002  # 0.2% slow accesses anywhere
    g = miss_granule(addr, missed | noise)
    assert g.granule_bytes == 32


def test_granule_needs_odd_multiples():
    # an LRU cache with bit-indexed sets, one element over: misses one way apart (4096 B)
    addr = np.tile(np.arange(0, 16388, 4), 4)
    missed = addr % 4096 == 0
    g = miss_granule(addr, missed)
    assert g.granule_bytes == 4096  # the data alone bound it only this far: hence C + C/8


def test_line_test_ratio():
    c = Classifier(hit_latency_cycles=40, threshold_cycles=50, outlier_rate=0.001)
    # control at stride 4 over 32 B granules: 1 of 8 accesses can miss; 40% of visits miss
    control = np.where(np.arange(8000) % 8 == 0, np.where(np.arange(8000) % 16 == 0, 300, 40), 40)
    # every line touched (ratio ~1): 50% of visits miss -> does not fit
    t = line_test(np.tile([300, 40], 2000), control, c, candidate_bytes=32, granule_bytes=32)
    assert not t.fits and abs(t.ratio - 1.0) < 0.05
    # a third of the lines skipped: 5% of visits miss (ratio 0.1) -> fits
    test = np.where(np.arange(4000) % 20 == 0, 300, 40)
    t = line_test(test, control, c, candidate_bytes=32, granule_bytes=32)
    assert t.fits and t.ratio < 0.2
