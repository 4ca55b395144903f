"""Sim handler of the multi-thread P-chase (`experiments.multichase`): the script runs step by
step on one simulated SM, every load carrying its walker's warp (which picks the copy of a cache
with several instances per SM, sim/cache.py). Constant memory is its own address space: its
addresses start at `CONST_BASE_BYTES`, far from the global array's."""

from __future__ import annotations

import numpy as np

from ..contract.backend import handles
from ..experiments.multichase import CONST_PATH, MultiChaseResult, MultiChaseWork
from .seeding import point_seed

CONST_BASE_BYTES = 1 << 40
ELEMENT_BYTES = 4


@handles("sim", MultiChaseWork)
def run_multichase(backend, work: MultiChaseWork, *, seed: int = 0, **_) -> MultiChaseResult:
    from ..sim.engine import SimGPU

    gpu = SimGPU(backend.profile, seed=point_seed(backend.seed, seed))
    position = [w.start_index for w in work.walkers]
    latency, indices = [], []
    for step in work.script:
        if step.steps == 0:
            continue
        w = work.walkers[step.walker]
        lat, ind = gpu.chase(
            w.path,
            work.space(w),
            element_bytes=ELEMENT_BYTES,
            base_address_bytes=CONST_BASE_BYTES if w.path == CONST_PATH else 0,
            start_index=position[step.walker],
            warmup_steps=0,
            record_steps=step.steps,
            warp=w.warp,
        )
        position[step.walker] = int(ind[-1])
        if step.record:
            latency.append(lat)
            indices.append(ind)
    empty = np.zeros(0, dtype=np.uint32)
    return MultiChaseResult(
        latency_cycles=np.concatenate(latency) if latency else empty,
        indices=np.concatenate(indices) if indices else empty,
        sm_clock_mhz=float(backend.profile.clocks.sm_mhz),
    )
