"""ChaseWork: dense and sparse arrays describe the same walk; the sim backend runs both alike."""

import numpy as np
import pytest

from gpudissect.backends.sim import SimBackend
from gpudissect.contract.backend import ChaseWork
from gpudissect.patterns import stride_chain, stride_cycle

PROFILE = "tests/data/tiny_profile.yaml"


def _pair():
    # 4 KiB array, stride 128 B = 32 elements: dense A[i] = (i + 32) mod 1024; the sparse form
    # keeps only the 32 visited elements 0, 32, ..., 992
    dense = ChaseWork(
        path="ca",
        chain=stride_chain(array_bytes=4096, stride_bytes=128),
        start_index=0,
        warmup_steps=32,
        record_steps=64,
        shared_buffer_bytes=4096,
    )
    pos = np.arange(0, 1024, 32, dtype=np.int64)
    sparse = ChaseWork(
        path="ca",
        chain=None,
        start_index=0,
        warmup_steps=32,
        record_steps=64,
        shared_buffer_bytes=4096,
        array_elements=1024,
        sparse_positions=pos,
        sparse_next=((pos + 32) % 1024).astype(np.uint32),
    )
    return dense, sparse


def test_walk_visits_stride_elements_in_order():
    dense, sparse = _pair()
    expected = [(32 * k) % 1024 for k in range(40)]
    assert dense.walk(40).tolist() == expected
    assert sparse.walk(40).tolist() == expected


def test_sim_runs_dense_and_sparse_alike(monkeypatch):
    monkeypatch.chdir(__import__("pathlib").Path(__file__).resolve().parents[1])
    backend = SimBackend(profile_path=PROFILE, seed=1)
    dense, sparse = _pair()
    a = backend.run_chase(dense, carveout_pct=None, seed=3)
    b = backend.run_chase(sparse, carveout_pct=None, seed=3)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.latency_cycles, b.latency_cycles)


def test_sparse_walk_into_an_empty_element_is_an_error():
    pos = np.array([0, 32], dtype=np.int64)
    work = ChaseWork(
        path="ca",
        chain=None,
        start_index=0,
        warmup_steps=0,
        record_steps=4,
        shared_buffer_bytes=1024,
        array_elements=1024,
        sparse_positions=pos,
        sparse_next=np.array([32, 64], dtype=np.uint32),
    )
    with pytest.raises(ValueError, match="reaches element 64"):
        work.walk(4)


@pytest.mark.parametrize(
    ("array_bytes", "stride_bytes"), [(4096, 128), (4096, 4096), (1000, 12), (12, 4)]
)
def test_stride_chain_is_the_next_element_s_ahead_modulo_the_array(array_bytes, stride_bytes):
    # A[i] = (i + s) mod N, written out element by element
    n, s = array_bytes // 4, stride_bytes // 4
    expected = [(i + s) % n for i in range(n)]
    chain = stride_chain(array_bytes=array_bytes, stride_bytes=stride_bytes)
    assert chain.dtype == np.uint32
    assert chain.tolist() == expected


@pytest.mark.parametrize(
    ("array_bytes", "stride_bytes"), [(4096, 128), (4096, 4096), (1000, 12), (1000, 24), (12, 4)]
)
def test_the_stride_cycle_is_the_dense_chain_walk_over_its_visited_elements(
    array_bytes, stride_bytes
):
    # (1000, 24): N = 250, s = 6, gcd 2, so the walk from 0 visits the 125 even elements
    chain = stride_chain(array_bytes=array_bytes, stride_bytes=stride_bytes)
    positions, values = stride_cycle(array_bytes=array_bytes, stride_bytes=stride_bytes)
    n, s = array_bytes // 4, stride_bytes // 4
    assert len(positions) == n // np.gcd(n, s)
    common = dict(path="ca", start_index=0, warmup_steps=0, record_steps=4,
                  shared_buffer_bytes=1024)  # fmt: skip
    dense = ChaseWork(chain=chain, **common)
    sparse = ChaseWork(chain=None, array_elements=n, sparse_positions=positions,
                       sparse_next=values, **common)  # fmt: skip
    steps = 2 * len(positions) + 3
    assert sparse.walk(steps).tolist() == dense.walk(steps).tolist()


def test_l1_size_writes_only_the_visited_elements():
    # the array is written on the GPU (a sparse chase), not copied from the host whole
    from gpudissect.experiments.l1_size import L1SizeSweep, _work

    sweep = L1SizeSweep(
        enabled=True,
        path="ca",
        stride_bytes=128,
        array_bytes=None,
        shared_buffer_bytes=(16384,),
        max_record_steps=1024,
        repetitions=1,
    )
    work = _work(sweep, 28672, 16384)
    assert work.chain is None
    assert work.sparse_positions.tolist() == list(range(0, 7168, 32))
    assert work.warmup_steps == 224 and work.shared_buffer_bytes == 16384


@pytest.mark.parametrize("seed", range(4))
def test_sparse_walk_follows_every_link_as_a_lookup_table_does(seed):
    # the walk, step by step through a dict of element -> next, against ChaseWork.walk on
    # random sparse chains (positions unsorted), some of which run into an empty element
    rng = np.random.default_rng(seed)
    pos = rng.choice(5000, size=300, replace=False).astype(np.int64)
    nxt = rng.choice(pos, size=300).astype(np.uint32)
    if seed % 2:
        nxt[rng.integers(300)] = 4999 if 4999 not in pos else 5000  # an empty element
    table = dict(zip(pos.tolist(), nxt.tolist(), strict=True))
    start = int(pos[rng.integers(300)])
    work = ChaseWork(
        path="ca",
        chain=None,
        start_index=start,
        warmup_steps=0,
        record_steps=4,
        shared_buffer_bytes=1024,
        array_elements=5001,
        sparse_positions=pos,
        sparse_next=nxt,
    )
    expected, j = [], start
    for _ in range(2000):
        expected.append(j)
        if j not in table:
            with pytest.raises(ValueError, match=f"reaches element {j},"):
                work.walk(2000)
            return
        j = table[j]
    assert work.walk(2000).tolist() == expected
    assert work.walk(1).tolist() == [start] and work.walk(0).tolist() == []
