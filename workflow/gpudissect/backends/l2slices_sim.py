"""Sim handler of the L2 slice map. The launch is simulated: a grid of one-thread blocks is
placed on the SMs round robin (block b on SM b mod sms), each block reads its SM id, and the
first block on the chosen SM walks; its loads go through the hierarchy as that SM's
(`SimGPU.load_sequence(sm=...)`: a profile's `l2_slices` block gives the L2 hit its slice's
latency from that SM). Each repetition starts on a cold simulated GPU: the flush's effect, so
the flush itself is not walked."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..experiments.l2_slices import L2SliceResult, L2SliceWork
from .base import handles
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
