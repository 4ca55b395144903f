"""CUDA handlers of the throughput families (kernels/copy.cu). pycuda is imported lazily by the
backend; these handlers use its context, prepared functions and events."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..contract.backend import handles
from ..experiments.global_throughput import CopyTimings, DeviceCopyWork, GlobalCopyWork
from ..experiments.shared_throughput import (
    SharedCopyResult,
    SharedCopyWork,
    ThroughputFacts,
    ThroughputFactsQuery,
)

if TYPE_CHECKING:
    from .cuda import CudaBackend

KERNEL = "copy"
DEFAULT_BLOCK_SHARED_BYTES = 48 * 1024
DDR_FACTOR = 2  # cudaDeviceProp.memoryClockRate is the clock; data move on both edges


def shared_peak_bytes_per_cycle(compute_capability: tuple[int, int]) -> float:
    """Theoretical shared bandwidth of one SM (CUDA C Programming Guide, shared memory of each
    compute capability): 2.x - 32 banks x 32 bits per two cycles = 64 B (TPDS Table VII: 2 B per
    bank per cycle); 3.x - 32 banks x 64 bits per cycle = 256 B; 5.x on - 32 banks x 32 bits
    per cycle = 128 B."""
    major = compute_capability[0]
    return 64.0 if major == 2 else 256.0 if major == 3 else 128.0


def _attr(backend: CudaBackend, name: str, default: int | None = None) -> int | None:
    a = backend.drv.device_attribute
    if not hasattr(a, name):
        return default
    return int(backend.device.get_attribute(getattr(a, name)))


@handles("cuda", ThroughputFactsQuery)
def throughput_facts(backend: CudaBackend, query: ThroughputFactsQuery, **_: object):
    per_sm = _attr(backend, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR")
    per_block = _attr(backend, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN") or _attr(
        backend, "MAX_SHARED_MEMORY_PER_BLOCK"
    )
    reserved = _attr(backend, "RESERVED_SHARED_MEMORY_PER_BLOCK")
    if reserved is None:
        reserved = max(0, (per_sm or 0) - (per_block or 0))
    memory_khz = _attr(backend, "MEMORY_CLOCK_RATE")
    bus_bits = _attr(backend, "GLOBAL_MEMORY_BUS_WIDTH")
    dram = DDR_FACTOR * memory_khz * 1e3 * bus_bits / 8 / 1e9 if memory_khz and bus_bits else None
    return ThroughputFacts(
        sms=_attr(backend, "MULTIPROCESSOR_COUNT"),
        max_threads_per_sm=_attr(backend, "MAX_THREADS_PER_MULTIPROCESSOR"),
        max_ctas_per_sm=_attr(backend, "MAX_BLOCKS_PER_MULTIPROCESSOR", 16),
        shared_bytes_per_sm=per_sm,
        shared_bytes_per_cta=per_block,
        shared_reserved_bytes_per_cta=reserved,
        shared_peak_bytes_per_cycle_per_sm=shared_peak_bytes_per_cycle(
            backend.device.compute_capability()
        ),
        dram_theoretical_gbps=dram,
        l2_bytes=_attr(backend, "L2_CACHE_SIZE", 0),
    )


def _clocks(backend: CudaBackend) -> tuple[float, float]:
    c = backend.clocks()
    sm, mem = c.get("sm_clock_mhz"), c.get("memory_clock_mhz")
    return (float(sm) if sm else float("nan"), float(mem) if mem else float("nan"))


@handles("cuda", SharedCopyWork)
def run_shared_copy(backend: CudaBackend, work: SharedCopyWork, **_: object) -> SharedCopyResult:
    drv = backend.drv
    fn = backend.function(KERNEL, f"scopy_v{work.vector_bytes}_ilp{work.ilp}", "IPPP")
    fa = drv.function_attribute
    shared = work.shared_bytes_per_cta
    if shared > DEFAULT_BLOCK_SHARED_BYTES:
        fn.set_attribute(fa.MAX_DYNAMIC_SHARED_SIZE_BYTES, shared)
    if backend.supports_carveout:
        fn.set_attribute(fa.PREFERRED_SHARED_MEMORY_CARVEOUT, 100)  # all of it to shared
    grid = _attr(backend, "MULTIPROCESSOR_COUNT") * work.ctas_per_sm
    start = np.zeros(grid, np.int64)
    end = np.zeros(grid, np.int64)
    smid = np.zeros(grid, np.uint32)
    d_start, d_end, d_smid = (drv.mem_alloc(x.nbytes) for x in (start, end, smid))
    rows: list[tuple[np.ndarray, ...]] = []
    try:
        for rep in range(work.repetitions + 1):  # the first launch is a warm-up
            fn.prepared_call(
                (grid, 1),
                (work.threads_per_cta, 1, 1),
                np.uint32(work.iterations),
                d_start,
                d_end,
                d_smid,
                shared_size=shared,
            )
            backend.context.synchronize()
            if rep == 0:
                continue
            for host, dev in ((start, d_start), (end, d_end), (smid, d_smid)):
                drv.memcpy_dtoh(host, dev)
            rows.append(
                (np.full(grid, rep - 1), np.arange(grid), smid.copy(), start.copy(), end.copy())
            )
    finally:
        for d in (d_start, d_end, d_smid):
            d.free()
    sm, _ = _clocks(backend)
    rep_, cta, sm_ids, t0, t1 = (np.concatenate(c) for c in zip(*rows, strict=True))
    return SharedCopyResult(
        repetition=rep_, cta=cta, smid=sm_ids, start_cycle=t0, end_cycle=t1, sm_clock_mhz=sm
    )


def _time_launches(backend: CudaBackend, launch, repetitions: int) -> np.ndarray:
    """Elapsed ns of each of `repetitions` launches (CUDA events), after one untimed launch."""
    drv = backend.drv
    begin, end = drv.Event(), drv.Event()
    out = []
    for rep in range(repetitions + 1):
        begin.record()
        launch()
        end.record()
        end.synchronize()
        if rep:
            out.append(end.time_since(begin) * 1e6)  # ms -> ns, once
    return np.asarray(out, dtype=np.float64)


def _buffers(backend: CudaBackend, nbytes: int):
    drv = backend.drv
    src = drv.mem_alloc(nbytes)
    try:
        dst = drv.mem_alloc(nbytes)
    except Exception:
        src.free()
        raise
    drv.memset_d8(src, 1, nbytes)
    return src, dst


@handles("cuda", GlobalCopyWork)
def run_global_copy(backend: CudaBackend, work: GlobalCopyWork, **_: object) -> CopyTimings:
    fn = backend.function(KERNEL, f"gcopy_e{work.element_bytes}_ilp{work.ilp}", "PPQ")
    n = np.uint64(work.copy_bytes // work.element_bytes)
    src, dst = _buffers(backend, work.copy_bytes)
    try:
        elapsed = _time_launches(
            backend,
            lambda: fn.prepared_call((work.ctas, 1), (work.threads_per_cta, 1, 1), src, dst, n),
            work.repetitions,
        )
    finally:
        src.free()
        dst.free()
    sm, mem = _clocks(backend)
    return CopyTimings(elapsed_ns=elapsed, sm_clock_mhz=sm, memory_clock_mhz=mem)


@handles("cuda", DeviceCopyWork)
def run_device_copy(backend: CudaBackend, work: DeviceCopyWork, **_: object) -> CopyTimings:
    drv = backend.drv
    src, dst = _buffers(backend, work.copy_bytes)
    try:
        elapsed = _time_launches(
            backend, lambda: drv.memcpy_dtod_async(dst, src, work.copy_bytes), work.repetitions
        )
    finally:
        src.free()
        dst.free()
    sm, mem = _clocks(backend)
    return CopyTimings(elapsed_ns=elapsed, sm_clock_mhz=sm, memory_clock_mhz=mem)
