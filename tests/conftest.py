import shutil

import pytest


def _gpu_available() -> bool:
    try:
        import pycuda.driver as drv

        drv.init()
        return drv.Device.count() > 0
    except Exception:
        return False


# The modules that run the pipeline end to end, costliest first (each test's duration from
# `pytest --durations`): they are collected first, so that under pytest-xdist (`make test`:
# `-n 2 --dist loadscope --no-loadscope-reorder`, one module to one worker) they start at once
# and spread over the workers while the quick modules fill in around them. A module not named
# here keeps its place after them, in collection order.
COSTLIEST_FIRST = (
    "test_artifact_bundle.py",
    "test_twin_round_trip.py",
    "test_slurm_profile.py",
    "test_workflow.py",
    "test_study_targets.py",
    "test_install.py",
    "test_repeats.py",
)


def _cost_rank(item) -> int:
    name = item.path.name
    return COSTLIEST_FIRST.index(name) if name in COSTLIEST_FIRST else len(COSTLIEST_FIRST)


def pytest_collection_modifyitems(config, items):
    # a stable sort: each module's tests stay together and in their order
    items.sort(key=_cost_rank)
    if any(item.get_closest_marker("gpu") for item in items) and not _gpu_available():
        skip = pytest.mark.skip(reason="needs an NVIDIA GPU with pycuda (run on the GPU host)")
        for item in items:
            if item.get_closest_marker("gpu"):
                item.add_marker(skip)


@pytest.fixture(scope="session")
def nvcc():
    exe = shutil.which("nvcc")
    if exe is None:
        pytest.skip("nvcc not installed")
    return exe


@pytest.fixture(scope="module")
def cuda_backend_with(tmp_path_factory, nvcc):
    """A factory of GPU-test backends: `cuda_backend_with("pchase", ...)` is the cuda backend of
    device 0 with those kernels compiled for it, closed at the end of the module."""
    from gpudissect.backends.cuda import CudaBackend
    from gpudissect.devices import detect_arch
    from gpudissect.kernels import compile_kernel

    opened = []

    def open_with(*kernels: str):
        out = tmp_path_factory.mktemp("build")
        for k in kernels:
            compile_kernel(f"kernels/{k}.cu", arch=detect_arch(0), output=out / f"{k}.cubin")
        backend = CudaBackend(index=0, cubin_dir=out)
        opened.append(backend)
        return backend

    yield open_with
    # last opened first: each backend pushed its context onto the thread's stack
    for backend in reversed(opened):
        backend.close()


@pytest.fixture(scope="module")
def pchase_backend(cuda_backend_with):
    """The cuda backend of device 0 with `kernels/pchase.cu` compiled for it (GPU tests)."""
    return cuda_backend_with("pchase")
