"""CUDA handlers of the timing-overhead family (kernels/clock_overhead.cu). pycuda is imported
lazily, by the backend; the handlers only use its context and prepared functions."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..contract.backend import handles
from ..exceptions import DeviceUnavailable
from ..experiments.timing_overhead import AmortizedChaseWork, ClockWindowWork, TimedCycles

if TYPE_CHECKING:
    from .cuda import CudaBackend

KERNEL = "clock_overhead"
AMORTIZED_PATHS = ("ca", "cg", "nc", "tex")
INDEX_ONLY_PATHS = ("tex",)  # a texture fetch takes an index: no pointer chase


def _sm_clock(backend: CudaBackend) -> float:
    sm = backend.clocks()["sm_clock_mhz"]
    return float(sm) if sm is not None else float("nan")


def _launch_one_thread(backend: CudaBackend, fn, args, outputs, *, shared, carveout_pct) -> None:
    """Run `fn(*args, *device outputs)` on one thread of one block with `shared` bytes of dynamic
    shared memory, then copy each device output back into its host array (`outputs`, in the
    kernel's argument order) and free it."""
    drv = backend.drv
    device = [drv.mem_alloc(max(host.nbytes, 4)) for host in outputs]
    try:
        backend._set_shared(fn, dynamic_bytes=shared, carveout_pct=carveout_pct)
        fn.prepared_call((1, 1), (1, 1, 1), *args, *device, shared_size=shared)
        backend.context.synchronize()
        for host, d in zip(outputs, device, strict=True):
            drv.memcpy_dtoh(host, d)
    finally:
        for d in device:
            d.free()


@handles("cuda", ClockWindowWork)
def run_clock_window(backend: CudaBackend, work: ClockWindowWork, **_: object) -> TimedCycles:
    cycles = np.zeros(work.record_steps, dtype=np.uint32)
    indices = np.zeros(work.record_steps, dtype=np.uint32)
    if work.kind == "clock_pair":
        fn = backend.function(KERNEL, "clock_pair", "IP")
        args, outputs, shared = (np.uint32(work.record_steps),), [cycles], 4 * work.record_steps
    else:
        fn = backend.function(KERNEL, "empty_window", "IIPP")
        args = (np.uint32(work.record_steps), np.uint32(1))
        outputs, shared = [cycles, indices], 8 * work.record_steps
    _launch_one_thread(backend, fn, args, outputs, shared=shared, carveout_pct=None)
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
    if work.path in INDEX_ONLY_PATHS and work.element_bytes != 4:
        raise DeviceUnavailable(
            f"the {work.path} path has only the 32-bit index chase (a texture fetch takes an "
            f"index), not {work.element_bytes}-byte elements"
        )
    drv = backend.drv
    nbytes = len(work.next_element) * work.element_bytes
    buf = backend._device_buffer(nbytes)  # the chase array's memory, as pchase uses it
    drv.memcpy_htod(buf, _chain_array(work, int(buf)))
    cycles = np.zeros(work.repetitions, dtype=np.uint32)
    final = np.zeros(1, dtype=np.uint32)
    steps = (np.uint32(work.warmup_steps), np.uint32(work.loads), np.uint32(work.repetitions))
    tex = None
    try:
        if work.path == "tex":  # the chain through a texture object, as pchase_tex reads it
            tex = backend._texture_object(buf, nbytes)
            fn = backend.function(KERNEL, "amortized_index_tex", "QIIIIPP")
            args = (np.uint64(int(tex)), np.uint32(work.start_element), *steps)
            shared = 4 * work.repetitions + 4
        elif work.element_bytes == 4:
            fn = backend.function(KERNEL, f"amortized_index_{work.path}", "PIIIIPP")
            args = (buf, np.uint32(work.start_element), *steps)
            shared = 4 * work.repetitions + 4
        else:
            fn = backend.function(KERNEL, f"amortized_pointer_{work.path}", "PPIIIPP")
            args = (buf, int(buf) + 8 * work.start_element, *steps)
            shared = 8 * work.repetitions + 8
        _launch_one_thread(
            backend, fn, args, [cycles, final], shared=shared, carveout_pct=work.carveout_pct
        )
    finally:
        if tex is not None:
            from cuda.bindings import driver as cu

            cu.cuTexObjectDestroy(tex)
    expected = int(work.walk(work.warmup_steps + work.loads * work.repetitions + 1)[-1])
    if int(final[0]) != expected:
        raise DeviceUnavailable(
            f"the {work.kind} chase ended on element {int(final[0])}, not {expected} as the "
            "host's walk of the same chain does"
        )
    return TimedCycles(cycles=cycles, final_index=int(final[0]), sm_clock_mhz=_sm_clock(backend))
