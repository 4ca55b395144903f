"""Compile `kernels/*.cu` to cubins with nvcc, one (kernel, arch) at a time."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .exceptions import KernelCompileError

ARCH_PATTERN = re.compile(r"^sm_[0-9]{2,3}[a-z]?$")


@dataclass(frozen=True)
class CompileResult:
    cubin: Path
    command: tuple[str, ...]
    log: str
    sha256: str


def nvcc_archs(nvcc: str = "nvcc") -> list[str]:
    """Target archs the installed nvcc can compile for, as `sm_XX`."""
    exe = shutil.which(nvcc)
    if exe is None:
        raise KernelCompileError(f"nvcc not found (looked for {nvcc!r} on PATH); install CUDA")
    out = subprocess.run([exe, "--list-gpu-arch"], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise KernelCompileError(f"`{nvcc} --list-gpu-arch` failed:\n{out.stderr}")
    return [line.replace("compute_", "sm_") for line in out.stdout.split() if line]


def compile_kernel(
    source: str | os.PathLike,
    *,
    arch: str,
    output: str | os.PathLike,
    nvcc: str = "nvcc",
    extra_flags: tuple[str, ...] = ("-O3",),
) -> CompileResult:
    """Compile one `.cu` file to a cubin for one arch; atomically replaces `output`.

    Raises KernelCompileError carrying the command line and nvcc's output on failure.
    """
    if not ARCH_PATTERN.match(arch):
        raise KernelCompileError(f"arch {arch!r} is not of the form sm_XX (for example sm_90)")
    exe = shutil.which(nvcc)
    if exe is None:
        raise KernelCompileError(f"nvcc not found (looked for {nvcc!r} on PATH); install CUDA")
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(f".{output.name}.tmp{os.getpid()}")
    command = (
        exe,
        "-cubin",
        f"-arch={arch}",
        *extra_flags,
        "-Xptxas",
        "-v",
        "-o",
        str(tmp),
        str(source),
    )
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    log = f"$ {shlex.join(command)}\n{proc.stdout}{proc.stderr}"
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise KernelCompileError(f"nvcc failed (exit {proc.returncode}):\n{log}")
    os.replace(tmp, output)
    return CompileResult(cubin=output, command=command, log=log, sha256=file_sha256(output))


def file_sha256(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
