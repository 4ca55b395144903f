"""One measuring process at a time on a GPU, whichever run or job it belongs to.

A sweep on a CUDA device holds an exclusive lock on a file named for the host and the GPU's
PCI bus id (in the system's temporary folder) from before it makes its context until it has
closed it. A second sweep job may so start, import and start the driver while the first one
measures, and begins the moment the first lets go: the workflow keeps two sweep jobs in flight
on a local run (README: "Running on a GPU"), and the lock keeps their measurements apart. The
lock is the kernel's (`flock`): a process that dies lets go of it.
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
import tempfile
import time
from pathlib import Path


def lock_path(gpu: str) -> Path:
    """The lock file of GPU `gpu` (its PCI bus id) on this host."""
    name = re.sub(r"[^A-Za-z0-9.]+", "_", f"{socket.gethostname()}-{gpu}")
    return Path(tempfile.gettempdir()) / f"gpudissect-gpu-{name}.lock"


class GpuLock:
    """An exclusive hold on GPU `gpu`, taken at construction (waiting as long as another
    process holds it) and given back by `release()` (or by the process's end)."""

    def __init__(self, gpu: str) -> None:
        self.path = lock_path(gpu)
        # read-only: a lock file another user made (mode 0644) still opens; flock needs no write
        self._fd: int | None = os.open(self.path, os.O_RDONLY | os.O_CREAT, 0o644)
        started = time.monotonic()
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except BaseException:
            self.release()
            raise
        self.waited_s = time.monotonic() - started

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the file gives the lock back
            self._fd = None
