"""GPU tests of the cuda backend (run on the GPU host: `pytest -m gpu`)."""

import numpy as np
import pytest

from gpudissect.contract.backend import ChaseWork
from gpudissect.patterns import chain_pass_steps, stride_chain

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def backend(pchase_backend):
    return pchase_backend


def _work(path, array_bytes, stride_bytes, buffer_bytes=16384, record=None):
    chain = stride_chain(array_bytes=array_bytes, stride_bytes=stride_bytes)
    steps = chain_pass_steps(array_bytes=array_bytes, stride_bytes=stride_bytes)
    return ChaseWork(
        path=path,
        chain=chain,
        start_index=0,
        warmup_steps=steps,
        record_steps=record or steps,
        shared_buffer_bytes=buffer_bytes,
    )


@pytest.mark.parametrize("path", ["ca", "cg", "nc", "tex", "const"])
def test_chase_returns_the_chain_walk(backend, path):
    # 8 KiB array, stride 128 B = 32 elements: the walk from 0 visits 32, 64, ..., 2016, 0, ...
    work = _work(path, 8192, 128, record=100)
    result = backend.run_chase(work, carveout_pct=100)
    j, expected = 0, []
    for _ in range(work.warmup_steps):
        j = int(work.chain[j])
    for _ in range(work.record_steps):
        j = int(work.chain[j])
        expected.append(j)
    assert result.indices.tolist() == expected
    assert (result.latency_cycles > 0).all()


def test_small_array_hits_faster_than_large_on_cg(backend):
    # 4 KiB fits any L2. 256 MiB at a 128 B stride touches 2 M distinct lines (256 MiB), over
    # five times the largest L2 of any GPU we target (H100: 50 MiB), so the timed pass misses.
    small = backend.run_chase(_work("cg", 4096, 128), carveout_pct=100)
    big = backend.run_chase(_work("cg", 256 << 20, 128, record=2048), carveout_pct=100)
    assert np.median(big.latency_cycles) > 1.5 * np.median(small.latency_cycles)


def test_device_info_has_provenance(backend):
    info = backend.device_info()
    assert info["compute_capability"]
    assert info["arch"].startswith("sm_")
    assert info["uuid"], "NVML should give the UUID"
    clocks = backend.clocks()
    assert clocks["sm_clock_mhz"] and clocks["sm_clock_mhz"] > 0


def test_facts_come_from_the_driver(backend):
    facts = backend.facts()
    assert facts.source == "driver"
    assert facts.sm_count > 0 and facts.max_threads_per_sm >= 1024
    assert facts.l2_bytes and facts.l2_bytes >= 1 << 20
    assert facts.shared_per_block_optin_bytes <= facts.shared_per_sm_bytes
    assert facts.total_memory_bytes > facts.l2_bytes


def test_sparse_chain_walks_like_the_dense_one(backend):
    # 64 MiB array, every 2 MiB: only 32 elements hold values; the walk must visit them in order
    n = (64 << 20) // 4
    step = (2 << 20) // 4
    pos = np.arange(0, n, step, dtype=np.int64)
    nxt = ((pos + step) % n).astype(np.uint32)
    work = ChaseWork(
        path="cg",
        chain=None,
        start_index=0,
        warmup_steps=32,
        record_steps=64,
        shared_buffer_bytes=16384,
        array_elements=n,
        sparse_positions=pos,
        sparse_next=nxt,
    )
    result = backend.run_chase(work, carveout_pct=100)
    assert result.indices.tolist() == work.walk(32 + 65)[33:].tolist()


@pytest.mark.parametrize("path", ["ca", "cg", "nc"])
def test_eight_byte_chain_walks_past_16_gib(backend, path):
    # 8-byte elements, 64-bit indices: 24 elements 1 GiB apart span 23 GiB, past the 16 GiB
    # that 32-bit indices of 4-byte elements reach; the recorded indices are their low 32 bits
    step = (1 << 30) // 8
    pos = np.arange(24, dtype=np.int64) * step
    nxt = np.roll(pos, -1).astype(np.uint64)
    work = ChaseWork(
        path=path,
        chain=None,
        start_index=0,
        warmup_steps=24,
        record_steps=48,
        shared_buffer_bytes=16384,
        element_bytes=8,
        array_elements=int(pos[-1]) + 1,
        sparse_positions=pos,
        sparse_next=nxt,
    )
    result = backend.run_chase(work, carveout_pct=100)
    expected = work.walk(24 + 49)[25:] % 2**32
    assert result.indices.tolist() == expected.tolist()


def test_l1_first_miss_at_carveout_100_is_the_same_in_every_allocation(backend):
    # l1_size's array (written on the GPU) in three allocations: the L1 at carveout 100 starts
    # missing at one size in all three. Copied from the host instead, the first miss of an H100
    # moved between about 8 and 20 KiB from one allocation to the next.
    from pathlib import Path

    from gpudissect.analysis.common.misses import first_miss_bracket
    from gpudissect.config import load
    from gpudissect.experiments.l1_size import _work

    repo = Path(__file__).resolve().parents[1]
    sweep = load(repo / "config" / "gpu.yaml", base_dir=repo).device("gpu0").params["l1_size"]
    sizes = list(range(4096, 40960 + 1, 1024))
    brackets = []
    for _ in range(3):
        backend.release_buffer()
        groups = [
            np.concatenate(
                [
                    backend.run_chase(
                        _work(sweep, n, 16384), carveout_pct=100, seed=r
                    ).latency_cycles
                    for r in (0, 1)
                ]
            ).astype(np.float64)
            for n in sizes
        ]
        brackets.append(first_miss_bracket(sizes, groups))
    assert brackets[0] is not None
    assert brackets.count(brackets[0]) == 3, brackets
