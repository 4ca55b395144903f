"""Copy-throughput model: hand-derived latency-bound, bandwidth-bound and occupancy cases.

MVA for one server (demand D per visit) and one delay Z, with n customers:
    R(n) = D (1 + Q(n-1)),  X(n) = n / (Z + R(n)),  Q(n) = X(n) R(n),  Q(0) = 0.
"""

import pytest

from gpudissect.exceptions import ConfigError, ProfileError
from gpudissect.sim.banks import SharedSpec
from gpudissect.sim.throughput import (
    ThroughputSpec,
    global_copy_throughput,
    mva_throughput,
    resident_ctas_per_sm,
    shared_copy_throughput,
)

SPEC = ThroughputSpec(dram_peak_gbps=100.0, max_ctas_per_sm=8)
LAUNCH = dict(sms=1, max_warps_per_sm=48, sm_clock_mhz=1000.0, dram_latency_cycles=1000.0)
FERMI_SHARED = SharedSpec(
    size_bytes=49152,
    banks=32,
    bank_width_bytes=4,
    base_latency_cycles=50,
    peak_bytes_per_cycle_per_sm=64,
)
KEPLER_SHARED = SharedSpec(
    size_bytes=49152,
    banks=32,
    bank_width_bytes=4,
    modes_bytes=(4, 8),
    base_latency_cycles=47,
    peak_bytes_per_cycle_per_sm=256,
)


def test_mva_by_hand():
    # D = 1, Z = 1. n=1: R = 1, X = 1/2, Q = 1/2. n=2: R = 1.5, X = 2/2.5 = 0.8.
    assert mva_throughput(1, 1.0, 1.0) == pytest.approx(0.5)
    assert mva_throughput(2, 1.0, 1.0) == pytest.approx(0.8)
    # many customers: the server's rate 1/D
    assert mva_throughput(10_000, 2.0, 100.0) == pytest.approx(0.5, rel=1e-3)


def test_global_latency_bound_one_warp():
    # one warp, ILP 1: a customer moves 32 x 4 bytes in and out = 256 bytes; the DRAM holds it
    # D = 256 B / 100 GB/s = 2.56 ns; latency Z = 1000 cycles at 1000 MHz = 1000 ns.
    # X = 1 / (1000 + 2.56) per ns -> 256 / 1002.56 GB/s
    r = global_copy_throughput(SPEC, ctas=1, threads_per_cta=32, ilp=1, **LAUNCH)
    assert r.throughput_gbps == pytest.approx(256 / 1002.56)
    # ILP 2 doubles the customers; still far from the bandwidth: almost exactly double
    r2 = global_copy_throughput(SPEC, ctas=1, threads_per_cta=32, ilp=2, **LAUNCH)
    assert r2.throughput_gbps == pytest.approx(2 * r.throughput_gbps, rel=0.01)


def test_global_bandwidth_bound_reaches_the_achievable_fraction():
    # 48 warps x ILP 8 x 8 SMs = 3072 customers >> Z / D = 1000 / 2.56 = 391: saturated
    spec = ThroughputSpec(dram_peak_gbps=100.0, dram_achievable_fraction=0.8)
    r = global_copy_throughput(spec, ctas=8 * 6, threads_per_cta=256, ilp=8, **{**LAUNCH, "sms": 8})
    assert r.throughput_gbps == pytest.approx(80.0, rel=0.01)
    assert r.resident_ctas_per_sm == 6 and r.active_warps_per_sm == 48 and r.waves == 1


def test_global_occupancy_and_partial_waves():
    # 1024-thread CTAs: 32 warps, at most 48 // 32 = 1 per SM. 2 CTAs on 1 SM run in 2 waves
    # at the same rate as 1 CTA: same throughput.
    one = global_copy_throughput(SPEC, ctas=1, threads_per_cta=1024, ilp=1, **LAUNCH)
    two = global_copy_throughput(SPEC, ctas=2, threads_per_cta=1024, ilp=1, **LAUNCH)
    assert two.throughput_gbps == pytest.approx(one.throughput_gbps)
    assert two.resident_ctas_per_sm == 1 and two.waves == 2
    # 256-thread CTAs: 6 resident. 7 CTAs = a full wave and a lone CTA, whose wave runs with
    # a sixth of the customers and drags the average below that of 6 CTAs
    full = global_copy_throughput(SPEC, ctas=4, threads_per_cta=256, ilp=8, **LAUNCH)
    more = global_copy_throughput(SPEC, ctas=7, threads_per_cta=256, ilp=8, **LAUNCH)
    assert full.waves == 4 / 6 and more.waves == 7 / 6
    assert (
        more.throughput_gbps
        < global_copy_throughput(SPEC, ctas=6, threads_per_cta=256, ilp=8, **LAUNCH).throughput_gbps
    )


def test_resident_ctas_limits():
    assert resident_ctas_per_sm(threads_per_cta=256, max_warps_per_sm=48, max_ctas_per_sm=8) == 6
    assert resident_ctas_per_sm(threads_per_cta=32, max_warps_per_sm=48, max_ctas_per_sm=8) == 8
    # shared: 256 threads x ILP 6 x 8 bytes = 12288 bytes per CTA -> 4 in 48 KB
    assert (
        resident_ctas_per_sm(
            threads_per_cta=256,
            max_warps_per_sm=64,
            max_ctas_per_sm=16,
            shared_bytes_per_cta=12288,
            shared_size_bytes=49152,
        )
        == 4
    )
    with pytest.raises(ConfigError, match="does not fit"):
        resident_ctas_per_sm(threads_per_cta=1024, max_warps_per_sm=16, max_ctas_per_sm=8)


def test_shared_latency_bound_one_warp_fermi():
    # Fermi: 128-byte warp access at 64 B/cycle = 2 cycles in the pipeline; a copy = load +
    # store: D = 4 cycles, Z = 50. One customer: X = 1/54 per cycle, 256 bytes each.
    r = shared_copy_throughput(
        SPEC,
        FERMI_SHARED,
        ctas_per_sm=1,
        threads_per_cta=32,
        ilp=1,
        max_warps_per_sm=48,
        sm_clock_mhz=1000.0,
    )
    assert r.bytes_per_cycle == pytest.approx(256 / 54)
    assert r.throughput_gbps == pytest.approx(256 / 54)  # 1 GHz: bytes/cycle = GB/s


def test_shared_kepler_4_byte_words_use_half_the_8_byte_banks():
    # one 32-thread access per cycle: 4-byte words move 128 B/cycle of the 256 the banks allow;
    # 8-byte words in 8-byte mode move 256. 32 warps x ILP 4 saturates either way.
    kw = dict(ctas_per_sm=1, threads_per_cta=1024, ilp=4, max_warps_per_sm=64, sm_clock_mhz=1e3)
    four = shared_copy_throughput(SPEC, KEPLER_SHARED, **kw)
    eight = shared_copy_throughput(
        SPEC, KEPLER_SHARED, **{**kw, "ilp": 2}, element_bytes=8, bank_width_bytes=8
    )
    assert four.bytes_per_cycle == pytest.approx(128, rel=0.01)
    assert eight.bytes_per_cycle == pytest.approx(256, rel=0.01)
    # the achievable fraction scales the sustained rate (Table VII's efficiency at saturation)
    spec = ThroughputSpec(dram_peak_gbps=100.0, shared_achievable_fraction=0.65)
    assert shared_copy_throughput(spec, KEPLER_SHARED, **kw).bytes_per_cycle == pytest.approx(
        0.65 * 128, rel=0.01
    )


def test_shared_occupancy_limited_by_shared_memory():
    # 1024 threads x ILP 8 x 8 bytes = 64 KB > 48 KB: does not fit; ILP 6 (48 KB) does
    kw = dict(ctas_per_sm=1, threads_per_cta=1024, max_warps_per_sm=48, sm_clock_mhz=950.0)
    with pytest.raises(ConfigError, match="smaller ILP"):
        shared_copy_throughput(SPEC, FERMI_SHARED, ilp=8, **kw)
    r = shared_copy_throughput(SPEC, FERMI_SHARED, ilp=6, **kw)
    assert r.active_warps_per_sm == 32 and r.resident_ctas_per_sm == 1
    # 8 CTAs of 128 threads asked; each uses 128 x 8 x 8 = 8192 bytes -> 49152 // 8192 = 6 fit
    # (warps allow 48 // 4 = 12, the CTA limit 8)
    r = shared_copy_throughput(
        SPEC,
        FERMI_SHARED,
        ctas_per_sm=8,
        threads_per_cta=128,
        ilp=8,
        max_warps_per_sm=48,
        sm_clock_mhz=950.0,
    )
    assert r.resident_ctas_per_sm == 6 and r.active_warps_per_sm == 24


def test_bad_spec_names_the_field():
    with pytest.raises(ProfileError, match="dram_achievable_fraction"):
        ThroughputSpec(dram_peak_gbps=100.0, dram_achievable_fraction=1.5)
    with pytest.raises(ProfileError, match="dram_peak_gbps"):
        ThroughputSpec(dram_peak_gbps=0)
