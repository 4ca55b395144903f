"""Cuda handler of the multi-thread P-chase (`experiments.multichase`, `kernels/multichase.cu`):
one launch of one block runs the whole script. pycuda comes through the backend (imported
lazily); nothing here runs without a GPU."""

from __future__ import annotations

import numpy as np

from ..contract.backend import handles
from ..experiments.multichase import MultiChaseResult, MultiChaseWork

PATH_CODES = {"ca": 0, "cg": 1, "nc": 2, "tex": 3, "const": 4}
NO_RECORD = 0xFFFFFFFF


def kernel_tables(work: MultiChaseWork) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's `walkers` (thread, path code, start) and `script` (walker, steps, record
    offset or NO_RECORD) tables, uint32, row by row."""
    walkers = np.array(
        [(w.thread, PATH_CODES[w.path], w.start_index) for w in work.walkers], dtype=np.uint32
    ).reshape(-1, 3)
    rows, offset = [], 0
    for s in work.script:
        rows.append((s.walker, s.steps, offset if s.record else NO_RECORD))
        offset += s.steps if s.record else 0
    return walkers, np.array(rows, dtype=np.uint32).reshape(-1, 3)


@handles("cuda", MultiChaseWork)
def run_multichase(
    backend, work: MultiChaseWork, *, carveout_pct: int | None = None, seed: int = 0
) -> MultiChaseResult:
    drv = backend.drv
    fn = backend.function("multichase", "multichase", "PQPIPIIPP")
    walkers, script = kernel_tables(work)
    n = work.record_steps
    buf = backend._device_buffer(max(work.array.nbytes, 4))
    drv.memcpy_htod(buf, work.array)
    if work.const_array is not None:
        ptr, _ = backend._modules["multichase"].get_global("c_chain")
        drv.memcpy_htod(ptr, work.const_array)
    tex = None
    if any(w.path == "tex" for w in work.walkers):
        tex = backend._texture_object(buf, work.array.nbytes)
    d_walkers, d_script = drv.to_device(walkers), drv.to_device(script)
    d_lat, d_idx = drv.mem_alloc(max(4 * n, 4)), drv.mem_alloc(max(4 * n, 4))
    latency = np.zeros(n, dtype=np.uint32)
    indices = np.zeros(n, dtype=np.uint32)
    try:
        backend._set_shared(fn, dynamic_bytes=work.shared_buffer_bytes, carveout_pct=carveout_pct)
        fn.prepared_call(
            (1, 1),
            (work.block_threads, 1, 1),
            buf,
            np.uint64(int(tex) if tex is not None else 0),
            d_walkers,
            np.uint32(len(work.walkers)),
            d_script,
            np.uint32(len(work.script)),
            np.uint32(n),
            d_lat,
            d_idx,
            shared_size=work.shared_buffer_bytes,
        )
        backend.context.synchronize()
        drv.memcpy_dtoh(latency, d_lat)
        drv.memcpy_dtoh(indices, d_idx)
    finally:
        for d in (d_walkers, d_script, d_lat, d_idx):
            d.free()
        if tex is not None:
            from cuda.bindings import driver as cu

            cu.cuTexObjectDestroy(tex)
    sm = backend.clocks().get("sm_clock_mhz")
    return MultiChaseResult(
        latency_cycles=latency,
        indices=indices,
        sm_clock_mhz=float(sm) if sm is not None else float("nan"),
    )
