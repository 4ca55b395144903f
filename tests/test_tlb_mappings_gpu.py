"""GPU check of the mapped chases of `tlb_mappings` (run on the GPU host: `pytest -m gpu`): both
layouts are reserved, allocated and mapped through the CUDA virtual-memory API, a chase walks a
small range of them, the pointers resolve (each load returns the next element's index) and the
values read back through the copy engine are those written."""

import numpy as np
import pytest

from gpudissect.experiments.mapped_chase import MappedChaseWork, PhysicalLayout, ReleaseMapping
from gpudissect.experiments.sparse_chase import sequence_work

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def backend(pchase_backend):
    return pchase_backend


@pytest.mark.parametrize("kind", ["contiguous", "scattered"])
def test_mapped_chase_resolves_its_pointers(backend, kind):
    from gpudissect.backends.mapping_cuda import granularity_bytes, read_back

    chunk = granularity_bytes(backend.index)
    layout = PhysicalLayout(kind, chunks=24, chunk_bytes=chunk, seed=3)
    # one element per chunk at an offset that differs per chunk (not only chunk starts), 20
    # chunks in a shuffled order
    rng = np.random.default_rng(0)
    chunks = rng.permutation(20)
    seq = chunks * (chunk // 8) + (chunks * 40 + 8)
    work = MappedChaseWork(
        sequence_work("cg", seq, warmup_steps=20, record_steps=60, element_bytes=8), layout
    )
    result = backend.run(work, carveout_pct=None, seed=0)
    # visit t loads seq[t % 20] and returns seq[(t + 1) % 20]
    t = 20 + np.arange(60)
    expected = seq[(t + 1) % 20]
    assert result.indices.tolist() == (expected & 0xFFFFFFFF).tolist()
    assert (result.latency_cycles > 0).all()
    assert read_back(backend, work).tolist() == work.chase.sparse_next.tolist()
    backend.run(ReleaseMapping())
    assert getattr(backend, "_vmm_range", None) is None


def test_layouts_replace_each_other(backend):
    from gpudissect.backends.mapping_cuda import granularity_bytes

    chunk = granularity_bytes(backend.index)
    seq = np.arange(8) * (chunk // 8)
    for kind in ("scattered", "contiguous", "scattered"):
        layout = PhysicalLayout(kind, chunks=8, chunk_bytes=chunk, seed=1)
        work = MappedChaseWork(
            sequence_work("cg", seq, warmup_steps=8, record_steps=16, element_bytes=8), layout
        )
        result = backend.run(work, carveout_pct=None, seed=0)
        assert result.indices.tolist() == seq[(8 + np.arange(16) + 1) % 8].tolist()
        assert backend._vmm_range.layout == layout
    backend.run(ReleaseMapping())


def test_l2_sweep_walks_one_contiguous_allocation(backend):
    """The `l2` sweep with placement contiguous: its walks run over the mapped range (the
    trace says so), the L2-resident footprint reads faster than one of four times the L2, and
    the mapping is released at the end."""
    from gpudissect.experiments import l2

    l2_bytes = backend.facts().l2_bytes
    small, large = l2_bytes // 8, 4 * l2_bytes
    p = l2.L2Params(
        enabled=True,
        path="cg",
        stride_bytes=128,
        array_bytes=(small, small + 128 * 1024, large, large + 128 * 1024),
        record_steps=512,
        placement="contiguous",
    )
    data = l2.run(backend, p, device=None)
    assert set(data["placement"]) == {"contiguous"}
    med = data.groupby("array_bytes")["latency_cycles"].median()
    print(f"median {med[small]} cycles at {small} B, {med[large]} at {large} B")
    assert med[small] < med[large]
    assert getattr(backend, "_vmm_range", None) is None
