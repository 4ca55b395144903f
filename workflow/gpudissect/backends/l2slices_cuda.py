"""CUDA handler of the L2 slice map (kernels/l2slices.cu). pycuda is imported lazily, by the
backend; the handler uses its context, prepared functions and chase buffer.

The region and the flush buffer live in the backend's chase buffer, held for the whole sweep
(`CudaBackend._device_buffer`): the same physical pages for every SM and repetition, so that
the addresses' slices do not change between launches. The region starts at the first
`region_bytes`-aligned address of the buffer; the flush buffer follows it. The contention
launches (`l2_slice_hammer`) hammer lines of the same region: each launch is timed by a pair of
events, queued back to back and read once the last has run."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..contract.backend import handles
from ..exceptions import DeviceUnavailable
from ..experiments.l2_slices import (
    CONTENTION_WARPS,
    L2ContentionResult,
    L2ContentionWork,
    L2SliceResult,
    L2SliceWork,
)

if TYPE_CHECKING:
    from .cuda import CudaBackend

KERNEL = "l2slices"
GRID_TRIES = 4  # launches with a growing grid before an SM counts as absent
FLUSH_BLOCKS, FLUSH_THREADS = 1024, 256


def _region(backend: CudaBackend, region_bytes: int, flush_bytes: int) -> tuple[int, int]:
    """(region address, flush buffer address) inside the chase buffer."""
    base = int(backend._device_buffer(2 * region_bytes + flush_bytes, exact=True))
    region = (base + region_bytes - 1) // region_bytes * region_bytes
    return region, region + region_bytes


def _layout(backend: CudaBackend, work: L2SliceWork) -> tuple[int, int]:
    """(region address, flush buffer address) inside the chase buffer; the region's contents are
    uploaded when the buffer or the chain is new."""
    region, flush = _region(backend, work.region_bytes, work.flush_bytes)
    key = (region, work.region_bytes, work.offsets_bytes.tobytes())
    if getattr(backend, "_l2_slice_region", None) != key:
        backend.drv.memcpy_htod(region, work.region())
        backend._l2_slice_region = key
    return region, flush


def _block_shared_bytes(backend: CudaBackend, need: int) -> int:
    """Dynamic shared memory of one block: at least `need`, and more than half of what an SM
    holds, so that no two blocks share an SM."""
    a = backend.drv.device_attribute
    optin = backend.device.get_attribute(a.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
    per_sm = backend.device.get_attribute(a.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)
    want = max(need, per_sm // 2 + 1024)
    if need > optin:
        raise DeviceUnavailable(
            f"the timed walk needs {need} B of shared memory, more than a block may have "
            f"({optin} B): lower lines"
        )
    return min(want, optin)


def _walk(backend, fn, region, work, *, sm, warmup, record, shared) -> tuple[np.ndarray, int]:
    """One walk on SM `sm`: (latencies, the SM id the walking block read), -1 when no block of
    any grid tried landed there."""
    drv = backend.drv
    latency = np.zeros(max(record, 1), dtype=np.uint32)
    result = np.zeros(2, dtype=np.uint32)
    sms = backend.device.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)
    blocks = work.grid_blocks or 2 * sms
    # kept across walks (two walks a work, thousands of works a sweep), each set before use or
    # read only where this walk wrote it (its first `record` latencies)
    d_claim, d_res = backend.kept_buffer("l2s_claim", 4), backend.kept_buffer("l2s_result", 8)
    d_lat = backend.kept_buffer("l2s_latency", latency.nbytes)
    backend._set_shared(fn, dynamic_bytes=shared, carveout_pct=100)
    for _ in range(GRID_TRIES):
        drv.memset_d32(d_claim, 0, 1)
        drv.memset_d32(d_res, 0xFFFFFFFF, 2)
        start = np.uint32(work.final_index())
        fn.prepared_call(
            (blocks, 1), (1, 1, 1), region, start, np.uint32(warmup), np.uint32(record),
            np.uint32(sm), d_claim, d_lat, d_res, shared_size=shared,
        )  # fmt: skip
        backend.context.synchronize()
        drv.memcpy_dtoh(result, d_res)
        if result[0] != 0xFFFFFFFF:
            break
        blocks *= 4
    else:
        return latency[:record], -1
    drv.memcpy_dtoh(latency, d_lat)
    if int(result[1]) != work.final_index():
        raise DeviceUnavailable(
            f"the walk on SM {sm} ended on element {int(result[1])}, not "
            f"{work.final_index()} as the host's walk of the same chain does"
        )
    return latency[:record], int(result[0])


@handles("cuda", L2SliceWork)
def run_l2_slices(backend: CudaBackend, work: L2SliceWork, **_: object) -> L2SliceResult:
    region, flush = _layout(backend, work)
    fn = backend.function(KERNEL, "l2_slice_chase", "PIIIIPPP")
    flush_fn = backend.function(KERNEL, "l2_slice_flush", "PQP")
    record = work.passes * work.lines
    shared = _block_shared_bytes(backend, 4 * (record + 1))
    sink = backend.kept_buffer("l2s_sink", 8)
    flush_fn.prepared_call(
        (FLUSH_BLOCKS, 1), (FLUSH_THREADS, 1, 1), flush, np.uint64(work.flush_bytes // 8), sink
    )
    backend.context.synchronize()
    _, helper = _walk(
        backend, fn, region, work, sm=work.helper_sm, warmup=work.lines, record=0, shared=shared
    )
    cycles, sm = np.zeros(0, np.uint32), -1
    if helper >= 0:
        cycles, sm = _walk(
            backend, fn, region, work, sm=work.target_sm, warmup=0, record=record, shared=shared
        )
    clock = backend.clocks()["sm_clock_mhz"]
    return L2SliceResult(
        cycles=cycles,
        sm=sm,
        helper_sm=helper,
        sm_clock_mhz=float(clock) if clock is not None else float("nan"),
    )


def _events(backend: CudaBackend, n: int) -> list[tuple]:
    """`n` pairs of events, kept on the backend for the sweep's later contention works (a
    sweep times some 55000 launches: events made anew for each cost more host time than their
    launches). A pair is recorded again only after the work that last used it has read it."""
    pool = getattr(backend, "_l2_contention_events", None)
    if pool is None:
        pool = backend._l2_contention_events = []
    while len(pool) < n:
        pool.append((backend.drv.Event(), backend.drv.Event()))
    return pool[:n]


@handles("cuda", L2ContentionWork)
def run_l2_contention(
    backend: CudaBackend, work: L2ContentionWork, **_: object
) -> L2ContentionResult:
    drv = backend.drv
    region, _ = _region(backend, work.region_bytes, work.flush_bytes)
    fn = backend.function(KERNEL, "l2_slice_hammer", "PQQII")
    sms = backend.device.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)
    grid, block = (work.grid_blocks or 2 * sms, 1), (32 * CONTENTION_WARPS, 1, 1)
    reference, iterations = np.uint64(work.reference_bytes), np.uint32(work.iterations)

    def launch(partner: int) -> None:
        # addend 0: the chain in the region stays as the walks need it
        fn.prepared_call(
            grid, block, region, reference, np.uint64(partner), iterations, np.uint32(0)
        )

    launch(work.reference_bytes)  # the first launch loads the module's code: not timed
    events = _events(backend, work.partners_bytes.size)
    for (start, end), partner in zip(events, work.partners_bytes, strict=True):
        start.record()
        launch(int(partner))
        end.record()
    events[-1][1].synchronize()
    elapsed = np.array([end.time_since(start) * 1e6 for start, end in events], dtype=np.float64)
    clock = backend.clocks()["sm_clock_mhz"]
    return L2ContentionResult(
        elapsed_ns=elapsed, sm_clock_mhz=float(clock) if clock is not None else float("nan")
    )
