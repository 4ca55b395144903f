"""Every kernel compiles for every arch the installed nvcc lists (nvcc here, no GPU needed)."""

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gpudissect.exceptions import KernelCompileError
from gpudissect.kernels import compile_kernel, nvcc_archs

REPO = Path(__file__).resolve().parents[1]
KERNELS = sorted((REPO / "kernels").glob("*.cu"))


def test_every_kernel_compiles_for_every_arch(tmp_path, nvcc):
    # one nvcc process per (kernel, arch), as many at once as there are cores: the threads only
    # wait on nvcc. Every cubin goes to this test's own temporary directory (nothing is cached).
    archs = nvcc_archs(nvcc)
    assert archs, f"`{nvcc} --list-gpu-arch` listed no arch"
    jobs = [(kernel, arch) for arch in archs for kernel in KERNELS]

    def build(job):
        kernel, arch = job
        try:
            result = compile_kernel(
                kernel, arch=arch, nvcc=nvcc, output=tmp_path / arch / f"{kernel.stem}.cubin"
            )
        except KernelCompileError as err:
            return f"{kernel.name} for {arch}:\n{err}"
        if result.cubin.stat().st_size == 0:
            return f"{kernel.name} for {arch}: nvcc wrote an empty cubin"
        if "ptxas info" not in result.log:  # the resource report goes to the rule's log
            return f"{kernel.name} for {arch}: no ptxas resource report in the log"
        return None

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        failures = [f for f in pool.map(build, jobs) if f is not None]
    if failures:
        pytest.fail(f"{len(failures)} of {len(jobs)} compiles failed:\n\n" + "\n\n".join(failures))


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
