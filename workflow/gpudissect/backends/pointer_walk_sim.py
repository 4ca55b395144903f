"""Sim handler of the pointer walk (`experiments.pointer_walk`): a launch starts from cold caches
(a fresh simulated GPU, as every sim launch) and walks the words' addresses through the
hierarchy of the `ca` path; the window's base is address 0 (a multiple of any window). First, as
the kernel's `link_words` does with its st.global.cg stores, the words are written into the
caches of the `cg` path (the L2), in order."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..contract.backend import handles
from ..experiments.pointer_walk import PointerWalkWork, WalkResult
from .seeding import point_seed

if TYPE_CHECKING:
    from .sim import SimBackend


@handles("sim", PointerWalkWork)
def run_pointer_walk(backend: SimBackend, work: PointerWalkWork, *, seed: int = 0) -> WalkResult:
    from ..sim.engine import SimGPU

    profile = backend.profile_for(work.carveout_pct, work.shared_buffer_bytes)
    gpu = SimGPU(profile, seed=point_seed(backend.seed, seed))
    if "cg" in profile.paths:
        for cache in profile.path_caches("cg"):
            gpu.fill(cache.name, work.offsets_bytes)
    latency = gpu.load_sequence("ca", work.offsets_bytes)
    return WalkResult(
        latency_cycles=latency[work.record_steps.astype(np.int64)].astype(np.uint32),
        sm_clock_mhz=float(backend.profile.clocks.sm_mhz),
    )
