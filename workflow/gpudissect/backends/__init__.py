"""Backends execute the work an experiment builds: `sim` on the simulator, `cuda` on a GPU."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import DeviceEntry
    from ..contract.backend import Backend


def open_backend(
    device: DeviceEntry, *, cubin_dir: str | None = None, exclusive: bool = False
) -> Backend:
    """The backend for a configured device entry (use as a context manager). `exclusive`: a
    GPU's backend holds the GPU's measurement lock while open (`gpu_lock`)."""
    if device.backend == "sim":
        from .sim import SimBackend

        return SimBackend(profile_path=device.profile, seed=device.seed)
    from .cuda import CudaBackend

    return CudaBackend(index=device.index, cubin_dir=cubin_dir, exclusive=exclusive)
