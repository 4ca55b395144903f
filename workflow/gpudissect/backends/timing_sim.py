"""Sim handlers of the timing-overhead family. The clock kinds read the profile's `timing`
block plus the timing noise; the amortized chases walk their addresses through the hierarchy
(`SimGPU.load_sequence`, the same latencies a timed window reads) and each load reads what the
chase's timing code leaves of it (`TimingSpec.amortized_cycles`); the window's store and clock
read at the end come once per chain."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..contract.backend import handles
from ..experiments.timing_overhead import AmortizedChaseWork, ClockWindowWork, TimedCycles
from .seeding import point_seed

if TYPE_CHECKING:
    from .sim import SimBackend


@handles("sim", ClockWindowWork)
def run_clock_window(backend: SimBackend, work: ClockWindowWork, *, seed: int = 0) -> TimedCycles:
    from ..sim.noise import Noise

    timing = backend.profile.timing
    base = timing.clock_read_cycles if work.kind == "clock_pair" else timing.empty_window
    noise = Noise(backend.profile.noise, seed=point_seed(backend.seed, seed))
    cycles = np.maximum(base + noise.sample(work.record_steps), 0)
    return TimedCycles(
        cycles=cycles.astype(np.uint32),
        final_index=0,
        sm_clock_mhz=float(backend.profile.clocks.sm_mhz),
    )


@handles("sim", AmortizedChaseWork)
def run_amortized_chase(
    backend: SimBackend, work: AmortizedChaseWork, *, seed: int = 0
) -> TimedCycles:
    from ..sim.engine import SimGPU

    gpu = SimGPU(backend.profile, seed=point_seed(backend.seed, seed))
    timed = work.loads * work.repetitions
    positions = work.walk(work.warmup_steps + timed + 1)
    addresses = positions[:-1] * work.element_bytes
    latency = gpu.load_sequence(work.path, addresses)[work.warmup_steps :]
    timing = backend.profile.timing
    less = timing.amortized_cycles(element_bytes=work.element_bytes, path=work.path)
    per_load = np.maximum(latency - less, 0)
    chains = per_load.reshape(work.repetitions, work.loads).sum(axis=1)
    return TimedCycles(
        cycles=(chains + timing.window_overhead(work.path)).astype(np.uint32),
        final_index=int(positions[-1]),
        sm_clock_mhz=float(backend.profile.clocks.sm_mhz),
    )
