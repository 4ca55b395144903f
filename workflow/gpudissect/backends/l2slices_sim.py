"""Sim handler of the L2 slice map. The launch is simulated: a grid of one-thread blocks is
placed on the SMs round robin (block b on SM b mod sms), each block reads its SM id, and the
first block on the chosen SM walks; its loads go through the hierarchy as that SM's
(`SimGPU.load_sequence(sm=...)`: a profile's `l2_slices` block gives the L2 hit its slice's
latency from that SM). Each repetition starts on a cold simulated GPU: the flush's effect, so
the flush itself is not walked.

A contention launch is simulated as a queueing network per slice (the profile's `l2_slices`
block): the warps hammering lines of one slice are the customers of that slice's atomic unit,
a server busy `atomic_cycles` per warp-wide atomic, and each warp waits the L2's hit latency
between two of its atomics' visits (the delay station; exact mean-value analysis,
sim/throughput.py). The launch lasts as long as its slowest slice takes for its atomics, plus
the noise of the launch's accesses (the profile's jitter over one warp's atomics). A profile
without the block has an L2 of one slice: one atomic unit (of the default `atomic_cycles`)
serves every line."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..contract.backend import handles
from ..experiments.l2_slices import (
    CONTENTION_WARPS,
    L2ContentionResult,
    L2ContentionWork,
    L2SliceResult,
    L2SliceWork,
)
from ..sim.l2_slices import L2SliceSpec
from .seeding import point_seed

if TYPE_CHECKING:
    from .sim import SimBackend

PATH = "cg"


def block_sms(blocks: int, sms: int) -> np.ndarray:
    """The SM id each block of a grid reads (round-robin placement)."""
    return np.arange(blocks) % sms


def _claimed(sm: int, *, blocks: int, sms: int) -> int:
    """The SM id of the block that walks, -1 when no block runs on `sm`."""
    ids = block_sms(blocks, sms)
    hit = np.flatnonzero(ids == sm)
    return int(ids[hit[0]]) if hit.size else -1


@handles("sim", L2SliceWork)
def run_l2_slices(backend: SimBackend, work: L2SliceWork, *, seed: int = 0) -> L2SliceResult:
    from ..sim.engine import SimGPU

    profile = backend.profile
    blocks = work.grid_blocks or 2 * profile.sms
    mhz = float(profile.clocks.sm_mhz)
    helper = _claimed(work.helper_sm, blocks=blocks, sms=profile.sms)
    sm = _claimed(work.target_sm, blocks=blocks, sms=profile.sms)
    if helper < 0 or sm < 0:
        return L2SliceResult(np.zeros(0, np.uint32), sm, helper, mhz)
    gpu = SimGPU(profile, seed=point_seed(backend.seed, seed))
    gpu.load_sequence(PATH, work.offsets_bytes, sm=helper)
    addresses = np.tile(work.offsets_bytes, work.passes)
    cycles = gpu.load_sequence(PATH, addresses, sm=sm)
    return L2SliceResult(cycles.astype(np.uint32), sm, helper, mhz)


@handles("sim", L2ContentionWork)
def run_l2_contention(
    backend: SimBackend, work: L2ContentionWork, *, seed: int = 0
) -> L2ContentionResult:
    from ..sim.throughput import mva_throughput

    profile = backend.profile
    spec = profile.l2_slices  # None: an L2 of one slice, whose one atomic unit serves all
    blocks = work.grid_blocks or 2 * profile.sms
    per_line = blocks * (CONTENTION_WARPS // 2)  # warps on each of the two lines
    cache = spec.cache if spec is not None else "l2"
    delay = float(profile.caches[cache].hit_latency_cycles) if cache in profile.caches else 0.0
    service = float((spec or L2SliceSpec).atomic_cycles)
    # a slice's time for its warps' atomics: one slice serves both lines, or one line each
    both, own = (
        w * work.iterations / mva_throughput(w, service, delay) for w in (2 * per_line, per_line)
    )
    if spec is None:
        one = np.ones(work.partners_bytes.size, bool)
    else:
        reference = spec.slice_of(work.reference_bytes)
        one = np.array([spec.slice_of(int(p)) == reference for p in work.partners_bytes])
    cycles = np.where(one, both, own)
    rng = np.random.default_rng(point_seed(backend.seed, seed))
    mhz = float(profile.clocks.sm_mhz)
    cycles = cycles + rng.normal(
        0.0, profile.noise.jitter_cycles * np.sqrt(work.iterations), cycles.size
    )
    return L2ContentionResult(elapsed_ns=cycles * 1000.0 / mhz, sm_clock_mhz=mhz)
