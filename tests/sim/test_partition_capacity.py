"""What a partition holds (analysis.l2.partition_capacity): the footprint sweep's accesses of a
simulated partitioned L2, split by the partition function, read whether the partitions' stores
hold their home lines and the copies in one capacity (l2_slices.near_copies.home_lines) or keep
copies in front of the L2."""

import numpy as np
import pandas as pd
import pytest

from gpudissect.analysis.l2.partition_capacity import partition_capacity
from gpudissect.sim.engine import SimGPU
from gpudissect.sim.profile import load_profile

LINE = 128
DRAM, HIT, FAR = 600, 200, 60
STORE_LINES = 64  # per partition


def _profile(base_profile, write_profile, *, home_lines):
    # 2 partitions by address bit 9 (above the stores' set bits 7-8), an L2 of 256 lines, stores of
    # 64 lines (4 sets x 16 ways); SM 0 in partition 0
    return load_profile(
        write_profile(
            base_profile(
                sms=2,
                caches={
                    "l2": {
                        "size_bytes": 256 * LINE,
                        "line_bytes": LINE,
                        "ways": 16,
                        "policy": {"kind": "lru"},
                        "hit_latency_cycles": HIT,
                    }
                },
                paths={"cg": ["l2"]},
                dram={"latency_cycles": DRAM},
                l2_slices={
                    "cache": "l2",
                    "slices": 2,
                    "index": {"kind": "xor", "masks": [0x200]},
                    "slice_partition": [0, 1],
                    "sm_partition": [0, 1],
                    "far_cycles": FAR,
                    "near_copies": {
                        "size_bytes": STORE_LINES * LINE,
                        "ways": 16,
                        "home_lines": home_lines,
                    },
                },
            )
        )
    )


def _sweep(profile):
    """The l2 sweep's trace shape: per footprint, a warm pass then a timed pass of 8-B elements
    at the line stride, contiguous placement."""
    frames = []
    for lines in (16, 32, 48, 96, 112, 160, 256, 320, 384):
        gpu = SimGPU(profile, seed=1)
        addresses = np.arange(lines, dtype=np.int64) * LINE
        gpu.load_sequence("cg", addresses, sm=0)
        addresses = np.tile(addresses, 4)  # four timed passes
        latency = gpu.load_sequence("cg", addresses, sm=0)
        frames.append(
            pd.DataFrame(
                {
                    "array_bytes": lines * LINE,
                    "index": addresses // 8,
                    "latency_cycles": latency,
                    "placement": "contiguous",
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def _l2_doc(near, size):
    return {
        "elements": {
            "l2": {
                "near_size_bytes": {"bracket_bytes": [near * LINE, (near + 48) * LINE]},
                "size_bytes": {"bracket_bytes": [size * LINE, (size + 48) * LINE]},
            }
        }
    }


def test_stores_holding_their_home_lines_read_as_shared_capacity(base_profile, write_profile):
    # one store (64 lines) holds a footprint of 48 lines; past it (96, 112) SM 0's own half
    # misses to DRAM while the other half hits in partition 1's store (its 48-56 lines fit);
    # at 160 and 256 lines the other half outgrows it: DRAM and the far trip
    trace = _sweep(_profile(base_profile, write_profile, home_lines=True))
    got = partition_capacity(trace, _l2_doc(48, 112), [9])
    assert got["home_lines_share_capacity"]["value"] is True, got["home_lines_share_capacity"]
    assert got["near_home_miss_latency_cycles"]["value"] == pytest.approx(DRAM)
    assert got["far_home_hit_latency_cycles"]["value"] == pytest.approx(HIT + FAR)
    assert got["far_home_miss_latency_cycles"]["value"] == pytest.approx(DRAM + FAR)
    # the L2's far hit, miss and penalty are one population's each, not the pooled plateaus'
    assert got["far_hit_latency_cycles"]["value"] == pytest.approx(HIT + FAR)
    assert got["miss_latency_cycles"]["value"] == pytest.approx(DRAM)
    assert got["miss_penalty_cycles"]["value"] == pytest.approx(DRAM - HIT)
    pooled = np.median(trace.loc[trace["array_bytes"] == 96 * LINE, "latency_cycles"])
    assert pooled not in (pytest.approx(HIT + FAR), pytest.approx(DRAM))


def test_copies_in_front_of_the_l2_read_as_not_shared(base_profile, write_profile):
    # copies in front of a 256-line L2: past one store both halves hit the L2 far alike
    trace = _sweep(_profile(base_profile, write_profile, home_lines=False))
    got = partition_capacity(trace, _l2_doc(48, 256), [9])
    assert got["home_lines_share_capacity"]["value"] is False
    assert got["far_home_hit_latency_cycles"]["value"] is None
    # the footprint sweep's own far and miss levels stand: the split reports none of its own
    assert not {"far_hit_latency_cycles", "miss_latency_cycles", "miss_penalty_cycles"} & set(got)


def test_without_a_partition_function_or_a_contiguous_walk_it_is_undetermined(
    base_profile, write_profile
):
    trace = _sweep(_profile(base_profile, write_profile, home_lines=True))
    got = partition_capacity(trace, _l2_doc(48, 112), None)
    assert "no partition function" in got["home_lines_share_capacity"]["undetermined"]
    got = partition_capacity(trace.assign(placement="allocator"), _l2_doc(48, 112), [9])
    assert "physical address bits" in got["home_lines_share_capacity"]["undetermined"]
