"""Cuda handler of the pointer walk (`experiments.pointer_walk`, `kernels/pointer_walk.cu`): the
window lies in the backend's chase buffer (twice the window, so that an aligned window fits),
the chain is written by `link_words` on the device, then one thread walks it. pycuda comes
through the backend (imported lazily); nothing here runs without a GPU."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..contract.backend import handles
from ..exceptions import DeviceUnavailable
from ..experiments.pointer_walk import PointerWalkWork, WalkResult

if TYPE_CHECKING:
    from .cuda import CudaBackend

KERNEL = "pointer_walk"
LINK_THREADS = 256
CLOCK_MAX_AGE_S = 0.5  # the SM clock reading a launch records may be this old (as pchase's)


def window_base(buffer_address: int, window_bytes: int) -> int:
    """The first multiple of `window_bytes` at or after `buffer_address`."""
    return (buffer_address + window_bytes - 1) // window_bytes * window_bytes


def _l1_flush(backend: CudaBackend) -> tuple[object, int]:
    """The buffer every walk reads first to push all lines out of its SM's L1 (the kernel's
    comment says why): twice the SM's shared memory (the L1 and shared memory are one array),
    one load per 128-B line; allocated once per backend."""
    got = getattr(backend, "_pointer_walk_flush", None)
    if got is None:
        shared = backend.facts().shared_per_sm_bytes or 256 * 1024
        nbytes = 2 * (1 << (int(shared) - 1).bit_length())
        got = (backend.drv.mem_alloc(nbytes), nbytes // 128)
        backend._pointer_walk_flush = got
    return got


@handles("cuda", PointerWalkWork)
def run_pointer_walk(backend: CudaBackend, work: PointerWalkWork, **_: object) -> WalkResult:
    drv = backend.drv
    buf = backend._device_buffer(2 * work.window_bytes)
    base = window_base(int(buf), work.window_bytes)
    link = backend.function(KERNEL, "link_words", "QPI")
    walk = backend.function(KERNEL, "walk_ca", "PIPIPPPI")
    flush, flush_lines = _l1_flush(backend)
    n, records = len(work.offsets_bytes), len(work.record_steps)
    offsets = np.ascontiguousarray(work.offsets_bytes, dtype=np.uint64)
    steps = np.ascontiguousarray(np.append(work.record_steps, 0), dtype=np.uint32)
    # kept across walks (thousands a sweep): the kernels read the first n offsets and records
    # + 1 steps copied here, and write every latency and the final address read back
    d_off = backend.kept_buffer("walk_offsets", offsets.nbytes)
    d_rec = backend.kept_buffer("walk_record_steps", steps.nbytes)
    d_lat = backend.kept_buffer("walk_latency", 4 * records)
    d_end = backend.kept_buffer("walk_end", 8)
    drv.memcpy_htod(d_off, offsets)
    drv.memcpy_htod(d_rec, steps)
    latency = np.zeros(records, dtype=np.uint32)
    end = np.zeros(1, dtype=np.uint64)
    link.prepared_call(
        ((n + LINK_THREADS - 1) // LINK_THREADS, 1),
        (LINK_THREADS, 1, 1),
        np.uint64(base),
        d_off,
        np.uint32(n),
    )
    backend.context.synchronize()
    backend._set_shared(
        walk, dynamic_bytes=work.shared_buffer_bytes, carveout_pct=work.carveout_pct
    )
    walk.prepared_call(
        (1, 1),
        (1, 1, 1),
        base + int(work.offsets_bytes[0]),
        np.uint32(n),
        d_rec,
        np.uint32(records),
        d_lat,
        d_end,
        flush,
        np.uint32(flush_lines),
        shared_size=work.shared_buffer_bytes,
    )
    backend.context.synchronize()
    drv.memcpy_dtoh(latency, d_lat)
    drv.memcpy_dtoh(end, d_end)
    if int(end[0]) != base + int(work.offsets_bytes[0]):
        raise DeviceUnavailable(
            f"the pointer walk ended at {int(end[0]):#x}, not at its first word "
            f"{base + int(work.offsets_bytes[0]):#x} as the chain it was given does"
        )
    sm = backend.nvml.sm_clock(max_age_s=CLOCK_MAX_AGE_S)
    return WalkResult(latency_cycles=latency, sm_clock_mhz=float(sm) if sm else float("nan"))
