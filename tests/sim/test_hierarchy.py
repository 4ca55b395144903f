"""Whole loads: caches that skip translation, hits cancelled by a TLB miss, per-path hit
latencies, and the numba engine against the Python reference model (hierarchy.py)."""

from __future__ import annotations

import numpy as np
import pytest

from gpudissect.exceptions import ProfileError
from gpudissect.sim import SimGPU, load_profile
from gpudissect.sim.hierarchy import MemoryHierarchy

PAGE = 2 << 20
L1, L2, DRAM, TLB1, TLB2 = 20, 200, 500, 10, 50


def two_level(base_profile, *, l1: dict | None = None, l2: dict | None = None, **blocks) -> dict:
    """L1 (4 KB, 128 B lines, 4 ways: 8 sets) and L2 (64 KB, 32 B lines) behind a 16-entry L1
    TLB and a 64-entry L2 TLB of 2 MB pages, both fully associative LRU."""
    caches = {
        "l1d": {"size_bytes": 4096, "line_bytes": 128, "ways": 4, "hit_latency_cycles": L1},
        "l2": {"size_bytes": 65536, "line_bytes": 32, "ways": 8, "hit_latency_cycles": L2},
    }
    caches["l1d"].update(l1 or {})
    caches["l2"].update(l2 or {})
    tlbs = {
        "levels": [
            {"name": "l1_tlb", "entries": 16, "page_bytes": PAGE, "ways": 16,
             "miss_penalty_cycles": TLB1},
            {"name": "l2_tlb", "entries": 64, "page_bytes": PAGE, "ways": 64,
             "miss_penalty_cycles": TLB2},
        ]
    }  # fmt: skip
    doc = {
        "dram": {"latency_cycles": DRAM},
        "caches": caches,
        "paths": {"ca": ["l1d", "l2"], "cg": ["l2"]},
        "tlbs": tlbs,
    }
    doc.update(blocks)
    return base_profile(**doc)


def loader(gpu, path="ca"):
    return lambda addr: int(gpu.load_sequence(path, np.array([addr]))[0])


def touch_pages(gpu, first_page, count=16):
    """Read ``count`` new pages on the cg path (so the L1 keeps its lines), page ``first_page +
    i`` at L2 set ``i + 1`` (never set 0, where line 0 lives). 16 of them push the older pages
    out of the 16-entry L1 TLB; the 64-entry L2 TLB keeps them until 64 newer ones come."""
    i = np.arange(count)
    gpu.load_sequence("cg", (first_page + i) * PAGE + 32 * (i + 1))


def test_miss_on_tlb_miss_cancels_the_hit_and_the_next_level_serves(base_profile, make_gpu):
    # NPC Table 3, Fermi L1 enabled: P2 = L2 hit + L1-TLB penalty, P3 = + L2-TLB penalty.
    gpu = make_gpu(two_level(base_profile, l1={"miss_on_tlb_miss": True}))
    one = loader(gpu)
    a = 0
    assert one(a) == DRAM + TLB1 + TLB2  # cold: both TLBs, L1 (filled) and L2 miss
    assert one(a) == L1  # P1: the line was filled even though its first lookup was a miss
    touch_pages(gpu, 1)
    # P2: the L1 holds the line, but the L1 TLB misses: the L2 serves it
    assert one(a) == L2 + TLB1
    assert one(a) == L1  # the L1 TLB has page 0 again; the line is still in the L1
    # 70 new pages overflow the 64-entry L2 TLB too (pages 17..86; page 0 is the oldest)
    touch_pages(gpu, 17, count=70)
    assert one(a) == L2 + TLB1 + TLB2  # P3
    # without the flag the same sequence reads the L1 hit plus the penalties
    plain = make_gpu(two_level(base_profile))
    one = loader(plain)
    one(a)
    touch_pages(plain, 1)
    assert one(a) == L1 + TLB1


def test_untranslated_cache_hits_skip_the_tlbs(base_profile, make_gpu):
    # TPDS Sec. 5.2(2), Maxwell: no P2/P3 when the L1 hits; misses are translated.
    gpu = make_gpu(two_level(base_profile, l1={"translated": False}))
    one = loader(gpu)
    a, b = 0, 128 * 8  # b: another line of page 0 (L1 set 0 as well)
    assert one(a) == DRAM + TLB1 + TLB2  # L1 misses, then translation, L2 miss, DRAM
    touch_pages(gpu, 1)
    assert one(a) == L1  # L1 hit: no TLB is looked up, so no penalty
    # that hit did not bring page 0 back into the L1 TLB: the next miss on page 0 pays for it
    assert one(b) == DRAM + TLB1
    assert one(b) == L1
    # the cg path starts at the (translated) L2: every load is translated there
    touch_pages(gpu, 100)
    assert loader(gpu, "cg")(a) == L2 + TLB1


def test_untranslated_cache_alone_on_a_path_translates_before_dram(base_profile, make_gpu):
    doc = two_level(base_profile, l1={"translated": False})
    doc["paths"] = {"ca": ["l1d"]}
    one = loader(make_gpu(doc))
    assert one(0) == DRAM + TLB1 + TLB2
    assert one(0) == L1
    assert one(4096) == DRAM  # a new line of page 0: the TLBs hit


def test_path_latency_of_a_shared_cache(base_profile, make_gpu):
    # NPC Table 5, Fermi: an L2 hit costs 470 through the texture path and 371 for global
    # loads; one L2, filled by either path
    doc = two_level(base_profile, l2={"path_latency_cycles": {"tex": 470}})
    doc["caches"]["texture"] = {
        "size_bytes": 4096, "line_bytes": 32, "ways": 4, "hit_latency_cycles": 240,
    }  # fmt: skip
    doc["paths"]["tex"] = ["texture", "l2"]
    del doc["tlbs"]
    gpu = make_gpu(doc)
    assert loader(gpu, "cg")(0) == DRAM
    assert loader(gpu, "tex")(0) == 470  # texture misses, the shared L2 hits on the tex path
    assert loader(gpu, "tex")(0) == 240
    assert loader(gpu, "cg")(0) == L2
    assert loader(gpu, "ca")(0) == L2  # ca: L1 miss, L2 hit at its own latency
    assert gpu.profile.caches["l2"].hit_latency_on("tex") == 470
    assert gpu.profile.caches["l2"].hit_latency_on("cg") == L2


def test_flags_are_refused_where_they_cannot_act(base_profile, write_profile):
    doc = two_level(base_profile, l1={"translated": False, "miss_on_tlb_miss": True})
    with pytest.raises(ProfileError, match=r"caches\.l1d\.miss_on_tlb_miss.*drop one"):
        load_profile(write_profile(doc))
    doc = two_level(base_profile, l1={"path_latency_cycles": {"cg": 5}})
    with pytest.raises(ProfileError, match=r"path_latency_cycles\.cg.*does not pass.*paths.*ca"):
        load_profile(write_profile(doc))
    doc = two_level(base_profile, l1={"path_latency_cycles": {"global": 5}})
    with pytest.raises(ProfileError, match=r"path_latency_cycles.*global"):
        load_profile(write_profile(doc))


CROSS_CHECK = [
    # (l1 extra, l2 extra, texture extra)
    ({}, {}, {}),
    ({"miss_on_tlb_miss": True}, {"path_latency_cycles": {"tex": 333}}, {}),
    ({"translated": False}, {}, {"translated": False}),
    (
        {"translated": False, "policy": {"kind": "random"}},
        {"policy": {"kind": "random"}, "path_latency_cycles": {"ca": 150}},
        {"miss_on_tlb_miss": True, "policy": {"kind": "fifo"}},
    ),
]


@pytest.mark.parametrize("l1, l2, tex", CROSS_CHECK)
def test_engine_matches_reference_model(base_profile, write_profile, l1, l2, tex):
    # A random trace over three paths (4 KB pages, so that both TLB levels miss often) through
    # the Python model and the compiled engine: the same latency, load for load, noise included.
    small_pages = {"page_bytes": 4096}
    doc = two_level(
        base_profile,
        l1=l1,
        l2={"policy": {"kind": "random"}, **l2},
        noise={"jitter_cycles": 2.0, "outlier_probability": 0.01, "outlier_cycles": 400},
    )
    doc["caches"]["texture"] = {
        "size_bytes": 2048, "line_bytes": 32, "ways": 4, "hit_latency_cycles": 90, **tex,
    }  # fmt: skip
    doc["paths"]["tex"] = ["texture", "l2"]
    for level in doc["tlbs"]["levels"]:
        level.update(small_pages)
    doc["tlbs"]["levels"][1]["policy"] = {"kind": "random"}
    doc["tlbs"]["page_table_window_bytes"] = 65536
    doc["tlbs"]["window_switch_penalty_cycles"] = 77
    profile = load_profile(write_profile(doc))
    gpu, reference = SimGPU(profile, seed=3), MemoryHierarchy(profile, seed=3)
    rng = np.random.default_rng(8)
    paths = rng.choice(["ca", "cg", "tex"], 4000)
    addrs = rng.integers(0, 200 * 4096, 4000) // 4 * 4
    addrs[rng.random(4000) < 0.5] %= 8192  # a hot region, so that the small caches hit
    got = [int(gpu.load_sequence(p, np.array([a]))[0]) for p, a in zip(paths, addrs, strict=True)]
    expected = [reference.load(p, int(a)) for p, a in zip(paths, addrs, strict=True)]
    assert got == expected
    assert len(set(got)) > 8  # hits, misses and penalties all occur
    gpu.reset()
    reference.reset()
    assert [int(gpu.load_sequence("ca", np.array([a]))[0]) for a in addrs[:200]] == [
        reference.load("ca", int(a)) for a in addrs[:200]
    ]


def test_new_fields_load_typed(base_profile, write_profile):
    # requests, throughput and cache fields reach the dataclasses; a paths cite is allowed
    doc = two_level(
        base_profile,
        l1={"instances_per_sm": 4},
        requests={"kind": "mshr", "entries": 128, "issue_units": 3, "block_bytes": 64},
        throughput={
            "dram_peak_gbps": 134.4,
            "dram_achievable_fraction": 0.8,
            "shared_achievable_fraction": 0.5,
            "shared_warp_accesses_per_cycle": 2,
            "max_ctas_per_sm": 16,
        },
        shared={
            "size_bytes": 49152, "banks": 32, "bank_width_bytes": 4,
            "base_latency_cycles": 47, "conflict_latency_cycles": 14,
            "conflict_latency_table_cycles": {4: 96, 2: 82},
        },
    )  # fmt: skip
    doc["paths"]["cite"] = {"tex": "absent: the test GPU has none"}
    p = load_profile(write_profile(doc))
    assert p.caches["l1d"].instances_per_sm == 4 and p.caches["l2"].instances_per_sm == 1
    assert (p.requests.issue_units, p.requests.block_bytes) == (3, 64)
    t = p.throughput
    assert (t.dram_achievable_fraction, t.shared_achievable_fraction) == (0.8, 0.5)
    assert (t.shared_warp_accesses_per_cycle, t.max_ctas_per_sm) == (2, 16)
    assert p.shared.conflict_latency_table_cycles == ((2, 82.0), (4, 96.0))
    assert p.citations["paths"] == {"tex": "absent: the test GPU has none"}
    assert set(p.paths) == {"ca", "cg"}


@pytest.mark.parametrize(
    "block, field, value, match",
    [
        ("requests", "issue_units", 0, "requests.issue_units"),
        ("requests", "block_bytes", 96, "power of two"),
        ("throughput", "dram_achievable_fraction", 1.5, "dram_achievable_fraction"),
        ("throughput", "max_ctas_per_sm", 0, "max_ctas_per_sm"),
    ],
)
def test_new_fields_refused_out_of_range(base_profile, write_profile, block, field, value, match):
    blocks = {
        "requests": {"kind": "prt", "entries": 43},
        "throughput": {"dram_peak_gbps": 100.0},
    }
    blocks[block][field] = value
    with pytest.raises(ProfileError, match=match):
        load_profile(write_profile(base_profile(**blocks)))


def test_fill_writes_the_l2_alone(base_profile, make_gpu):
    # A copy engine's fill of four L2 lines (bytes 0, 128, 256, 384) reaches only the L2: all miss
    # on the way in, and again on a second fill none does. Then a cg load of line 0 hits the
    # L2 but its page was never translated: L2 + both TLB penalties; a ca load of line 1 misses
    # the L1 (never filled) and hits the L2, on the page now in the TLBs.
    gpu = make_gpu(two_level(base_profile))
    lines = np.arange(4) * 128
    assert gpu.fill("l2", lines) == 4
    assert gpu.fill("l2", lines) == 0
    assert loader(gpu, "cg")(0) == L2 + TLB1 + TLB2
    assert loader(gpu)(128) == L2
    with pytest.raises(ProfileError, match="has no cache 'l3'"):
        gpu.fill("l3", lines)
