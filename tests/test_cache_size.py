"""The cache-size analysis on synthetic traces built here with known answers."""

import numpy as np
import pandas as pd
import pytest

from gpudissect.analysis.caches.cache_size import CacheSizeEstimator, analyse
from gpudissect.analysis.common.misses import FirstMissDetector


def _trace(
    cache_bytes,
    *,
    sizes,
    hit=40,
    miss=300,
    jitter=2.0,
    outliers=0.0,
    seed=0,
    random_repl=False,
    carveout=-1,
    buffer=16384,
    n=400,
):
    """Per-access latencies of a P-chase over `sizes` for a cache of `cache_bytes`.

    LRU with a cyclic sweep: every access misses once the array is larger than the cache.
    random_repl: the miss share grows with the excess instead (1 - cache/size), as random
    replacement does.
    """
    rng = np.random.default_rng(seed)
    rows = []
    for size in sizes:
        if size <= cache_bytes:
            p_miss = 0.0
        else:
            p_miss = (1 - cache_bytes / size) if random_repl else 1.0
        lat = np.where(rng.random(n) < p_miss, miss, hit) + rng.normal(0, jitter, n)
        lat += np.where(rng.random(n) < outliers, 400, 0)
        rows.append(
            pd.DataFrame(
                {
                    "carveout_pct": carveout,
                    "shared_buffer_bytes": buffer,
                    "array_bytes": size,
                    "latency_cycles": np.round(lat),
                }
            )
        )
    return pd.concat(rows, ignore_index=True)


SIZES = list(range(4096, 32769, 512))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("cache", [8192, 16384, 24576])
def test_lru_cache_size_exact(cache, seed):
    est = CacheSizeEstimator().fit(_trace(cache, sizes=SIZES, seed=seed, outliers=0.01))
    assert est.series[0].quantities["size_bytes"]["value"] == cache


@pytest.mark.parametrize("seed", range(5))
def test_random_replacement_first_misses_found(seed):
    # 16 KiB + 512 B misses ~3% of accesses: the mean hardly moves, the miss count does
    est = CacheSizeEstimator().fit(_trace(16384, sizes=SIZES, seed=seed, random_repl=True))
    assert est.series[0].quantities["size_bytes"]["value"] == 16384


def test_no_step_is_undetermined_not_a_guess():
    est = CacheSizeEstimator().fit(_trace(1 << 20, sizes=SIZES, outliers=0.01))
    q = est.series[0].quantities["size_bytes"]
    assert q["value"] is None and "at least 32768" in q["undetermined"]


def test_cache_smaller_than_range_is_undetermined():
    # the two smallest arrays already miss; the reference level is not the sweep's lowest
    sizes = [1024, 2048, 4096, 8192]
    data = _trace(512, sizes=sizes)
    data.loc[data.array_bytes <= 2048, "latency_cycles"] = 300.0
    data.loc[data.array_bytes > 2048, "latency_cycles"] = 40.0
    q = CacheSizeEstimator().fit(data).series[0].quantities["size_bytes"]
    assert q["value"] is None and "smaller than the range" in q["undetermined"]


def test_series_per_carveout_and_buffer_check():
    a = _trace(16384, sizes=SIZES, carveout=0, buffer=16384)
    b = _trace(12288, sizes=SIZES, carveout=0, buffer=65536, seed=1)
    doc = analyse(
        pd.concat([a, b]), provenance={"device": "x", "config": {"parameters": {"path": "ca"}}}
    )
    values = [s["l1d"]["size_bytes"]["value"] for s in doc["series"]]
    assert values == [16384, 12288]
    # the step at each bound: the size lies in [value, value + resolution_bytes)
    steps = [s["l1d"]["size_bytes"]["resolution_bytes"] for s in doc["series"]]
    assert steps == [np.diff(SIZES)[list(SIZES).index(v)] for v in values]
    check = doc["shared_buffer_check"][0]
    assert check["carveout_pct"] == 0 and check["size_moves_with_buffer"] is True
    assert check["reason"] == "the sizes differ by 4096 bytes"


def _doc(*series):
    prov = {"device": "x", "config": {"parameters": {"path": "ca"}}}
    return analyse(pd.concat(series), provenance=prov)


def test_sizes_a_sweep_step_apart_are_one_size():
    # an H100 at carveout 50 read 119808 B beside one buffer and 119936 B beside the other in
    # one run: a cache that starts missing on few accesses moves its first miss by a step
    sizes = [*range(4096, 16384 + 1, 4096), *range(16384 + 128, 17408, 128)]
    a = _trace(16384, sizes=sizes, carveout=50, buffer=16384)
    b = _trace(16384 + 128, sizes=sizes, carveout=50, buffer=65536, seed=1)
    check = _doc(a, b)["shared_buffer_check"][0]
    assert check["size_bytes_by_shared_buffer_bytes"] == {"16384": 16384, "65536": 16512}
    assert check["size_moves_with_buffer"] is False
    assert check["reason"] == "the sizes lie within one sweep step, 128 bytes"
    # two steps apart is a move
    c = _trace(16384 + 256, sizes=sizes, carveout=50, buffer=65536, seed=1)
    assert _doc(a, c)["shared_buffer_check"][0]["size_moves_with_buffer"] is True


def test_a_gradual_onset_leaves_the_buffer_check_undecided():
    # the H100 at carveout 100: beside the 64 KiB buffer misses come and go from 12 KiB on (the
    # isolated-misses case below), beside the 16 KiB buffer the search read 16384 B
    sizes = [512, 1024, 2048, 4096, 8192, 12288, 12416, 12544, 12672, 12800, 13312, 14336, 16384]
    slow = [0, 0, 0, 0, 0, 1, 0, 15, 1, 0, 13, 15, 41]
    rng = np.random.default_rng(0)
    rows = []
    for size, k in zip(sizes, slow, strict=True):
        lat = np.full(1024, 50.0) + rng.integers(-1, 2, 1024)
        lat[:k] = 300.0
        rows.append(pd.DataFrame({"carveout_pct": 100, "shared_buffer_bytes": 65536,
                                  "array_bytes": size, "latency_cycles": lat}))  # fmt: skip
    gradual = pd.concat(rows)
    clean = _trace(16384, sizes=[*sizes[:5], 16384, 16512, 16640], carveout=100, buffer=16384)
    check = _doc(clean, gradual)["shared_buffer_check"][0]
    assert check["size_bytes_by_shared_buffer_bytes"] == {"16384": 16384, "65536": 12800}
    assert check["size_moves_with_buffer"] is None
    assert check["reason"].startswith("the 65536 B buffer's series has a gradual onset")


def test_detector_needs_enough_sizes():
    from gpudissect.exceptions import AnalysisError

    with pytest.raises(AnalysisError):
        FirstMissDetector().fit([1, 2], [np.ones(3), np.ones(3)])


def test_isolated_misses_below_the_bound_lower_its_confidence():
    # an H100 at carveout 100 (the shared-buffer check's series of its pipeline run): 15 of
    # 1024 accesses missed at 12544 B, then few again until misses last from 13312 B: the
    # first sustained miss is the bound, but the onset is gradual

    rng = np.random.default_rng(0)
    sizes = [512, 1024, 2048, 4096, 8192, 12288, 12416, 12544, 12672, 12800, 13312, 14336, 16384]
    slow = [0, 0, 0, 0, 0, 1, 0, 15, 1, 0, 13, 15, 41]

    def group(k):
        lat = np.full(1024, 50.0) + rng.integers(-1, 2, 1024)
        lat[:k] = 300.0
        return lat

    det = FirstMissDetector().fit(sizes, [group(k) for k in slow])
    r = det.result
    assert (r.x_before, r.x_after) == (12800, 13312)
    assert r.earlier == (7,) and r.tested_before == 8
    assert r.confidence == pytest.approx((1 - r.p_value) * (1 - 1 / 8))
    note = r.earlier_note(sizes)
    assert "1 of the 8 smaller sizes" in note and "15/1024 at 12544 bytes" in note
    # a clean onset keeps its confidence
    clean = FirstMissDetector().fit(sizes, [group(0)] * 10 + [group(k) for k in slow[10:]])
    assert clean.result.earlier == () and clean.result.earlier_note(sizes) == ""


def test_the_report_says_what_the_buffer_check_decided_and_why():
    from gpudissect.report.sections import l1_size_section

    sizes = [*range(4096, 16384 + 1, 4096), *range(16384 + 128, 17408, 128)]
    a = _trace(16384, sizes=sizes, carveout=50, buffer=16384)
    b = _trace(16384 + 128, sizes=sizes, carveout=50, buffer=65536, seed=1)
    lines = l1_size_section(_doc(a, b), [])
    assert (
        "- At carveout 50% the measured size does not move with the shared-memory buffer size: "
        "the sizes lie within one sweep step, 128 bytes. Sizes: 16 KiB buffer: 16 KiB (16384 B), "
        "64 KiB buffer: 16.125 KiB (16512 B)." in lines
    )
    # the note on the carveout as a preference comes only where a size moved
    assert not any(line.startswith("- The carveout is a preference") for line in lines)
