"""Sparse P-chases (`tlbs`, `latency_patterns`): walks over given element positions of an array
that is mostly never touched, and cold chases, which start with cold TLBs and caches so that
first touches are timed (the `tlbs` window stage, `latency_patterns`).

On a GPU a cold chase's sparse array goes into freshly allocated memory whose values are written
from the host (through the copy engine, so no SM translates its pages), then a memset over
`flush_bytes` evicts the L2. The simulator starts every launch cold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..contract.backend import ChaseResult, ChaseWork, handles
from ..patterns import all_distinct


@dataclass(frozen=True)
class ColdChaseWork:
    """A P-chase that must start with cold TLBs and caches (first touches are timed)."""

    chase: ChaseWork
    flush_bytes: int


@handles("sim", ColdChaseWork)
def _run_cold_sim(backend, work: ColdChaseWork, *, carveout_pct=None, seed: int = 0):
    # every simulated launch starts from a cold GPU
    return backend.run_chase(work.chase, carveout_pct=carveout_pct, seed=seed)


@handles("cuda", ColdChaseWork)
def _run_cold_cuda(backend, work: ColdChaseWork, *, carveout_pct=None, seed: int = 0):
    """Write the chain into fresh memory from the host, flush the L2 with a memset over
    `flush_bytes`, then chase."""
    drv, w = backend.drv, work.chase
    backend.chase_function(w)  # raises for a path without a cold chase (tex, const)
    flush = drv.mem_alloc(work.flush_bytes) if work.flush_bytes else None
    try:
        chain = backend._upload_chain(w, fresh=True)  # pages no TLB has seen
        if flush is not None:
            drv.memset_d32(flush, 0, work.flush_bytes // 4)
            backend.context.synchronize()
        latency, indices = backend.launch_chase(w, chain, carveout_pct=carveout_pct)
    finally:
        if flush is not None:
            flush.free()
    sm = backend.clocks().get("sm_clock_mhz")
    return ChaseResult(latency, indices, float(sm) if sm is not None else float("nan"))


def sequence_work(
    path: str,
    sequence: np.ndarray,
    *,
    warmup_steps: int,
    record_steps: int,
    element_bytes: int = 4,
) -> ChaseWork:
    """A sparse chase visiting the element positions `sequence` (in elements of
    `element_bytes`) in order, then `sequence[0]` again (a cycle): visit t loads
    `sequence[t % len(sequence)]`."""
    seq = np.asarray(sequence, dtype=np.int64)
    if not all_distinct(seq):
        raise ValueError("a chase sequence visits each element once per cycle")
    nxt = np.roll(seq, -1).astype(np.uint32 if element_bytes == 4 else np.uint64)
    buffer = max(1024, -(-8 * record_steps // 1024) * 1024)
    return ChaseWork(
        path=path,
        chain=None,
        start_index=int(seq[0]),
        warmup_steps=warmup_steps,
        record_steps=record_steps,
        shared_buffer_bytes=buffer,
        element_bytes=element_bytes,
        array_elements=int(seq.max()) + 1,
        sparse_positions=seq,
        sparse_next=nxt,
    )
