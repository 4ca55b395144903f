"""CUDA handler of the bandwidth family (kernels/bandwidth.cu): one buffer per launch
configuration, one untimed launch, then the timed ones (CUDA events on the default stream)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..contract.backend import handles
from ..experiments.bandwidth import VECTOR_BYTES, StreamWork
from ..experiments.global_throughput import CopyTimings
from .throughput_cuda import _clocks, _time_launches

if TYPE_CHECKING:
    from .cuda import CudaBackend

KERNEL = "bandwidth"
MAGIC = 0x9E3779B9  # the read kernels store their accumulator only if it equals this
WRITE_VALUE = 0x5BD1E995


@handles("cuda", StreamWork)
def run_stream(backend: CudaBackend, work: StreamWork, **_: object) -> CopyTimings:
    drv = backend.drv
    if work.direction == "read":
        name = f"bw_read_{work.path}" + ("_sm" if work.by_sm else "")
        fn = backend.function(KERNEL, name, "PQIIIP")
    else:
        fn = backend.function(KERNEL, "bw_write", "PQII")
    if backend.supports_carveout and work.carveout_pct is not None:
        fn.set_attribute(drv.function_attribute.PREFERRED_SHARED_MEMORY_CARVEOUT, work.carveout_pct)
    slice_vecs = np.uint64(work.slice_bytes // VECTOR_BYTES)
    buf = drv.mem_alloc(work.footprint_bytes)
    sink = None
    try:
        drv.memset_d8(buf, 1, work.footprint_bytes)
        grid, block = (work.ctas, 1), (work.threads_per_cta, 1, 1)
        if work.direction == "read":
            sink = drv.mem_alloc(work.ctas * work.threads_per_cta * 4)
            nslices = np.uint32(work.slices or work.ctas)
            args = (buf, slice_vecs, nslices, np.uint32(work.iterations), np.uint32(MAGIC), sink)
        else:
            args = (buf, slice_vecs, np.uint32(work.iterations), np.uint32(WRITE_VALUE))
        elapsed = _time_launches(
            backend, lambda: fn.prepared_call(grid, block, *args), work.repetitions
        )
    finally:
        buf.free()
        if sink is not None:
            sink.free()
    sm, mem = _clocks(backend)
    return CopyTimings(elapsed_ns=elapsed, sm_clock_mhz=sm, memory_clock_mhz=mem)
