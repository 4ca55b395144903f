"""Finding CUDA GPUs on this host (for `gpudissect devices` and arch auto-detection)."""

from __future__ import annotations

import shutil
import subprocess

from .exceptions import DeviceUnavailable


def _nvidia_smi() -> list[dict]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run(
            [exe, "--query-gpu=index,name,compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in out.strip().splitlines():
        idx, name, cc = (x.strip() for x in line.split(","))
        gpus.append(
            {"index": int(idx), "name": name, "compute_capability": cc, "source": "nvidia-smi"}
        )
    return gpus


def list_cuda_devices() -> list[dict]:
    gpus = _nvidia_smi()
    if gpus:
        return gpus
    try:
        import pycuda.driver as drv

        drv.init()
        return [
            {
                "index": i,
                "name": drv.Device(i).name(),
                "compute_capability": ".".join(map(str, drv.Device(i).compute_capability())),
                "source": "pycuda",
            }
            for i in range(drv.Device.count())
        ]
    except Exception:
        return []


def detect_arch(index: int = 0) -> str:
    """`sm_XX` of CUDA device `index` (nvidia-smi's device order, as CUDA's by PCI bus)."""
    for g in list_cuda_devices():
        if g["index"] == index:
            return "sm_" + g["compute_capability"].replace(".", "")
    raise DeviceUnavailable(
        f"cannot detect the arch of CUDA device {index}: no such GPU found here (nvidia-smi and "
        "pycuda found none). Set devices[].arch (for example sm_90) or run on the GPU host"
    )


def cuda_backend_missing() -> str | None:
    """Why no sweep can run on a CUDA device here (None when pycuda is importable): checked
    before any job, so a run does not compile kernels for a GPU it cannot reach."""
    import importlib.util

    if importlib.util.find_spec("pycuda") is not None:
        return None
    return (
        "pycuda is not installed on this host, so no sweep can run on a GPU here (no GPU "
        "backend). On the GPU host: pip install .[cuda]; elsewhere use backend: sim devices"
    )
