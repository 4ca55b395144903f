"""TLBs: the unequal-set L2 TLB of TPDS Fig. 10 and the latency patterns P1-P6 of Fig. 14."""

from __future__ import annotations

import numpy as np
import pytest

from gpudissect.sim.indexing import IndexSpec
from gpudissect.sim.policies import PolicySpec
from gpudissect.sim.tlb import Tlb, TlbLevelSpec, TlbSpec

MB = 1 << 20
PAGE = 2 * MB
# TPDS 4.4 / Fig. 10: 1 set of 17 entries and 6 of 8 (65 entries, 130 MB of 2 MB pages).
# Misses "are triggered set by set", so the set index cannot be page mod 7 (66 pages would put
# 10 pages in each small set and overflow all six at once). A set table over 8 pages,
# [0, 0, 1, 2, 3, 4, 5, 6][page mod 8], does it: pages 0..64 (130 MB) put 17 pages in set 0
# (0, 1, 8, 9, ..., 56, 57, 64) and 8 in each other set; page 65 (132 MB) is an 18th for
# set 0; pages 66..71 (134..144 MB) are a 9th for sets 1..6 in turn.
L2_TLB_SETS = [0, 0, 1, 2, 3, 4, 5, 6]
L2_TLB_WAYS = [17, 8, 8, 8, 8, 8, 8]
L2_TLB_INDEX = {"kind": "table", "period_bytes": 8 * PAGE, "sets_of_lines": L2_TLB_SETS}


def test_fig10_unequal_l2_tlb_misses_set_by_set():
    # P-chase over N MB with a 2 MB stride: N / 2 pages per pass. Fill one pass, then count
    # over one more pass the L2 TLB misses and the distinct entries (set, way) that missed.
    # LRU with one page more than a set's ways misses on every page of that set, and every
    # way of it is refilled: 132 MB overflows set 0 (18 pages, 17 entries missed); each 2 MB
    # more overflows one 8-way set (9 pages, 8 entries) up to 144 MB, where all 65 miss.
    spec = TlbSpec(
        levels=(
            TlbLevelSpec(
                name="l2_tlb",
                entries=65,
                page_bytes=PAGE,
                set_ways=tuple(L2_TLB_WAYS),
                miss_penalty_cycles=1,
                policy=PolicySpec("lru"),
                index=IndexSpec(
                    kind="table", period_bytes=8 * PAGE, sets_of_lines=tuple(L2_TLB_SETS)
                ),
            ),
        )
    )
    assert sum(L2_TLB_WAYS) == 65
    for n_mb in range(130, 146, 2):
        tlb = Tlb(spec)
        pages = range(n_mb // 2)
        for p in pages:
            tlb.translate(p * PAGE)
        entries, misses = set(), 0
        for p in pages:
            if tlb.translate(p * PAGE).hit_level is None:
                misses += 1
                level = tlb.levels[0]
                s = level.index.set_of(p * PAGE)
                entries.add((s, level.tags[s].index(p)))
        k = (n_mb - 132) // 2  # small sets overflowed besides the big one
        expected_entries = 0 if n_mb == 130 else 17 + 8 * k
        expected_misses = 0 if n_mb == 130 else 18 + 9 * k
        assert (len(entries), misses) == (expected_entries, expected_misses), n_mb


def test_fig10_in_the_engine(base_profile, make_gpu):
    # the same structure behind a 16-entry fully associative L1 TLB, run as a P-chase: with
    # more than 16 pages every load misses the L1 TLB (+10) and L2 TLB misses add 100.
    tlbs = {
        "levels": [
            {
                "name": "l1_tlb",
                "entries": 16,
                "page_bytes": PAGE,
                "ways": 16,
                "miss_penalty_cycles": 10,
            },
            {
                "name": "l2_tlb",
                "entries": 65,
                "page_bytes": PAGE,
                "set_ways": L2_TLB_WAYS,
                "index": L2_TLB_INDEX,
                "miss_penalty_cycles": 100,
            },
        ]
    }
    gpu = make_gpu(base_profile(paths={"ca": ["l1d"], "cg": []}, tlbs=tlbs))  # cg: no cache
    for n_mb, expected_misses in [(130, 0), (132, 18), (134, 27), (144, 72)]:
        gpu.reset()
        n = n_mb // 2
        stride = PAGE // 4  # elements of 4 B
        chain = ((np.arange(n * stride) + stride) % (n * stride)).astype(np.uint32)
        lat, _ = gpu.chase(
            "cg",
            chain,
            element_bytes=4,
            base_address_bytes=0,
            start_index=0,
            warmup_steps=n,
            record_steps=n,
        )
        assert set(lat) <= {100 + 10, 100 + 10 + 100}
        assert int(np.sum(lat == 210)) == expected_misses, n_mb


P = {"l1_hit": 96, "dram": 600, "l1_tlb": 288, "l2_tlb": 84, "switch": 300}


@pytest.fixture
def fermi_like(base_profile, make_gpu):
    # the GTX560Ti-L1on column of TPDS Fig. 14 as additive parts (see tlb.py)
    return make_gpu(
        base_profile(
            dram={"latency_cycles": P["dram"]},
            caches={
                "l1d": {
                    "size_bytes": 16384,
                    "line_bytes": 128,
                    "ways": 4,
                    "hit_latency_cycles": P["l1_hit"],
                }
            },
            paths={"ca": ["l1d"]},
            tlbs={
                "levels": [
                    {
                        "name": "l1_tlb",
                        "entries": 16,
                        "page_bytes": PAGE,
                        "ways": 16,
                        "miss_penalty_cycles": P["l1_tlb"],
                    },
                    {
                        "name": "l2_tlb",
                        "entries": 65,
                        "page_bytes": PAGE,
                        "set_ways": L2_TLB_WAYS,
                        "miss_penalty_cycles": P["l2_tlb"],
                    },
                ],
                "page_table_window_bytes": 512 * MB,
                "window_switch_penalty_cycles": P["switch"],
            },
        )
    )


def test_latency_patterns_p1_to_p6(fermi_like):
    gpu, d, t1, t2 = fermi_like, P["dram"], P["l1_tlb"], P["l2_tlb"]
    a = 0  # line A: L1 set 0 of page 0
    one = lambda addr: int(gpu.load_sequence("ca", np.array([addr]))[0])  # noqa: E731
    # cold: cache and both TLBs miss (P5); the first page walk activates window 0 for free
    assert one(a) == d + t1 + t2
    assert one(a) == P["l1_hit"]  # P1: cache hit, L1 TLB hit
    assert one(a + 128 * 5) == d  # P4: cache miss (another line, same page), L1 TLB hit
    # 16 other pages (read at L1 set 1, away from A's set) push page 0 out of the 16-entry
    # L1 TLB but not out of the 65-entry L2 TLB (default index: page mod 7, set 0 has 17)
    gpu.load_sequence("ca", np.arange(1, 17) * PAGE + 128)
    assert one(a) == P["l1_hit"] + t1  # P2: cache hit, L1 TLB miss, L2 TLB hit
    # L2 TLB set 0 (pages = 0 mod 7) now holds 7, 14 and, most recent, 0. 17 new pages 21,
    # 28, ..., 133 make 20 pages for 17 ways: the three oldest (7, 14, 0) go
    gpu.load_sequence("ca", np.arange(3, 20) * 7 * PAGE + 128)
    assert one(a) == P["l1_hit"] + t1 + t2  # P3: cache hit, both TLBs miss
    assert one(200 * MB) == d + t1 + t2  # P5: cache miss, both TLBs miss, window 0
    assert one(600 * MB) == d + t1 + t2 + P["switch"]  # P6: page beyond the 512 MB window
    assert one(700 * MB) == d + t1 + t2  # same window (512-1024 MB) as the last walk
    assert one(600 * MB) == P["l1_hit"]  # TLB hit: no page walk, no window check
    assert one(300 * MB) == d + t1 + t2 + P["switch"]  # back to window 0: switch again
