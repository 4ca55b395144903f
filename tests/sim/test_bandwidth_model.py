"""The streaming model of sim/bandwidth.py: the vectorised set index against each index's own
`set_of`, the cyclic-walk residency by hand, and the queueing network's two regimes."""

from __future__ import annotations

import numpy as np
import pytest

from gpudissect.sim.bandwidth import (
    ACCESS_BYTES,
    StreamLevel,
    mva_multi,
    resident_share,
    set_indices,
    stream_throughput,
)
from gpudissect.sim.cache import CacheSpec
from gpudissect.sim.indexing import IndexSpec, make_index
from gpudissect.sim.policies import PolicySpec


def _spec(sets, ways, *, index=None, data_bytes=None, line=128):
    return CacheSpec(
        name="l1d",
        size_bytes=sets * ways * line,
        line_bytes=line,
        set_ways=(ways,) * sets,
        hit_latency_cycles=1,
        index=index or IndexSpec(),
        policy=PolicySpec("lru", ()),
        data_bytes=data_bytes,
    )


@pytest.mark.parametrize(
    "index",
    [
        IndexSpec(),
        IndexSpec(kind="xor", masks=(0x880, 0x1100, 0x2200, 0x4400)),
        IndexSpec(kind="bit_list", bits=(7, 9, 11, 13)),
        IndexSpec(
            kind="table", period_bytes=2048, sets_of_lines=tuple((7 * i) % 16 for i in range(16))
        ),
    ],
)
def test_the_vectorised_index_is_each_index_functions_own(index):
    spec = _spec(16, 2, index=index)
    addresses = np.random.default_rng(3).integers(0, 1 << 30, 4000, dtype=np.int64)
    scalar = make_index(index, sets=16, line_bytes=128)
    assert set_indices(spec, addresses).tolist() == [scalar.set_of(int(a)) for a in addresses]


def test_a_cyclic_walk_keeps_the_sets_within_their_ways():
    # 4 sets x 2 ways, modulo index: 10 consecutive lines put 3 lines in sets 0 and 1 and 2 in
    # sets 2 and 3; LRU evicts each line of an overfull set before its reuse, so the 4 lines of
    # sets 2 and 3 hit and the 6 of sets 0 and 1 miss: 4 / 10
    spec = _spec(4, 2)
    lines = np.arange(10, dtype=np.uint64) * 128
    assert resident_share(spec, lines) == pytest.approx(0.4)
    assert resident_share(spec, lines[:8]) == 1.0
    # a data array of 6 lines (a shared partition beside the L1): 8 lines overflow it
    assert resident_share(_spec(4, 2, data_bytes=6 * 128), lines[:8]) == 0.0


def test_few_customers_wait_on_latency_and_many_queue_at_the_slowest_server():
    # one customer: one pass of 100 ns delay + 5 ns at the server -> 1 / 105 per ns
    assert mva_multi(1, [5.0], 100.0) == pytest.approx(1 / 105)
    # many: the 5-ns server is the bottleneck, 0.2 per ns, whatever the other (2 ns) does
    assert mva_multi(500, [5.0, 2.0], 100.0) == pytest.approx(0.2, rel=1e-3)
    # a stream served by level 1 passes levels 0 and 1: 1 SM, 64 accesses in flight, the
    # level-1 server at 10 B/ns per SM is the limit (level 0 serves 100 B/ns)
    levels = [
        StreamLevel("l1d", 30, 100.0),
        StreamLevel("l2", 200, 10.0),
        StreamLevel("dram", 600, None),
    ]
    gbps = stream_throughput(levels, [0.0, 1.0, 0.0], warps_per_sm=16, sms=1, sm_clock_mhz=1000)
    assert gbps == pytest.approx(10.0, rel=1e-3)
    assert ACCESS_BYTES == 512
