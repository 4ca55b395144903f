"""Several copies of a cache per SM: each copy keeps its own lines and replacement state, a
warp uses the copy its mapping names, and the engine agrees with the reference model."""

from __future__ import annotations

import numpy as np
import pytest

from gpudissect.exceptions import ProfileError
from gpudissect.sim import SimGPU, load_profile
from gpudissect.sim.cache import INSTANCE_SELECT, instance_of
from gpudissect.sim.hierarchy import MemoryHierarchy

L1, L2, DRAM = 20, 200, 500


def split_l1(base_profile, **l1) -> dict:
    """A 1 KB L1 (32 B lines, 4 ways: 8 sets, LRU) with the given copy fields, over a 64 KB
    L2; no TLBs, no noise."""
    return base_profile(
        max_warps_per_sm=8,
        dram={"latency_cycles": DRAM},
        caches={
            "l1d": {"size_bytes": 1024, "line_bytes": 32, "ways": 4, "hit_latency_cycles": L1,
                    **l1},
            "l2": {"size_bytes": 65536, "line_bytes": 32, "ways": 8, "hit_latency_cycles": L2},
        },
        paths={"ca": ["l1d", "l2"], "cg": ["l2"]},
    )  # fmt: skip


def test_mappings_by_hand():
    # warp_modulo: 0 1 2 3 0 1 2 3; warp_block with 8 warps and 4 copies: 0 0 1 1 2 2 3 3
    mod, block = INSTANCE_SELECT["warp_modulo"], INSTANCE_SELECT["warp_block"]
    got_mod = [instance_of(w, instances=4, select=mod, max_warps_per_sm=8) for w in range(8)]
    got_blk = [instance_of(w, instances=4, select=block, max_warps_per_sm=8) for w in range(8)]
    assert got_mod == [0, 1, 2, 3, 0, 1, 2, 3]
    assert got_blk == [0, 0, 1, 1, 2, 2, 3, 3]
    assert instance_of(5, instances=1, select=mod, max_warps_per_sm=8) == 0


@pytest.mark.parametrize(
    "select, same_copy_as_0, other_copy",
    [("warp_modulo", 2, 1), ("warp_block", 1, 4)],
)
def test_a_warp_evicts_only_the_lines_of_its_own_copy(
    base_profile, make_gpu, select, same_copy_as_0, other_copy
):
    # Warp 0 fills 24 lines (3/4 of the 32-line L1). Another warp then reads 32 other lines:
    # in warp 0's copy that evicts all 24 (LRU: the 32 newer lines push out every older one);
    # in another copy it evicts none. With 2 copies: modulo puts warp 2 with warp 0 and warp 1
    # apart; block (8 warps) puts warps 0-3 in copy 0, so warp 1 with warp 0 and warp 4 apart.
    gpu = make_gpu(split_l1(base_profile, instances_per_sm=2, instance_select=select))
    mine = np.arange(24) * 32
    other = (1 << 20) + np.arange(32) * 32
    for warp, expect in ((other_copy, L1), (same_copy_as_0, L2)):
        gpu.reset()
        gpu.load_sequence("ca", mine, warp=0)
        gpu.load_sequence("ca", other, warp=warp)
        again = gpu.load_sequence("ca", mine, warp=0)
        assert set(again.tolist()) == {expect}, (select, warp)


def test_each_copy_starts_cold_and_has_the_full_size(base_profile, make_gpu):
    # 32 lines fit one copy exactly; warp 1 misses lines warp 0 brought in (its copy is cold;
    # the L2, which has one copy, holds them)
    gpu = make_gpu(split_l1(base_profile, instances_per_sm=2))
    lines = np.arange(32) * 32
    assert set(gpu.load_sequence("ca", lines, warp=0).tolist()) == {DRAM}
    assert set(gpu.load_sequence("ca", lines, warp=0).tolist()) == {L1}
    assert set(gpu.load_sequence("ca", lines, warp=1).tolist()) == {L2}
    assert set(gpu.load_sequence("ca", lines, warp=1).tolist()) == {L1}


def test_engine_matches_reference_model_across_warps(base_profile, write_profile):
    # random loads by random warps on two paths through a 4-copy random-replacement L1 and a
    # 2-copy texture cache mapped by blocks: the same latency, load for load, noise included
    doc = split_l1(base_profile, instances_per_sm=4, policy={"kind": "random"})
    doc["caches"]["texture"] = {
        "size_bytes": 512, "line_bytes": 32, "ways": 4, "hit_latency_cycles": 90,
        "instances_per_sm": 2, "instance_select": "warp_block",
    }  # fmt: skip
    doc["paths"]["tex"] = ["texture", "l2"]
    doc["noise"] = {"jitter_cycles": 2.0, "outlier_probability": 0.01, "outlier_cycles": 400}
    profile = load_profile(write_profile(doc))
    gpu, reference = SimGPU(profile, seed=5), MemoryHierarchy(profile, seed=5)
    rng = np.random.default_rng(11)
    n = 3000
    paths = rng.choice(["ca", "cg", "tex"], n)
    warps = rng.integers(0, 8, n)
    addrs = rng.integers(0, 4096, n) // 4 * 4
    got = [
        int(gpu.load_sequence(p, np.array([a]), warp=int(w))[0])
        for p, a, w in zip(paths, addrs, warps, strict=True)
    ]
    expected = [
        reference.load(p, int(a), warp=int(w)) for p, a, w in zip(paths, addrs, warps, strict=True)
    ]
    assert got == expected
    assert min(got) < 60 and max(got) > 150  # hits and misses both occur


def test_unknown_mapping_is_refused(base_profile, write_profile):
    doc = split_l1(base_profile, instances_per_sm=2, instance_select="scheduler")
    with pytest.raises(ProfileError, match="instance_select.*warp_modulo"):
        load_profile(write_profile(doc))


def test_negative_warp_is_refused(base_profile, make_gpu):
    gpu = make_gpu(split_l1(base_profile, instances_per_sm=2))
    with pytest.raises(ValueError, match="warp must be >= 0"):
        gpu.load_sequence("ca", np.array([0]), warp=-1)
