"""Sim handlers of the throughput families: launches go through the simulator's occupancy and
queueing model (sim/throughput.py); each timing gets one draw of the profile's timing noise.

The ceiling of the global copy (``DeviceCopyWork``) is, on the simulator, not an independent
measurement: the simulator has no copy engine, so it is what the same throughput model gives for
a large, fully occupied, vectorised copy (every SM full of 256-thread CTAs, ILP 8, 16-byte
elements, eight waves) - in effect ``dram_peak_gbps x dram_achievable_fraction``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..contract.backend import handles
from ..exceptions import DeviceUnavailable
from ..experiments.global_throughput import CopyTimings, DeviceCopyWork, GlobalCopyWork
from ..experiments.shared_throughput import (
    SharedCopyResult,
    SharedCopyWork,
    ThroughputFacts,
    ThroughputFactsQuery,
)
from .seeding import point_seed

if TYPE_CHECKING:
    from .sim import SimBackend

WARP_THREADS = 32
CEILING_THREADS, CEILING_ILP, CEILING_ELEMENT_BYTES, CEILING_WAVES = 256, 8, 16, 8


@handles("sim", ThroughputFactsQuery)
def throughput_facts(backend: SimBackend, query: ThroughputFactsQuery, **_: object):
    p = backend.profile
    t, s = p.throughput, p.shared
    peak = None
    if s is not None:
        peak = (t.shared_peak_bytes_per_cycle_per_sm if t else None) or s.peak_bytes_per_cycle
    l2 = p.caches.get("l2")
    return ThroughputFacts(
        sms=p.sms,
        max_threads_per_sm=p.max_warps_per_sm * WARP_THREADS,
        max_ctas_per_sm=t.max_ctas_per_sm if t else 8,
        shared_bytes_per_sm=s.size_bytes if s and t else None,
        shared_bytes_per_cta=s.size_bytes if s and t else None,
        shared_reserved_bytes_per_cta=p.carveout.block_reserved_bytes if p.carveout else 0,
        shared_peak_bytes_per_cycle_per_sm=float(peak) if peak and t else None,
        dram_theoretical_gbps=float(t.dram_peak_gbps) if t else None,
        l2_bytes=l2.size_bytes if l2 is not None else 0,
    )


def _noise(backend: SimBackend, seed: int, n: int) -> np.ndarray:
    from ..sim.noise import Noise

    return Noise(backend.profile.noise, seed=point_seed(backend.seed, seed)).sample(n)


def _need(backend: SimBackend, *blocks: str) -> None:
    for b in blocks:
        if getattr(backend.profile, b) is None:
            raise DeviceUnavailable(f"profile {backend.profile.name} has no {b} block")


@handles("sim", SharedCopyWork)
def run_shared_copy(backend: SimBackend, work: SharedCopyWork, *, seed: int = 0):
    from ..sim.throughput import shared_copy_throughput

    _need(backend, "shared", "throughput")
    p = backend.profile
    r = shared_copy_throughput(
        p.throughput,
        p.shared,
        ctas_per_sm=work.ctas_per_sm,
        threads_per_cta=work.threads_per_cta,
        ilp=work.ilp,
        max_warps_per_sm=p.max_warps_per_sm,
        sm_clock_mhz=p.clocks.sm_mhz,
        element_bytes=work.vector_bytes,
        shared_bytes_per_cta=work.shared_bytes_per_cta,
    )
    # one SM is simulated (every SM runs the same CTAs); its CTAs run together
    cycles = work.ctas_per_sm * work.bytes_per_cta / r.bytes_per_cycle
    n = work.ctas_per_sm * work.repetitions
    noise = _noise(backend, seed, n)
    return SharedCopyResult(
        repetition=np.repeat(np.arange(work.repetitions), work.ctas_per_sm),
        cta=np.tile(np.arange(work.ctas_per_sm), work.repetitions),
        smid=np.zeros(n, dtype=np.int32),
        start_cycle=np.zeros(n, dtype=np.int64),
        end_cycle=np.maximum(np.round(cycles) + noise, 1).astype(np.int64),
        sm_clock_mhz=float(p.clocks.sm_mhz),
    )


def _global_ns(backend: SimBackend, *, ctas, threads_per_cta, ilp, element_bytes, copy_bytes):
    from ..sim.throughput import global_copy_throughput

    p = backend.profile
    r = global_copy_throughput(
        p.throughput,
        ctas=ctas,
        threads_per_cta=threads_per_cta,
        ilp=ilp,
        sms=p.sms,
        max_warps_per_sm=p.max_warps_per_sm,
        sm_clock_mhz=p.clocks.sm_mhz,
        dram_latency_cycles=p.dram.latency_cycles,
        element_bytes=element_bytes,
    )
    return 2 * copy_bytes / r.throughput_gbps, r


def _timings(backend: SimBackend, ns: float, repetitions: int, seed: int) -> CopyTimings:
    p = backend.profile
    noise_ns = _noise(backend, seed, repetitions) * 1000.0 / p.clocks.sm_mhz
    return CopyTimings(
        elapsed_ns=np.maximum(ns + noise_ns, 1.0),
        sm_clock_mhz=float(p.clocks.sm_mhz),
        memory_clock_mhz=float(p.clocks.memory_mhz),
    )


@handles("sim", GlobalCopyWork)
def run_global_copy(backend: SimBackend, work: GlobalCopyWork, *, seed: int = 0) -> CopyTimings:
    _need(backend, "throughput")
    ns, _ = _global_ns(
        backend,
        ctas=work.ctas,
        threads_per_cta=work.threads_per_cta,
        ilp=work.ilp,
        element_bytes=work.element_bytes,
        copy_bytes=work.copy_bytes,
    )
    return _timings(backend, ns, work.repetitions, seed)


@handles("sim", DeviceCopyWork)
def run_device_copy(backend: SimBackend, work: DeviceCopyWork, *, seed: int = 0) -> CopyTimings:
    from ..sim.throughput import resident_ctas_per_sm

    _need(backend, "throughput")
    p = backend.profile
    resident = resident_ctas_per_sm(
        threads_per_cta=CEILING_THREADS,
        max_warps_per_sm=p.max_warps_per_sm,
        max_ctas_per_sm=p.throughput.max_ctas_per_sm,
    )
    ns, _ = _global_ns(
        backend,
        ctas=CEILING_WAVES * p.sms * resident,
        threads_per_cta=CEILING_THREADS,
        ilp=CEILING_ILP,
        element_bytes=CEILING_ELEMENT_BYTES,
        copy_bytes=work.copy_bytes,
    )
    return _timings(backend, ns, work.repetitions, seed)
