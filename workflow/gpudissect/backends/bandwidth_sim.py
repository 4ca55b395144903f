"""Sim handler of the bandwidth family: the launch goes through the streaming model of
sim/bandwidth.py (where the footprint's lines are served, by the profile's set-index functions
and sizes; how fast, by a closed queueing network over the levels' servers), and each timing
gets one draw of the profile's timing noise."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..contract.backend import handles
from ..exceptions import DeviceUnavailable
from ..experiments.bandwidth import StreamWork
from ..experiments.global_throughput import CopyTimings
from .throughput_sim import WARP_THREADS, _need, _timings

if TYPE_CHECKING:
    from .sim import SimBackend


def _near_only(profile, footprint_bytes: int) -> bool:
    """Whether every SM reads the footprint from its own partition: an L2 with near stores
    (``l2_slices.near_copies``) each of which holds the whole footprint."""
    sliced = profile.l2_slices
    stores = None if sliced is None else sliced.near_copies_bytes
    return stores is not None and footprint_bytes <= min(stores)


def _levels(profile, caches, *, write: bool, near_only: bool = False):
    """The stream's levels, nearest first, DRAM last, each with its SM's share of the rate."""
    from ..sim.bandwidth import StreamLevel

    t, sms, clock = profile.throughput, profile.sms, profile.clocks.sm_mhz
    levels = []
    for spec in caches:
        if spec.name == "l2":
            peak = t.l2_write_peak_gbps if write else t.l2_read_peak_gbps
            if not write and near_only and t.l2_near_read_peak_gbps is not None:
                peak = t.l2_near_read_peak_gbps
            rate = None if peak is None else peak / sms
        elif t.l1_peak_bytes_per_cycle_per_sm is not None:
            rate = t.l1_peak_bytes_per_cycle_per_sm * clock / 1000.0
        else:
            rate = None
        levels.append(StreamLevel(spec.name, spec.hit_latency_cycles, rate))
    fraction = t.dram_achievable_fraction
    if write and t.dram_write_achievable_fraction is not None:
        fraction = t.dram_write_achievable_fraction
    dram = t.dram_peak_gbps * fraction / sms
    levels.append(StreamLevel("dram", profile.dram.latency_cycles, dram))
    return levels


@handles("sim", StreamWork)
def run_stream(backend: SimBackend, work: StreamWork, *, seed: int = 0) -> CopyTimings:
    from ..sim.bandwidth import served_shares, stream_throughput
    from ..sim.throughput import resident_ctas_per_sm

    _need(backend, "throughput")
    profile = backend.profile_for(work.carveout_pct, 0)  # the kernels use no shared memory
    path = work.path if work.direction == "read" else "cg"
    if path not in profile.paths:
        raise DeviceUnavailable(f"profile {profile.name} has no {path} load path")
    caches = profile.path_caches(path)
    if work.direction == "write":  # stores write through the L1 to the L2
        caches = tuple(c for c in caches if c.name == "l2")
    sms = profile.sms
    shares = served_shares(
        caches,
        ctas=work.ctas,
        sms=sms,
        slice_bytes=work.slice_bytes,
        per_sm=tuple(c.name != "l2" for c in caches),
        by_sm=work.by_sm,
    )
    resident = resident_ctas_per_sm(
        threads_per_cta=work.threads_per_cta,
        max_warps_per_sm=profile.max_warps_per_sm,
        max_ctas_per_sm=profile.throughput.max_ctas_per_sm,
    )
    ctas_per_sm = min(-(-work.ctas // sms), resident)
    warps = ctas_per_sm * -(-work.threads_per_cta // WARP_THREADS)
    gbps = stream_throughput(
        _levels(
            profile,
            caches,
            write=work.direction == "write",
            near_only=_near_only(profile, work.footprint_bytes),
        ),
        shares,
        warps_per_sm=warps,
        sms=sms,
        sm_clock_mhz=profile.clocks.sm_mhz,
    )
    # CTAs past one wave run after it at the same rate: the time is the bytes over the rate
    ns = work.bytes_moved / gbps
    return _timings(backend, ns, work.repetitions, seed)
