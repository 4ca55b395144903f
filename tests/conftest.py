import shutil

import pytest


def _gpu_available() -> bool:
    try:
        import pycuda.driver as drv

        drv.init()
        return drv.Device.count() > 0
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
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
    for backend in opened:
        backend.close()


@pytest.fixture(scope="module")
def pchase_backend(cuda_backend_with):
    """The cuda backend of device 0 with `kernels/pchase.cu` compiled for it (GPU tests)."""
    return cuda_backend_with("pchase")
