"""Cuda handlers of the outstanding-request families (Lashgar et al.): Listing 1 launches
(`kernels/requests.cu`) and the L2 flush copy (`kernels/l2flush.cu`). pycuda is imported
through the backend (which imports it lazily); nothing here runs without a GPU."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..contract.backend import handles
from ..exceptions import GpuDissectError
from ..experiments.l2_flush import ELEMENT_BYTES, CopyResult, CopyWork
from ..experiments.requests import RequestsResult, RequestsWork

MAX_SMID = 1024  # kernels/requests.cu: size of the per-SM slot counters
SPIN_CYCLES = 1 << 24  # how long a gathered block waits for the others (~10 ms at 1.7 GHz)


class _Buffers:
    """Device (and pinned host) buffers kept across points of one sweep, grown on demand."""

    def __init__(self, drv) -> None:
        self.drv = drv
        self.device: dict[str, Any] = {}
        self.host: dict[str, np.ndarray] = {}

    def get(self, name: str, nbytes: int):
        buf = self.device.get(name)
        if buf is None or buf[1] < nbytes:
            if buf is not None:
                buf[0].free()
            self.device[name] = (self.drv.mem_alloc(max(nbytes, 4)), max(nbytes, 4))
        return self.device[name][0]

    def pinned(self, name: str, nbytes: int) -> np.ndarray:
        arr = self.host.get(name)
        if arr is None or arr.nbytes < nbytes:
            arr = self.drv.pagelocked_zeros(max(nbytes, 4), dtype=np.uint8)
            self.host[name] = arr
        return arr[:nbytes]


def _buffers(backend) -> _Buffers:
    buffers = getattr(backend, "_lashgar_buffers", None)
    if buffers is None:
        buffers = _Buffers(backend.drv)
        backend._lashgar_buffers = buffers  # freed with the context when the backend closes
    return buffers


def _sm_clock(backend) -> float:
    # a reading at most CLOCK_MAX_AGE_S old: one NVML query per launch configuration cost as
    # much as the launches of the smallest ones
    sm = backend.sm_clock()
    return float(sm) if sm is not None else float("nan")


@handles("cuda", RequestsWork)
def run_requests(backend, work: RequestsWork, *, seed: int = 0) -> RequestsResult:
    """One launch configuration: the data array comes from the host right before (so its lines
    sit in the L2, as in the paper), then `warmup_launches` untimed and `runs` timed launches of
    one block; every thread's t2 - t1 is read back, all runs in one copy after the last (each
    timed launch writes its own row of the device buffer; the untimed ones write the first
    row, which the first timed launch, after them on the stream, overwrites)."""
    if work.blocks > 1:
        return _run_requests_sm(backend, work)
    drv = backend.drv
    n, threads = work.loads_per_thread, work.threads
    fn = backend.function("requests", f"req_{work.path}_n{n}", "PPIPP")
    buffers = _buffers(backend)
    data_bytes = int(work.offsets_bytes.max()) + 4
    data = buffers.get("data", data_bytes)
    offsets = buffers.get("offsets", work.offsets_bytes.nbytes)
    sink = buffers.get("sink", 2 * threads * 4)
    row_bytes = threads * 4
    elapsed = buffers.get("elapsed", work.runs * row_bytes)
    drv.memcpy_htod(offsets, np.ascontiguousarray(work.offsets_bytes.T))  # [j * threads + t]
    drv.memcpy_htod(data, buffers.pinned("data", data_bytes))
    out = np.empty((work.runs, threads), dtype=np.uint32)
    # the arguments every launch of the configuration passes alike, made once
    grid, block, first_row, count = (1, 1), (threads, 1, 1), int(elapsed), np.uint32(threads)
    for r in range(-work.warmup_launches, work.runs):
        # launches on one stream run in order; the host no longer waits for a copy of each
        row = first_row + max(r, 0) * row_bytes
        fn.prepared_call(grid, block, data, offsets, count, sink, row)
    drv.memcpy_dtoh(out, elapsed)  # waits for the last launch
    backend.context.synchronize()
    return RequestsResult(elapsed_cycles=out, sm_clock_mhz=_sm_clock(backend))


def _run_requests_sm(backend, work: RequestsWork) -> RequestsResult:
    """Several co-resident blocks on one SM (`req_<path>_sm_n<N>`): SM count x blocks blocks are
    launched; the first `blocks` of the target SM time their loads, the others exit. A launch
    whose target SM received fewer blocks is repeated with the SM that received the most as
    target (a few tries); each thread's time is its block's t2 minus the earliest t1."""
    drv = backend.drv
    n, threads, blocks, per_block = (
        work.loads_per_thread, work.threads, work.blocks, work.block_threads
    )  # fmt: skip
    fn = backend.function("requests", f"req_{work.path}_sm_n{n}", "PPIIIQPPPP")
    buffers = _buffers(backend)
    data_bytes = int(work.offsets_bytes.max()) + 4
    data = buffers.get("data", data_bytes)
    offsets = buffers.get("offsets", work.offsets_bytes.nbytes)
    sink = buffers.get("sink", 2 * threads * 4)
    arrived = buffers.get("arrived", MAX_SMID * 4)
    gathered = buffers.get("gathered", 4)
    clocks = buffers.get("block_clocks", 2 * blocks * 8)
    drv.memcpy_htod(offsets, np.ascontiguousarray(work.offsets_bytes.T))  # [j * threads + t]
    drv.memcpy_htod(data, buffers.pinned("data", data_bytes))
    # the SM count straight from the driver attribute (backend.facts() also asks NVML)
    sms = backend.device.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)
    grid = int(sms) * blocks
    counts = np.zeros(MAX_SMID, dtype=np.uint32)
    got = np.zeros(1, dtype=np.uint32)
    stamps = np.zeros(2 * blocks, dtype=np.uint64)
    block_of = np.arange(threads) // per_block
    out = np.empty((work.runs, threads), dtype=np.uint32)
    target = getattr(backend, "_requests_target_sm", 0)
    # the arguments every launch of the configuration passes alike, made once
    shape = ((grid, 1), (per_block, 1, 1))
    fixed = (data, offsets, np.uint32(threads), np.uint32(blocks))
    spin = np.uint64(SPIN_CYCLES)
    for r in range(-work.warmup_launches, work.runs):
        for _ in range(8):
            drv.memset_d32(arrived, 0, MAX_SMID)
            drv.memset_d32(gathered, 0, 1)
            fn.prepared_call(
                *shape, *fixed, np.uint32(target), spin, arrived, gathered, sink, clocks
            )
            drv.memcpy_dtoh(got, gathered)
            if got[0] == blocks:
                break
            drv.memcpy_dtoh(counts, arrived)
            target = int(np.argmax(counts))
        else:
            raise GpuDissectError(
                f"requests: no SM held {blocks} co-resident blocks of {per_block} threads "
                f"(blocks received per SM: {sorted(set(counts[counts > 0].tolist()))}); the "
                "kernel needs them resident together (registers, shared memory)"
            )
        backend._requests_target_sm = target
        if r >= 0:
            drv.memcpy_dtoh(stamps, clocks)
            t1, t2 = stamps[0::2], stamps[1::2]
            out[r] = (t2[block_of] - t1.min()).astype(np.uint32)
    backend.context.synchronize()
    return RequestsResult(elapsed_cycles=out, sm_clock_mhz=_sm_clock(backend))


@handles("cuda", CopyWork)
def run_copy(backend, work: CopyWork, *, seed: int = 0) -> CopyResult:
    """Lashgar Sec. 3.3: host-to-device copy of the source, optionally a host-to-device copy of
    `flush_bytes` to another buffer, then the copy kernel timed with CUDA events."""
    drv = backend.drv
    fn = backend.function("l2flush", "l2_copy", "PPQ")
    buffers = _buffers(backend)
    src = buffers.get("copy_src", work.size_bytes)
    dst = buffers.get("copy_dst", work.size_bytes)
    drv.memcpy_htod(src, buffers.pinned("copy_src", work.size_bytes))
    if work.flushed:
        flush = buffers.get("flush", work.flush_bytes)
        drv.memcpy_htod(flush, buffers.pinned("flush", work.flush_bytes))
    elements = work.size_bytes // ELEMENT_BYTES
    blocks = -(-elements // work.threads_per_block)
    start, end = drv.Event(), drv.Event()
    start.record()
    fn.prepared_call((blocks, 1), (work.threads_per_block, 1, 1), src, dst, np.uint64(elements))
    end.record()
    end.synchronize()
    return CopyResult(elapsed_ms=np.array([start.time_till(end)]), sm_clock_mhz=_sm_clock(backend))
