"""CUDA handlers of the timing-overhead family (kernels/clock_overhead.cu). pycuda is imported
lazily, by the backend; the handlers only use its context and prepared functions."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..exceptions import DeviceUnavailable
from ..experiments.timing_overhead import AmortizedChaseWork, ClockWindowWork, TimedCycles
from .base import handles

if TYPE_CHECKING:
    from .cuda import CudaBackend

KERNEL = "clock_overhead"
AMORTIZED_PATHS = ("ca", "cg")


def _sm_clock(backend: CudaBackend) -> float:
    sm = backend.clocks()["sm_clock_mhz"]
    return float(sm) if sm is not None else float("nan")


@handles("cuda", ClockWindowWork)
def run_clock_window(backend: CudaBackend, work: ClockWindowWork, **_: object) -> TimedCycles:
    drv = backend.drv
    cycles = np.zeros(work.record_steps, dtype=np.uint32)
    indices = np.zeros(work.record_steps, dtype=np.uint32)
    d_cycles = drv.mem_alloc(cycles.nbytes)
    d_indices = drv.mem_alloc(indices.nbytes)
    try:
        if work.kind == "clock_pair":
            fn = backend.function(KERNEL, "clock_pair", "IP")
            args, shared = (np.uint32(work.record_steps), d_cycles), 4 * work.record_steps
        else:
            fn = backend.function(KERNEL, "empty_window", "IIPP")
            args = (np.uint32(work.record_steps), np.uint32(1), d_cycles, d_indices)
            shared = 8 * work.record_steps
        backend._set_shared(fn, dynamic_bytes=shared, carveout_pct=None)
        fn.prepared_call((1, 1), (1, 1, 1), *args, shared_size=shared)
        backend.context.synchronize()
        drv.memcpy_dtoh(cycles, d_cycles)
        drv.memcpy_dtoh(indices, d_indices)
    finally:
        d_cycles.free()
        d_indices.free()
    if work.kind == "empty_window" and not np.array_equal(
        indices, np.arange(1, work.record_steps + 1, dtype=np.uint32)
    ):
        raise DeviceUnavailable("the empty window stored other values than it was given")
    return TimedCycles(cycles=cycles, final_index=0, sm_clock_mhz=_sm_clock(backend))


def _chain_array(work: AmortizedChaseWork, base_address: int) -> np.ndarray:
    """The array's contents: the next element's index (4-byte elements) or address (8-byte)."""
    if work.element_bytes == 4:
        return np.ascontiguousarray(work.next_element, dtype=np.uint32)
    return np.ascontiguousarray(
        np.uint64(base_address) + work.next_element.astype(np.uint64) * np.uint64(8)
    )


@handles("cuda", AmortizedChaseWork)
def run_amortized_chase(backend: CudaBackend, work: AmortizedChaseWork, **_: object) -> TimedCycles:
    if work.path not in AMORTIZED_PATHS:
        raise DeviceUnavailable(
            f"the amortized chases run on {list(AMORTIZED_PATHS)}, not {work.path!r}"
        )
    drv = backend.drv
    nbytes = len(work.next_element) * work.element_bytes
    buf = backend._device_buffer(nbytes)  # the chase array's memory, as pchase uses it
    drv.memcpy_htod(buf, _chain_array(work, int(buf)))
    cycles = np.zeros(work.repetitions, dtype=np.uint32)
    final = np.zeros(1, dtype=np.uint32)
    d_cycles = drv.mem_alloc(cycles.nbytes)
    d_final = drv.mem_alloc(final.nbytes)
    steps = (np.uint32(work.warmup_steps), np.uint32(work.loads), np.uint32(work.repetitions))
    try:
        if work.element_bytes == 4:
            fn = backend.function(KERNEL, f"amortized_index_{work.path}", "PIIIIPP")
            args = (buf, np.uint32(work.start_element), *steps, d_cycles, d_final)
            shared = 4 * work.repetitions + 4
        else:
            fn = backend.function(KERNEL, f"amortized_pointer_{work.path}", "PPIIIPP")
            start = int(buf) + 8 * work.start_element
            args = (buf, start, *steps, d_cycles, d_final)
            shared = 8 * work.repetitions + 8
        backend._set_shared(fn, dynamic_bytes=shared, carveout_pct=work.carveout_pct)
        fn.prepared_call((1, 1), (1, 1, 1), *args, shared_size=shared)
        backend.context.synchronize()
        drv.memcpy_dtoh(cycles, d_cycles)
        drv.memcpy_dtoh(final, d_final)
    finally:
        d_cycles.free()
        d_final.free()
    expected = int(work.walk(work.warmup_steps + work.loads * work.repetitions + 1)[-1])
    if int(final[0]) != expected:
        raise DeviceUnavailable(
            f"the {work.kind} chase ended on element {int(final[0])}, not {expected} as the "
            "host's walk of the same chain does"
        )
    return TimedCycles(cycles=cycles, final_index=int(final[0]), sm_clock_mhz=_sm_clock(backend))
