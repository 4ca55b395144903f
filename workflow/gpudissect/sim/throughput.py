"""Global- and shared-memory copy throughput of a launch, from occupancy, latency and bandwidth.

The experiments are those of Mei & Chu, TPDS 2017 section 5.1 (Table VI, Fig. 12: a plain
global-memory copy swept over CTAs, CTA size and ILP) and section 6.1 (Table VII, Figs. 15-16:
a shared-memory copy swept over CTA size, CTAs per SM and ILP). The paper explains both with
Little's law ("active warps x ILP = latency x throughput"); this module is that mechanism, with
queueing so that latency grows under load:

- **Occupancy.** CTAs resident per SM are limited by ``max_ctas_per_sm``, by
  ``max_warps_per_sm`` and by shared memory per CTA; CTAs beyond ``sms x resident`` run in later
  waves (a partly filled last wave lowers the average throughput).
- **Requests in flight.** Each resident warp keeps ``ilp`` independent warp-wide accesses in
  flight; each is a *customer* of a closed queueing network: a pure delay (the unloaded memory
  latency) and one server (DRAM, or the SM's shared-memory pipeline) whose service demand is the
  bytes the access moves divided by the achievable bandwidth.
- **Solution.** Exact mean-value analysis (MVA) of that network: with few customers the
  throughput is ``customers x bytes / latency`` (latency-bound, linear in warps and ILP); with
  many, queueing at the server raises the latency and the throughput tends to the server's
  achievable rate (bandwidth-bound). Nothing is fitted to the papers' curves.

A copy moves every element twice (a load and a store), and throughput counts both, as the
papers' formulas do (TPDS section 6.1: ``2 x f x sizeof(int) x threads x ILP / cycles``).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudissect.exceptions import ConfigError, ProfileError

from .banks import SharedSpec, strided_warp_access

WARP_THREADS = 32


@dataclass(frozen=True)
class ThroughputSpec:
    """The ``throughput:`` block of a device profile (minus ``cite``)."""

    dram_peak_gbps: float  # theoretical DRAM bandwidth (TPDS Table VI)
    shared_peak_bytes_per_cycle_per_sm: float | None = None  # None: the shared block's value
    dram_achievable_fraction: float = 1.0  # of dram_peak_gbps a streaming copy can sustain
    # of dram_peak_gbps a stream of stores can sustain (the bandwidth experiment's DRAM writes);
    # None: the reads' fraction
    dram_write_achievable_fraction: float | None = None
    shared_achievable_fraction: float = 1.0  # of the shared pipeline rate a copy can sustain
    shared_warp_accesses_per_cycle: float = 1.0  # warp-wide shared accesses started per cycle
    max_ctas_per_sm: int = 8  # resident CTA limit of one SM (Fermi 8, Kepler 16, Maxwell 32)
    # streaming servers of the bandwidth experiment (sim/bandwidth.py); None: not a limit
    l1_peak_bytes_per_cycle_per_sm: float | None = None
    l2_read_peak_gbps: float | None = None
    l2_write_peak_gbps: float | None = None
    # the L2's reads where every SM reads its own partition alone: a footprint that each
    # partition's near store holds whole (l2_slices.near_copies); None: l2_read_peak_gbps
    l2_near_read_peak_gbps: float | None = None

    def __post_init__(self) -> None:
        for name in (
            "l1_peak_bytes_per_cycle_per_sm",
            "l2_read_peak_gbps",
            "l2_write_peak_gbps",
            "l2_near_read_peak_gbps",
        ):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ProfileError(
                    f"throughput.{name} must be positive, got {value}; leave it out for no limit"
                )
        if self.dram_peak_gbps <= 0:
            raise ProfileError(
                f"throughput.dram_peak_gbps must be positive, got {self.dram_peak_gbps}"
            )
        peak = self.shared_peak_bytes_per_cycle_per_sm
        if peak is not None and peak <= 0:
            raise ProfileError(
                f"throughput.shared_peak_bytes_per_cycle_per_sm must be positive, got {peak}; "
                "leave it out to use shared.peak_bytes_per_cycle_per_sm"
            )
        for name in (
            "dram_achievable_fraction",
            "dram_write_achievable_fraction",
            "shared_achievable_fraction",
        ):
            value = getattr(self, name)
            if value is not None and not 0 < value <= 1:
                raise ProfileError(f"throughput.{name} must be in (0, 1], got {value}")
        if self.shared_warp_accesses_per_cycle <= 0:
            raise ProfileError(
                "throughput.shared_warp_accesses_per_cycle must be positive, got "
                f"{self.shared_warp_accesses_per_cycle}"
            )
        if self.max_ctas_per_sm < 1:
            raise ProfileError(
                f"throughput.max_ctas_per_sm must be >= 1, got {self.max_ctas_per_sm}"
            )


@dataclass(frozen=True)
class CopyThroughput:
    """One launch configuration's result."""

    throughput_gbps: float  # bytes loaded + stored per ns (per SM for shared copies)
    bytes_per_cycle: float  # the same, per SM cycle
    resident_ctas_per_sm: int
    active_warps_per_sm: int  # warps per SM in a full wave
    waves: float  # CTAs / (SMs x resident CTAs per SM); 1 for shared copies


def mva_throughput(customers, demand, delay):
    """Customers completed per time unit in a closed network of one queueing server
    (``demand`` per visit) and one delay station (``delay``), by exact mean-value analysis.
    (Plain Python: at most a few thousand steps a launch, far below numba's start-up cost.)"""
    queue = 0.0
    x = 0.0
    for n in range(1, customers + 1):
        response = demand * (1.0 + queue)
        x = n / (delay + response)
        queue = x * response
    return x


def resident_ctas_per_sm(
    *,
    threads_per_cta: int,
    max_warps_per_sm: int,
    max_ctas_per_sm: int,
    shared_bytes_per_cta: int = 0,
    shared_size_bytes: int | None = None,
) -> int:
    """CTAs one SM holds at once; raises ConfigError when not even one fits."""
    if not 1 <= threads_per_cta <= 1024:
        raise ConfigError(f"threads_per_cta must be in 1..1024, got {threads_per_cta}")
    warps = -(-threads_per_cta // WARP_THREADS)
    limits = [max_ctas_per_sm, max_warps_per_sm // warps]
    if shared_bytes_per_cta > 0:
        if shared_size_bytes is None:
            raise ConfigError("shared_bytes_per_cta > 0 needs shared_size_bytes")
        limits.append(shared_size_bytes // shared_bytes_per_cta)
    resident = min(limits)
    if resident < 1:
        raise ConfigError(
            f"a CTA of {threads_per_cta} threads ({warps} warps) using {shared_bytes_per_cta} "
            f"shared bytes does not fit on one SM (max {max_warps_per_sm} warps, "
            f"{shared_size_bytes} shared bytes); use smaller CTAs or a smaller ILP"
        )
    return resident


def _check_launch(ilp: int, element_bytes: int, sm_clock_mhz: float) -> None:
    if ilp < 1:
        raise ConfigError(f"ilp must be >= 1, got {ilp}")
    if element_bytes < 1:
        raise ConfigError(f"element_bytes must be >= 1, got {element_bytes}")
    if sm_clock_mhz <= 0:
        raise ConfigError(f"sm_clock_mhz must be positive, got {sm_clock_mhz}")


def global_copy_throughput(
    spec: ThroughputSpec,
    *,
    ctas: int,
    threads_per_cta: int,
    ilp: int,
    sms: int,
    max_warps_per_sm: int,
    sm_clock_mhz: float,
    dram_latency_cycles: float,
    element_bytes: int = 4,
) -> CopyThroughput:
    """Throughput of TPDS section 5.1's copy: every thread copies ``ilp`` elements per step.

    One customer is one warp-wide load of ``32 x element_bytes`` (coalesced) and its store; it
    occupies DRAM for the bytes of both at the achievable bandwidth and waits the unloaded DRAM
    latency. All resident warps of the GPU share the one DRAM.
    """
    _check_launch(ilp, element_bytes, sm_clock_mhz)
    if ctas < 1 or sms < 1:
        raise ConfigError(f"ctas and sms must be >= 1, got {ctas} and {sms}")
    if dram_latency_cycles <= 0:
        raise ConfigError(f"dram_latency_cycles must be positive, got {dram_latency_cycles}")
    resident = resident_ctas_per_sm(
        threads_per_cta=threads_per_cta,
        max_warps_per_sm=max_warps_per_sm,
        max_ctas_per_sm=spec.max_ctas_per_sm,
    )
    warps_per_cta = -(-threads_per_cta // WARP_THREADS)
    bytes_per_customer = 2.0 * WARP_THREADS * element_bytes  # load + store
    demand_ns = bytes_per_customer / (spec.dram_peak_gbps * spec.dram_achievable_fraction)
    delay_ns = dram_latency_cycles * 1000.0 / sm_clock_mhz

    def gbps(concurrent_ctas: int) -> float:
        customers = concurrent_ctas * warps_per_cta * ilp
        return mva_throughput(customers, demand_ns, delay_ns) * bytes_per_customer

    wave = sms * resident
    full, rest = divmod(ctas, wave)
    # every CTA copies the same share of the data: time = sum over waves of bytes / throughput
    time_per_cta = (full * wave / gbps(wave) if full else 0.0) + (rest / gbps(rest) if rest else 0)
    throughput = ctas / time_per_cta
    return CopyThroughput(
        throughput_gbps=throughput,
        bytes_per_cycle=throughput * 1000.0 / sm_clock_mhz,
        resident_ctas_per_sm=resident,
        active_warps_per_sm=min(resident, -(-ctas // sms)) * warps_per_cta,
        waves=ctas / wave,
    )


def shared_copy_throughput(
    spec: ThroughputSpec,
    shared: SharedSpec,
    *,
    ctas_per_sm: int,
    threads_per_cta: int,
    ilp: int,
    max_warps_per_sm: int,
    sm_clock_mhz: float,
    element_bytes: int = 4,
    bank_width_bytes: int | None = None,
    shared_bytes_per_cta: int | None = None,
) -> CopyThroughput:
    """Per-SM throughput of TPDS section 6.1's copy between two shared arrays.

    Each thread copies ``ilp`` elements and uses ``2 x ilp x element_bytes`` of shared memory
    (the paper's 8 x ILP bytes). A warp access to consecutive elements needs ``degree`` bank
    passes (banks.py) and occupies the pipeline for
    ``max(degree / shared_warp_accesses_per_cycle, access bytes / peak bytes per cycle)``
    cycles: on Kepler's 8-byte banks a 4-byte-per-thread access moves 128 bytes in its cycle,
    half the banks' 256. The delay is the unloaded shared latency.
    """
    _check_launch(ilp, element_bytes, sm_clock_mhz)
    if ctas_per_sm < 1:
        raise ConfigError(f"ctas_per_sm must be >= 1, got {ctas_per_sm}")
    if shared_bytes_per_cta is None:
        shared_bytes_per_cta = 2 * ilp * element_bytes * threads_per_cta
    resident = resident_ctas_per_sm(
        threads_per_cta=threads_per_cta,
        max_warps_per_sm=max_warps_per_sm,
        max_ctas_per_sm=spec.max_ctas_per_sm,
        shared_bytes_per_cta=shared_bytes_per_cta,
        shared_size_bytes=shared.size_bytes,
    )
    active_ctas = min(ctas_per_sm, resident)
    warps_per_cta = -(-threads_per_cta // WARP_THREADS)
    latency, degree = strided_warp_access(
        shared,
        stride_elements=1,
        element_bytes=element_bytes,
        bank_width_bytes=bank_width_bytes,
    )
    peak = spec.shared_peak_bytes_per_cycle_per_sm or shared.peak_bytes_per_cycle
    access_bytes = WARP_THREADS * element_bytes
    pipeline_cycles = max(degree / spec.shared_warp_accesses_per_cycle, access_bytes / peak)
    demand = 2.0 * pipeline_cycles / spec.shared_achievable_fraction  # load and store
    customers = active_ctas * warps_per_cta * ilp
    bytes_per_cycle = mva_throughput(customers, demand, float(latency)) * 2.0 * access_bytes
    return CopyThroughput(
        throughput_gbps=bytes_per_cycle * sm_clock_mhz / 1000.0,
        bytes_per_cycle=bytes_per_cycle,
        resident_ctas_per_sm=resident,
        active_warps_per_sm=active_ctas * warps_per_cta,
        waves=1.0,
    )
