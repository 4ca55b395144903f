"""A cache whose data array holds fewer lines than its sets and ways (``data_bytes``) and an L2
whose partitions keep near copies (``l2_slices.near_copies``): hand-derived hits and latencies,
and the numba engine against the Python reference model."""

from __future__ import annotations

import numpy as np

from gpudissect.sim.engine import SimGPU
from gpudissect.sim.hierarchy import MemoryHierarchy
from gpudissect.sim.profile import load_profile

DRAM = 100


def test_a_full_data_array_drops_the_least_recently_used_line_of_any_set(
    base_profile, write_profile
):
    # 2 sets x 2 ways of 32-B lines (set = line mod 2), data for 3 lines, LRU.
    # Lines 0, 1, 2 fill set 0 (0, 2) and set 1 (1): 3 lines, the data is full. Line 3 goes to
    # a free way of set 1 but must drop the least recently used line of the cache: line 0.
    # Then line 0 misses (it drops line 1, now the oldest), line 2 hits, line 1 misses.
    doc = base_profile(
        caches={
            "l1d": {
                "size_bytes": 128,
                "line_bytes": 32,
                "ways": 2,
                "data_bytes": 96,
                "policy": {"kind": "lru"},
                "hit_latency_cycles": 1,
            }
        },
        dram={"latency_cycles": DRAM},
    )
    profile = load_profile(write_profile(doc))
    addresses = np.array([0, 1, 2, 3, 0, 2, 1]) * 32
    want = [DRAM, DRAM, DRAM, DRAM, DRAM, 1, DRAM]
    assert SimGPU(profile, seed=0).load_sequence("ca", addresses).tolist() == want
    reference = MemoryHierarchy(profile, seed=0)
    assert [reference.load("ca", int(a)) for a in addresses] == want


def _copies_profile(base_profile):
    # an L2 of 8 lines of 128 B (1 set, LRU) in two slices by address bit 7 (slice = line
    # parity), slice k in partition k; SM 0 in partition 0, SM 1 in partition 1; each partition
    # keeps 2 lines of near copies (1 set of 2 ways). Hit 200, far term 50.
    return base_profile(
        sms=2,
        caches={
            "l2": {
                "size_bytes": 1024,
                "line_bytes": 128,
                "ways": 8,
                "policy": {"kind": "lru"},
                "hit_latency_cycles": 200,
            }
        },
        paths={"cg": ["l2"]},
        dram={"latency_cycles": 600},
        l2_slices={
            "cache": "l2",
            "slices": 2,
            "index": {"kind": "xor", "masks": [0x80]},
            "slice_partition": [0, 1],
            "sm_partition": [0, 1],
            "far_cycles": 50,
            "near_copies": {"size_bytes": 256, "ways": 2},
        },
    )


def test_near_copies_read_near_while_they_fit_then_far_until_the_l2_is_full(
    base_profile, write_profile
):
    profile = load_profile(write_profile(_copies_profile(base_profile)))
    # SM 0 walks lines 0, 1 twice: the first pass misses (DRAM), the second hits its copies
    # (near: 200). Then lines 0..3 twice: 0 and 1 hit their copies (200), 2 and 3 miss (DRAM)
    # and take the store's 2 ways; from then on the store (LRU, a cycle of 4 lines over 2 ways)
    # misses every time and the L2 serves them: far (250) whatever the slice.
    gpu, reference = SimGPU(profile, seed=0), MemoryHierarchy(profile, seed=0)
    two = np.array([0, 1, 0, 1]) * 128
    four = np.array([0, 1, 2, 3, 0, 1, 2, 3]) * 128
    want_two = [600, 600, 200, 200]
    want_four = [200, 200, 600, 600, 250, 250, 250, 250]
    assert gpu.load_sequence("cg", two, sm=0).tolist() == want_two
    assert [reference.load("cg", int(a), sm=0) for a in two] == want_two
    assert gpu.load_sequence("cg", four, sm=0).tolist() == want_four
    assert [reference.load("cg", int(a), sm=0) for a in four] == want_four


def test_a_line_another_partition_brought_in_is_near_only_when_homed_here(
    base_profile, write_profile
):
    profile = load_profile(write_profile(_copies_profile(base_profile)))
    # SM 0 (partition 0) brings lines 0 and 1 in: line 1 (slice 1) is placed in partition 1's
    # store as its home. SM 1 then reads line 1 near (200) and line 0 far (250, then copied),
    # and line 0 again near.
    addresses = np.array([0, 1]) * 128
    again = np.array([1, 0, 0]) * 128
    gpu, reference = SimGPU(profile, seed=0), MemoryHierarchy(profile, seed=0)
    gpu.load_sequence("cg", addresses, sm=0)
    for a in addresses:
        reference.load("cg", int(a), sm=0)
    assert gpu.load_sequence("cg", again, sm=1).tolist() == [200, 250, 200]
    assert [reference.load("cg", int(a), sm=1) for a in again] == [200, 250, 200]


def test_stores_that_hold_their_home_lines_are_the_l2_past_them_own_lines_miss_to_dram(
    base_profile, write_profile
):
    doc = _copies_profile(base_profile)
    doc["l2_slices"]["near_copies"]["home_lines"] = True
    profile = load_profile(write_profile(doc))
    # SM 0 (partition 0; each store 1 set of 2 ways, LRU). Lines 0, 1: line 0 is homed here and
    # misses (DRAM 600); line 1 misses store 0 (filled), then its home store 1 (filled): DRAM
    # and the far trip, 650. Again: both hit store 0, near (200).
    # Then 0..3 twice: 0, 1 near; 2 (homed here) takes the way of 0 and misses (600); 3 takes
    # the way of 1 in store 0, misses store 1 (which holds 1 and now 3): 650. Second pass: the
    # 4-line cycle misses store 0 every time; lines 0 and 2 (homed here) go to DRAM (600),
    # lines 1 and 3 hit their home store 1: far (250).
    gpu, reference = SimGPU(profile, seed=0), MemoryHierarchy(profile, seed=0)
    two = np.array([0, 1, 0, 1]) * 128
    four = np.array([0, 1, 2, 3, 0, 1, 2, 3]) * 128
    want_two = [600, 650, 200, 200]
    want_four = [200, 200, 600, 650, 600, 250, 600, 250]
    assert gpu.load_sequence("cg", two, sm=0).tolist() == want_two
    assert [reference.load("cg", int(a), sm=0) for a in two] == want_two
    assert gpu.load_sequence("cg", four, sm=0).tolist() == want_four
    assert [reference.load("cg", int(a), sm=0) for a in four] == want_four
    # SM 1 (partition 1) reads line 1 from its own store (near) and line 0, homed in
    # partition 0 and evicted from store 0 by the cycle above, from DRAM and the far trip
    assert gpu.load_sequence("cg", np.array([1, 0]) * 128, sm=1).tolist() == [200, 650]


def test_partitions_of_unequal_stores_give_the_near_and_far_steps_their_own_capacities(
    base_profile, write_profile
):
    # the stores of home lines as above, partition 0's of 4 lines (1 set of 4 ways) and
    # partition 1's of 2: SM 0 holds a footprint of 4 lines near (its whole footprint in its
    # own store), SM 1 only 2. Then a 6-line cycle from SM 0: store 0 misses every time, but
    # its 3 lines homed in partition 1 (1, 3, 5) overflow store 1 (2 ways): LRU misses them all
    # too. A 4-line cycle from SM 1 misses its own store; its 2 lines homed in partition 0
    # (0, 2) fit store 0 and hit far (250), its own (1, 3) go to DRAM (600).
    doc = _copies_profile(base_profile)
    doc["l2_slices"]["near_copies"] = {"size_bytes": [512, 256], "ways": [4, 2], "home_lines": True}
    profile = load_profile(write_profile(doc))
    four = np.array([0, 1, 2, 3] * 3) * 128
    six = np.array([0, 1, 2, 3, 4, 5] * 2) * 128
    for addresses, sm, want in (
        (four, 0, [200] * 8),
        (six, 0, [600, 650] * 3),
        (four, 1, [250, 600] * 4),
    ):
        got = SimGPU(profile, seed=0).load_sequence("cg", addresses, sm=sm).tolist()
        assert got[-len(want) :] == want
        reference = MemoryHierarchy(profile, seed=0)
        assert [reference.load("cg", int(a), sm=sm) for a in addresses][-len(want) :] == want


def test_a_store_size_per_partition_must_name_every_partition(base_profile, write_profile):
    import pytest

    from gpudissect.sim.profile import ProfileError

    doc = _copies_profile(base_profile)
    doc["l2_slices"]["near_copies"] = {"size_bytes": [512, 256, 256], "ways": 2}
    with pytest.raises(ProfileError, match=r"near_copies\.size_bytes.*3 entries.*2"):
        load_profile(write_profile(doc))
    doc["l2_slices"]["near_copies"] = {
        "size_bytes": [512, 256],
        "ways": 2,
        "index": {"kind": "bits", "bits": [7]},
    }
    with pytest.raises(ProfileError, match=r"near_copies.*sets"):
        load_profile(write_profile(doc))
