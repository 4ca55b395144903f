"""Sim handlers of the bank-conflict family: the warp access goes through the profile's bank
mapping (sim/banks.py: degree counted from the threads' addresses), every load of the timed
chain gets the profile's timing noise."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..contract.backend import handles
from ..exceptions import DeviceUnavailable
from ..experiments.bank_conflicts import (
    SharedBankResult,
    SharedBankWork,
    SharedFacts,
    SharedFactsQuery,
)
from .seeding import point_seed

if TYPE_CHECKING:
    from .sim import SimBackend


@handles("sim", SharedFactsQuery)
def shared_facts(backend: SimBackend, query: SharedFactsQuery, **_: object) -> SharedFacts:
    shared = backend.profile.shared
    if shared is None:
        return SharedFacts(modes_bytes=(), size_bytes=0)
    return SharedFacts(modes_bytes=tuple(shared.modes_bytes), size_bytes=shared.size_bytes)


@handles("sim", SharedBankWork)
def run_bank_work(backend: SimBackend, work: SharedBankWork, *, seed: int = 0) -> SharedBankResult:
    from ..sim.banks import warp_access
    from ..sim.noise import Noise

    shared = backend.profile.shared
    if shared is None:
        raise DeviceUnavailable(f"profile {backend.profile.name} has no shared block")
    addresses = work.start_indices() * work.element_bytes
    latency, _ = warp_access(
        shared,
        addresses,
        bank_width_bytes=work.bank_mode_bytes,
        element_bytes=work.element_bytes,
    )
    noise = Noise(backend.profile.noise, seed=point_seed(backend.seed, seed))
    # one untimed pass, as the kernel makes, then the timed ones
    noise.sample(work.loads)
    elapsed = np.array(
        [
            int(np.maximum(latency + noise.sample(work.loads), 0).sum())
            for _ in range(work.repetitions)
        ],
        dtype=np.uint32,
    )
    return SharedBankResult(
        elapsed_cycles=elapsed,
        final_indices=work.start_indices().astype(np.uint32),
        sm_clock_mhz=float(backend.profile.clocks.sm_mhz),
    )
