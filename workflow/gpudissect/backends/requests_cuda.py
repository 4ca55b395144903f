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
    for r in range(-work.warmup_launches, work.runs):
        # launches on one stream run in order; the host no longer waits for a copy of each
        row = int(elapsed) + max(r, 0) * row_bytes
        fn.prepared_call((1, 1), (threads, 1, 1), data, offsets, np.uint32(threads), sink, row)
    drv.memcpy_dtoh(out, elapsed)  # waits for the last launch
    backend.context.synchronize()
    return RequestsResult(elapsed_cycles=out, sm_clock_mhz=_sm_clock(backend))


def _run_requests_sm(backend, work: RequestsWork) -> RequestsResult:
    """Several co-resident blocks on one SM (`req_<path>_sm_n<N>`): SM count x blocks blocks are
    launched; the first `blocks` of the target SM time their loads, the others exit. Each
    thread's time is its block's t2 minus the earliest t1.

    Every launch of the point (untimed and timed) goes out at once, each with its own slot of
    block clocks, gathered count and per-SM arrival counts (zeroed by one memset), and one copy
    brings back all clocks and gathered counts after the last. A launch whose target SM received
    fewer blocks is launched again (at most `TRIES` times in all) with the SM that received the
    most as target, or with the target an earlier retry found; the target found stays for the
    next point."""
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
    launches = work.warmup_launches + work.runs
    clock_bytes = 2 * blocks * 8  # t1, t2 of each block of one launch
    # one buffer: [clocks of every launch][gathered of every launch][arrived[MAX_SMID] of each]
    stamps_bytes = launches * (clock_bytes + 4)
    results = buffers.get("sm_results", stamps_bytes + launches * MAX_SMID * 4)
    clocks_at = int(results)
    gathered_at = clocks_at + launches * clock_bytes
    arrived_at = gathered_at + 4 * launches
    drv.memcpy_htod(offsets, np.ascontiguousarray(work.offsets_bytes.T))  # [j * threads + t]
    drv.memcpy_htod(data, buffers.pinned("data", data_bytes))
    # the SM count straight from the driver attribute (backend.facts() also asks NVML)
    sms = backend.device.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)
    grid = int(sms) * blocks
    target = getattr(backend, "_requests_target_sm", 0)

    def launch(i: int, target: int) -> None:
        fn.prepared_call(
            (grid, 1), (per_block, 1, 1), data, offsets, np.uint32(threads), np.uint32(blocks),
            np.uint32(target), np.uint64(SPIN_CYCLES), arrived_at + 4 * MAX_SMID * i,
            gathered_at + 4 * i, sink, clocks_at + clock_bytes * i,
        )  # fmt: skip

    drv.memset_d32(gathered_at, 0, launches * (1 + MAX_SMID))
    for i in range(launches):
        launch(i, target)
    host = buffers.pinned("sm_stamps", stamps_bytes)
    drv.memcpy_dtoh(host, results)  # waits for the last launch
    stamps = host[: launches * clock_bytes].view(np.uint64).reshape(launches, 2 * blocks).copy()
    got = host[launches * clock_bytes :].view(np.uint32).copy()
    batch_target = target
    for i in np.flatnonzero(got != blocks):
        target = _retry(backend, work, launch, int(i), batch_target, target, addresses=(
            clocks_at + clock_bytes * int(i), gathered_at + 4 * int(i),
            arrived_at + 4 * MAX_SMID * int(i),
        ), stamps=stamps)  # fmt: skip
    backend._requests_target_sm = target
    block_of = np.arange(threads) // per_block
    out = np.empty((work.runs, threads), dtype=np.uint32)
    for r in range(work.runs):
        t1, t2 = stamps[work.warmup_launches + r, 0::2], stamps[work.warmup_launches + r, 1::2]
        out[r] = (t2[block_of] - t1.min()).astype(np.uint32)
    backend.context.synchronize()
    return RequestsResult(elapsed_cycles=out, sm_clock_mhz=_sm_clock(backend))


TRIES = 8  # launches of one launch slot before the sweep gives up on gathering its blocks


def _retry(backend, work, launch, i, batch_target, target, *, addresses, stamps) -> int:
    """Launch slot `i` of a point again until its target SM gathers `work.blocks` blocks: first
    with the target an earlier retry found (when it differs from the batch's), else with the SM
    that received the most blocks in the last try. Its clocks go into `stamps[i]`; returns the
    target that gathered them."""
    drv = backend.drv
    clocks, gathered, arrived = addresses
    counts = np.zeros(MAX_SMID, dtype=np.uint32)
    got = np.zeros(1, dtype=np.uint32)
    for attempt in range(1, TRIES):
        if attempt > 1 or target == batch_target:
            drv.memcpy_dtoh(counts, arrived)
            target = int(np.argmax(counts))
        drv.memset_d32(gathered, 0, 1)
        drv.memset_d32(arrived, 0, MAX_SMID)
        launch(i, target)
        drv.memcpy_dtoh(got, gathered)
        if got[0] == work.blocks:
            drv.memcpy_dtoh(stamps[i], clocks)
            return target
    drv.memcpy_dtoh(counts, arrived)
    raise GpuDissectError(
        f"requests: no SM held {work.blocks} co-resident blocks of {work.block_threads} threads "
        f"(blocks received per SM: {sorted(set(counts[counts > 0].tolist()))}); the kernel "
        "needs them resident together (registers, shared memory)"
    )


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
