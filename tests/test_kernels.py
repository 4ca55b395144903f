"""Every kernel compiles for every arch nvcc lists from sm_75 up (nvcc here, no GPU needed)."""

from pathlib import Path

import pytest

from gpudissect.exceptions import KernelCompileError
from gpudissect.kernels import compile_kernel, nvcc_archs

REPO = Path(__file__).resolve().parents[1]
KERNELS = sorted((REPO / "kernels").glob("*.cu"))


def _archs():
    try:
        archs = nvcc_archs()
    except KernelCompileError:
        return []
    return [a for a in archs if int(a[3:].rstrip("abcdef")) >= 75]


@pytest.mark.parametrize("arch", _archs() or ["sm_90"])
@pytest.mark.parametrize("kernel", KERNELS, ids=lambda p: p.stem)
def test_kernel_compiles(kernel, arch, tmp_path, nvcc):
    result = compile_kernel(kernel, arch=arch, output=tmp_path / f"{kernel.stem}.cubin")
    assert result.cubin.stat().st_size > 0
    assert "ptxas info" in result.log  # the resource report goes to the rule's log
    assert result.command[0].endswith("nvcc")


def test_compile_failure_carries_command_and_output(tmp_path, nvcc):
    bad = tmp_path / "bad.cu"
    bad.write_text('extern "C" __global__ void k() { this is not cuda; }\n')
    with pytest.raises(KernelCompileError) as err:
        compile_kernel(bad, arch="sm_90", output=tmp_path / "bad.cubin")
    assert "nvcc" in str(err.value) and "bad.cu" in str(err.value)
    assert "error" in str(err.value)
    assert not (tmp_path / "bad.cubin").exists()


def test_bad_arch_refused(tmp_path):
    with pytest.raises(KernelCompileError, match="sm_XX"):
        compile_kernel(KERNELS[0], arch="hopper", output=tmp_path / "x.cubin")
