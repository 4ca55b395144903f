"""Caches: the 12-word cache of TPDS Figs. 2-3, sectors, prefetch, unequal sets, and the
numba engine against the Python reference model."""

from __future__ import annotations

import numpy as np
import pytest

from gpudissect.sim.cache import Cache, CacheSpec
from gpudissect.sim.indexing import IndexSpec
from gpudissect.sim.noise import Rng
from gpudissect.sim.policies import PolicySpec

HIT_CYCLES, DRAM_CYCLES = 1, 100


def one_cache(base_profile, cache: dict) -> dict:
    cache = {"hit_latency_cycles": HIT_CYCLES, **cache}
    return base_profile(caches={"l1d": cache}, dram={"latency_cycles": DRAM_CYCLES})


def test_twelve_word_cache_of_tpds_fig3(base_profile, make_gpu):
    # TPDS Fig. 2 / NPC Fig. 2: a 12-word cache, "two out of every six consecutive words are
    # mapped to one cache set, and they may appear in either of the two cache lines in the
    # set": lines of b = 2 words, a = 2 ways, so 12 / (2 x 2) = 3 sets; with 4-byte words:
    # 48 B, 8 B lines, set = line mod 3, LRU. Sequential reads of a 13-word array (Fig. 3):
    # lines L0..L6 hold words (0,1) (2,3) ... (10,11) (12); set 0 gets L0, L3, L6.
    # Pass 1 (elements numbered from 1): cold misses on 1, 3, 5, 7, 9, 11; element 13 (L6)
    # misses and evicts L0 (least recent in set 0 = {L0, L3}).
    # Pass 2: element 1 (L0) misses and evicts L3; 7 (L3) misses and evicts L6; 13 (L6)
    # misses and evicts L0; everything else hits. So from the 13th access on, the misses are
    # elements 13, 1, 7 of every pass: period 13, as the paper says.
    gpu = make_gpu(
        one_cache(
            base_profile, {"size_bytes": 48, "line_bytes": 8, "ways": 2, "policy": {"kind": "lru"}}
        )
    )
    chain = ((np.arange(13) + 1) % 13).astype(np.uint32)
    lat, ind = gpu.chase(
        "ca",
        chain,
        element_bytes=4,
        base_address_bytes=0,
        start_index=0,
        warmup_steps=0,
        record_steps=13 * 5,
    )
    element = np.concatenate([[0], ind[:-1]]) + 1  # the element each recorded load read
    assert list(element[:13]) == list(range(1, 14))
    missed = element[lat == DRAM_CYCLES]
    assert list(missed[:7]) == [1, 3, 5, 7, 9, 11, 13]
    assert list(element[12:][lat[12:] == DRAM_CYCLES]) == [13] + [1, 7, 13] * 4
    assert set(lat) == {HIT_CYCLES, DRAM_CYCLES}


def test_sector_fill(base_profile, make_gpu):
    # 128 B lines of four 32 B sectors: a miss fills one sector only, so the first read of
    # each sector misses even though the line is present; a second pass hits everywhere.
    gpu = make_gpu(
        one_cache(
            base_profile, {"size_bytes": 1024, "line_bytes": 128, "sector_bytes": 32, "ways": 4}
        )
    )
    lat = gpu.load_sequence("ca", np.array([0, 4, 32, 64, 96, 100, 0, 32, 64, 96]))
    assert list(lat) == [DRAM_CYCLES, 1, DRAM_CYCLES, DRAM_CYCLES, DRAM_CYCLES, 1, 1, 1, 1, 1]


def test_sector_miss_is_a_use_for_lru(base_profile, make_gpu):
    # one set of 2 ways, 64 B lines of two 32 B sectors. A (line 0) and B (line 1) fill the
    # set; reading A's second sector misses but makes A most recent, so C (line 2) evicts B.
    gpu = make_gpu(
        one_cache(
            base_profile, {"size_bytes": 128, "line_bytes": 64, "sector_bytes": 32, "ways": 2}
        )
    )
    lat = gpu.load_sequence("ca", np.array([0, 64, 32, 128, 0, 64]))
    assert list(lat) == [DRAM_CYCLES] * 4 + [1, DRAM_CYCLES]


def test_prefetch_next_lines(base_profile, make_gpu):
    # a miss on line n brings lines n+1 and n+2 in whole: reading lines 0..5 misses on 0 and 3
    gpu = make_gpu(
        one_cache(
            base_profile, {"size_bytes": 1024, "line_bytes": 32, "ways": 4, "prefetch_lines": 2}
        )
    )
    lat = gpu.load_sequence("ca", 32 * np.arange(6))
    assert list(lat) == [DRAM_CYCLES, 1, 1, DRAM_CYCLES, 1, 1]


def test_unequal_sets(base_profile, make_gpu):
    # set 0 has 3 ways, set 1 has 1 way (table: even lines -> set 0, odd -> set 1). Cycling
    # over 3 even lines hits after the cold misses; cycling over 2 odd lines always misses.
    gpu = make_gpu(
        one_cache(
            base_profile,
            {
                "size_bytes": 128,
                "line_bytes": 32,
                "set_ways": [3, 1],
                "index": {"kind": "table", "period_bytes": 64, "sets_of_lines": [0, 1]},
            },
        )
    )
    even = gpu.load_sequence("ca", np.array([0, 64, 128] * 3))
    assert list(even) == [DRAM_CYCLES] * 3 + [1] * 6
    odd = gpu.load_sequence("ca", np.array([32, 96] * 3))
    assert list(odd) == [DRAM_CYCLES] * 6


CROSS_CHECK = [
    # (policy, set_ways, index, sector_bytes, prefetch_lines)
    ({"kind": "lru"}, [4] * 8, {"kind": "bits"}, 32, 0),
    ({"kind": "fifo"}, [4] * 8, {"kind": "xor", "masks": [0x120, 0x240, 0x480]}, 64, 0),
    ({"kind": "random"}, [2, 6] * 4, {"kind": "bit_list", "bits": [7, 8, 10]}, 128, 1),
    ({"kind": "plru"}, [8, 4, 2, 2] * 2, {"kind": "bits", "low_bit": 9}, 32, 0),
    (
        {"kind": "weighted_random", "weights": [1 / 6, 1 / 2, 1 / 6, 1 / 6]},
        [4] * 8,
        {"kind": "table", "period_bytes": 1024, "sets_of_lines": [0, 1, 2, 3, 4, 5, 6, 7]},
        128,
        2,
    ),
    ({"kind": "lru"}, [5, 3, 4], {"kind": "bits"}, 128, 0),
    ({"kind": "srrip"}, [4, 3, 4, 2] * 2, {"kind": "xor", "masks": [0x120, 0x240, 0x480]}, 32, 1),
    # one set: a prefetched line may replace the line whose miss fetched it
    ({"kind": "random"}, [3], {"kind": "bits"}, 64, 1),
]


@pytest.mark.parametrize("policy, set_ways, index, sector, prefetch", CROSS_CHECK)
def test_engine_matches_reference_model(
    base_profile, make_gpu, policy, set_ways, index, sector, prefetch
):
    # The same random trace through the Python model (policies.py, indexing.py, cache.py) and
    # the compiled engine gives the same hits and misses, access for access.
    line = 128
    size = line * sum(set_ways)
    gpu = make_gpu(
        one_cache(
            base_profile,
            {
                "size_bytes": size,
                "line_bytes": line,
                "sector_bytes": sector,
                "set_ways": set_ways,
                "index": index,
                "policy": policy,
                "prefetch_lines": prefetch,
            },
        ),
        seed=11,
    )
    spec = CacheSpec(
        name="l1d",
        size_bytes=size,
        line_bytes=line,
        set_ways=tuple(set_ways),
        hit_latency_cycles=HIT_CYCLES,
        sector_bytes=sector,
        index=IndexSpec(**{k: tuple(v) if isinstance(v, list) else v for k, v in index.items()}),
        policy=PolicySpec(policy["kind"], tuple(policy.get("weights", ()))),
        prefetch_lines=prefetch,
    )
    reference = Cache(spec, rng=Rng(seed=11))
    addrs = np.random.default_rng(5).integers(0, 3 * size, 5000)
    expected = [HIT_CYCLES if reference.access(int(a)).hit else DRAM_CYCLES for a in addrs]
    got = gpu.load_sequence("ca", addrs)
    assert list(got) == expected
    assert 0.05 < np.mean(got == HIT_CYCLES) < 0.95  # the trace exercises both outcomes
    # then a walk of small steps, on from the same state: runs of loads of one sector and line
    # (the engine's shortcut for a sector loaded again) between moves to other sets
    steps = np.random.default_rng(6).integers(-160, 161, 5000)
    walk = np.abs(np.cumsum(steps)) % (3 * size)
    expected = [HIT_CYCLES if reference.access(int(a)).hit else DRAM_CYCLES for a in walk]
    got = gpu.load_sequence("ca", walk)
    assert list(got) == expected
    assert 0.02 < np.mean(got == HIT_CYCLES) < 0.98
