"""GPU tests of the multi-thread P-chase (`kernels/multichase.cu`; run on the GPU host:
`pytest -m gpu`)."""

import numpy as np
import pytest

from gpudissect.experiments.disturbance import CacheTarget, build_work

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def backend(cuda_backend_with):
    import gpudissect.backends.multichase_cuda  # noqa: F401 - registers the handler

    return cuda_backend_with("multichase")


@pytest.mark.parametrize("path", ["ca", "cg", "nc", "tex", "const"])
def test_timed_walk_follows_thread_a_chain(backend, path):
    # A walks 100 elements at 128 B; B (thread 1) walks its own region on the same path; A's
    # timed walk returns A's chain from its start: 32, 64, ..., then back to 0
    a = CacheTarget(path, 16000, 128)
    work = build_work(a, a, warp_b=0, fill_fraction=0.8, shared_buffer_bytes=16384)
    result = backend.run(work, carveout_pct=None)
    assert len(result.latency_cycles) == 100
    assert result.indices[:3].tolist() == [32, 64, 96] and result.indices[-1] == 0
    assert (result.latency_cycles > 0).all()


def test_threads_in_other_warps_run_in_script_order(backend):
    # the same ca walk with B in warp 3: its walk happens between A's two (the barrier holds
    # the warps), and A's timed walk still follows A's chain
    a = CacheTarget("ca", 16000, 128)
    work = build_work(a, a, warp_b=3, fill_fraction=0.8, shared_buffer_bytes=16384)
    result = backend.run(work, carveout_pct=0)
    assert result.indices[:3].tolist() == [32, 64, 96]
    assert np.median(result.latency_cycles) < 1000
