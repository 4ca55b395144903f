"""Stage-1 rules (analysis.caches.cache_levels) on synthetic data with answers derived by hand."""

import numpy as np
import pandas as pd

from gpudissect.analysis.caches.cache_levels import Classifier, level_granule, miss_granule


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


def test_granule_of_a_long_line_is_not_shortened_by_timing_outliers():
    # a cold walk of 16 KiB at stride 4 (4096 loads) over 256-B lines: 64 misses, at multiples of
    # 256, and 4 timing outliers (4, 100, 1000, and 2080 = 65 x 32). Off multiples of 8, 16, 32:
    # 2, 3, 3 (<= 5% of 68), of 64: 4 (> 5%): by that share alone the granule reads 32 B. At rate
    # 0.0005 the 4032 loads off multiples of 64 hold 2 outliers on average, 4 or more with
    # p = 0.15, and one miss among the 256 loads at odd multiples of 32 has p = 0.12; none lie at
    # odd multiples of 64 or 128; the 32 at odd multiples of 256 (every load there) no outlier
    # rate explains: 256 B.
    addr = np.arange(0, 16384, 4)
    missed = (addr % 256 == 0) | np.isin(addr, [4, 100, 1000, 2080])
    assert miss_granule(addr, missed).granule_bytes == 32
    g = miss_granule(addr, missed, outlier_rate=0.0005)
    assert (g.granule_bytes, g.misses, g.off_granule, g.odd_multiples) == (256, 68, 4, 32)


def test_granule_halves_at_odd_multiples_that_outliers_cannot_explain():
    # 16 misses at multiples of 64 in 1 KiB (256 loads), 8 of them at odd multiples: at a rate
    # of 0.03 the 8 misses off multiples of 128 are as many as outliers make among its 248 loads
    # (7.4 expected, p = 0.47), but not 8 of the 8 loads at odd multiples of 64 (p = 7e-13): the
    # granule stays 64
    addr = np.arange(0, 1024, 4)
    g = miss_granule(addr, addr % 64 == 0, outlier_rate=0.03)
    assert (g.granule_bytes, g.odd_multiples) == (64, 8)


def test_granule_needs_odd_multiples():
    # an LRU cache with bit-indexed sets, one element over: misses one way apart (4096 B)
    addr = np.tile(np.arange(0, 16388, 4), 4)
    missed = addr % 4096 == 0
    g = miss_granule(addr, missed)
    assert g.granule_bytes == 4096  # the data alone bound it only this far: hence C + C/8


# --- cold granule walk, and the warm walk where the cold one shows nothing ------------------

CLASSIFIER = Classifier(
    hit_latency_cycles=50, threshold_cycles=60, outlier_rate=0.001, ceiling_cycles=400
)


def _rows(phase, array_bytes, addresses, latency):
    n = len(addresses)
    return pd.DataFrame(
        {
            "phase": [phase] * n,
            "array_bytes": np.full(n, array_bytes),
            "address_bytes": np.asarray(addresses),
            "latency_cycles": np.asarray(latency),
        }
    )


def _warm_rows_with_one_miss(c=221184):
    # what the H100 L1 showed: one warm-up pass over C + 4 and C + C/8, then 2048 loads at
    # stride 4 (the first 8 KiB): 1 slow access, at step 0
    addr = np.arange(2048) * 4
    lat = np.where(np.arange(2048) == 0, 300, 50)
    return pd.concat([_rows("granule", n, addr, lat) for n in (c + 4, c + c // 8)])


def test_cold_walk_gives_the_granule_of_a_cache_the_warm_walk_cannot_see():
    # cold walk over 8 KiB at stride 4: the first access of every 32-byte sector misses (256
    # misses, 128 of them at odd multiples of 32); those served by DRAM (700 cycles, above the
    # miss band's ceiling) count too; plus a slow second record (launch effects) off the granule
    addr = np.arange(2048) * 4
    lat = np.where(addr % 32 == 0, np.where(addr % 64 == 0, 700, 300), 50)
    lat[1] = 200
    rows = pd.concat([_rows("granule_cold", 8192, addr, lat), _warm_rows_with_one_miss()])
    g, phase = level_granule(rows, CLASSIFIER)
    assert (g.granule_bytes, phase) == (32, "granule_cold")
    assert g.misses == 257 and g.off_granule == 1 and g.odd_multiples == 128
    # the warm walks alone decide nothing: 2 misses (< 16) over both arrays
    g, phase = level_granule(_warm_rows_with_one_miss(), CLASSIFIER)
    assert g.granule_bytes is None and phase is None and "only 2 misses" in g.reason


def test_warm_walk_decides_where_the_copy_filled_the_level():
    # the L2 of a GPU holds the chain the host just copied: the cold walk hits throughout;
    # the warm walks just past C miss on the first access of each 64-byte sector that the
    # cache lost (here every one of the first 8 KiB: 128 misses per array)
    addr = np.arange(2048) * 4
    cold = _rows("granule_cold", 8192, addr, np.full(2048, 50))
    warm = pd.concat(
        [_rows("granule", n, addr, np.where(addr % 64 == 0, 300, 50)) for n in (22282244, 25067520)]
    )
    g, phase = level_granule(pd.concat([cold, warm]), CLASSIFIER)
    assert (g.granule_bytes, phase) == (64, "granule")
    g, phase = level_granule(pd.concat([cold, _warm_rows_with_one_miss()]), CLASSIFIER)
    assert g.granule_bytes is None and "in the cold walk" in g.reason and "only 2" in g.reason


# --- a level no swept size overflows: the size has a lower bound --------------------------


def test_no_miss_up_to_the_constant_limit_gives_a_lower_bound():
    # the constant L1.5 search: 8 KiB to 60 KiB at stride 64, every access a 120-cycle hit
    # (jitter of 1 cycle), so the cache holds at least the largest array swept, 61440 B
    from gpudissect.analysis.caches.cache_levels import analyse_level

    rng = np.random.default_rng(2)
    frames = []
    for size in range(8192, 61441, 4096):
        lat = np.round(rng.normal(120, 1, 512)).astype(np.uint32)
        frame = _rows("size", size, np.arange(512) * 64 % size, lat)
        frames.append(frame.assign(stride_bytes=64))
    out = analyse_level(pd.concat(frames), path="const")
    assert out["size_bytes"]["value"] is None
    assert out["size_bytes"]["lower_bound"] == 61440
    assert "constant memory holds 65536 bytes" in out["size_bytes"]["undetermined"]
    assert out["hit_latency_cycles"]["value"] == 120
    assert out["line_bytes"]["value"] is None
