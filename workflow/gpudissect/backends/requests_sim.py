"""Sim handlers of the outstanding-request families (Lashgar et al.): the Thread-Latency launch
(`RequestsWork`) through the request-table model, the L2 flush copy (`CopyWork`) through the
simulated memory hierarchy and the throughput model."""

from __future__ import annotations

import hashlib

import numpy as np

from ..contract.backend import handles
from ..exceptions import ProfileError
from ..experiments.l2_flush import CopyResult, CopyWork
from ..experiments.requests import NoRequestTable, RequestsResult, RequestsWork
from .seeding import point_seed

L2_PATH = "cg"  # host-to-device copies and the copy kernel's loads reach the L2 only
FLUSH_CAPACITIES = 8


def memory_latency_cycles(profile, path: str) -> float:
    """What one load of Listing 1 waits when its line sits in the L2 (the paper's setting: the
    data came from the host through the L2): the hit latency of the last cache of `path` on that
    path (the L2), or of the `cg` path when the profile lacks `path`."""
    use = path if path in profile.paths else L2_PATH
    if use not in profile.paths:
        raise ProfileError(
            f"profile {profile.name!r} has neither path {path!r} nor {L2_PATH!r}; the requests "
            "experiment needs the latency of an L2 hit"
        )
    return float(profile.path_caches(use)[-1].hit_latency_on(use))


@handles("sim", RequestsWork)
def run_requests(backend, work: RequestsWork, *, seed: int = 0) -> RequestsResult:
    """The request table decides when each load completes (sim/outstanding.py). The event
    simulation is deterministic for a given memory latency, so it runs once per configuration
    (and once for all repeats of the sweep); the runs differ by measurement noise (the
    profile's noise block: one Gaussian clock jitter per launch, since every thread times the
    same two barriers, and rare per-thread outliers)."""
    from ..sim.outstanding import simulate_request_kernel

    profile = backend.profile
    if profile.requests is None:
        raise NoRequestTable(
            f"profile {profile.name!r} ({profile.source}) has no requests block; add one (see "
            "config/devices/README.md) or disable experiments.requests for this device"
        )
    holds = 32 * profile.max_warps_per_sm
    if work.threads > holds:
        raise ProfileError(
            f"requests: {work.threads} threads do not fit one SM of profile {profile.name!r} "
            f"(max_warps_per_sm {profile.max_warps_per_sm}: {holds} threads); use threads.stop "
            "auto or at most that"
        )
    # the event simulation is deterministic: a repeat of the sweep reuses it (only the noise,
    # seeded per point and repeat, differs)
    cache = backend.__dict__.setdefault("_request_runs", {})
    key = (work.path, work.offsets_bytes.shape, hashlib.sha1(work.offsets_bytes.tobytes()).digest())
    elapsed = cache.get(key)
    if elapsed is None:
        sim = simulate_request_kernel(
            profile.requests,
            addresses_bytes=work.offsets_bytes.astype(np.int64),
            memory_latency_cycles=memory_latency_cycles(profile, work.path),
            block_threads=work.block_threads,
        )
        elapsed = cache[key] = np.asarray(sim.elapsed_cycles, dtype=np.float64)
    rng = np.random.default_rng(point_seed(backend.seed, seed))
    noise = profile.noise
    shape = (work.runs, work.threads)
    t = np.empty(shape)
    t[...] = elapsed
    if noise.jitter_cycles:
        t += np.round(rng.normal(0.0, noise.jitter_cycles, (work.runs, 1)))
    if noise.outlier_probability > 0:
        t += noise.outlier_cycles * (rng.random(shape) < noise.outlier_probability)
    out = np.maximum(t, 0, out=t).astype(np.uint32)
    return RequestsResult(elapsed_cycles=out, sm_clock_mhz=float(profile.clocks.sm_mhz))


def copy_hit_cycles(profile, addresses_bytes: np.ndarray, *, threads_per_block: int):
    """The L2 hit latency of each source line of the copy kernel, (for SM 0, for the SM that
    reads it): the hit latency on the cg path plus, with an ``l2_slices`` block, the line's
    slice term, the SM's term and the far term where the slice lies in another partition
    (sim/l2_slices.py). Block b of the kernel runs on SM b mod sms (8-byte elements)."""
    l2 = profile.path_caches(L2_PATH)[-1]
    base = l2.hit_latency_on(L2_PATH)
    spec = profile.l2_slices
    if spec is None or spec.cache != l2.name:
        flat = np.full(addresses_bytes.shape, base, dtype=np.int64)
        return flat, flat
    table = np.stack([spec.hit_cycles(base_cycles=base, sm=sm) for sm in range(profile.sms)])
    slices = spec.slices_of(addresses_bytes)
    sm = (addresses_bytes // (8 * threads_per_block)) % profile.sms
    return table[0, slices], table[sm, slices]


def _copy_time_ns(
    profile,
    latency_cycles: np.ndarray,
    *,
    size_bytes: int,
    hit_sm0_cycles: np.ndarray,
    hit_own_cycles: np.ndarray,
):
    """Kernel time of the copy from the latencies of its source lines (Little's law with
    queueing, sim/throughput.py): every warp keeps one 256-byte load in flight (one 8-byte element
    per thread); the resident warps of all SMs are the customers; a customer waits the mean
    simulated latency of its lines and occupies DRAM for the bytes of the lines that missed the
    L2. The lines were loaded by SM 0 (`latency_cycles`); a line missed when it came back slower
    than its own L2 hit latency on SM 0 (`hit_sm0_cycles`: every slice, SM and far term) by more
    than the noise, and a hit costs the latency of a hit from the SM that reads it
    (`hit_own_cycles`). Stores are not simulated (the hierarchy has no store path)."""
    from ..sim.throughput import mva_throughput

    clock_ghz = profile.clocks.sm_mhz / 1000.0
    warp_bytes = 32 * 8
    warps = -(-size_bytes // warp_bytes)
    customers = int(min(warps, profile.sms * profile.max_warps_per_sm))
    missed = latency_cycles > hit_sm0_cycles + 3 * max(profile.noise.jitter_cycles, 1)
    own = np.where(missed, latency_cycles, latency_cycles - hit_sm0_cycles + hit_own_cycles)
    miss_bytes_per_warp = missed.mean() * warp_bytes if missed.size else 0.0
    delay_ns = float(own.mean()) / clock_ghz
    thr = profile.throughput
    if thr is None:
        demand_ns = 1e-9
    else:
        demand_ns = max(
            miss_bytes_per_warp / (thr.dram_peak_gbps * thr.dram_achievable_fraction), 1e-9
        )
    rate = mva_throughput(customers, demand_ns, delay_ns)  # warps per ns
    return warps / rate


@handles("sim", CopyWork)
def run_copy(backend, work: CopyWork, *, seed: int = 0) -> CopyResult:
    """Lashgar Sec. 3.3 on the simulated hierarchy: a fresh GPU; the host-to-device copy of the
    source passes through the L2 (its lines are filled in address order by the copy engine,
    which uses no SM's TLB); when flushed, a dummy copy of `flush_bytes` follows; then the kernel
    reads the source, line by line, and its time follows from the hits and misses
    (`_copy_time_ns`), each line's hit at the latency of the SM whose block reads it."""
    from ..sim.engine import SimGPU

    profile = backend.profile
    l2 = profile.path_caches(L2_PATH)[-1]
    line = l2.line_bytes
    gpu = SimGPU(profile, seed=point_seed(backend.seed, seed))
    src = np.arange(0, work.size_bytes, line, dtype=np.int64)
    gpu.fill(l2.name, src)  # host -> device copy of the source, written through the L2
    if work.flushed:
        # A dummy copy to a separate allocation. Past a few L2 capacities more dummy lines change
        # nothing measurable (a source line survives k capacities of fills with probability
        # about e^-k under random replacement, 0 under LRU), so at most FLUSH_CAPACITIES of
        # them are simulated: a 76 MB flush would cost seconds per point.
        base = 1 << 36
        flush = min(work.flush_bytes, FLUSH_CAPACITIES * l2.size_bytes)
        gpu.fill(l2.name, base + np.arange(0, flush, line, dtype=np.int64))
    latency = gpu.load_sequence(L2_PATH, src)
    sm0, own = copy_hit_cycles(profile, src, threads_per_block=work.threads_per_block)
    elapsed = _copy_time_ns(
        profile, latency, size_bytes=work.size_bytes, hit_sm0_cycles=sm0, hit_own_cycles=own
    )
    return CopyResult(
        elapsed_ms=np.array([elapsed * 1e-6]), sm_clock_mhz=float(profile.clocks.sm_mhz)
    )
