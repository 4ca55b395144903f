"""Driver facts: both backends give the same typed facts; sweeps record them in provenance."""

from pathlib import Path

from gpudissect.backends.sim import SimBackend
from gpudissect.contract.facts import DeviceFacts, facts_from_attributes

REPO = Path(__file__).resolve().parents[1]


def test_sim_facts_are_what_a_driver_would_report_of_the_twin():
    facts = SimBackend(profile_path=REPO / "config" / "devices" / "gtx780.yaml").facts()
    # TPDS Table III: 12 SMs, 1536 KB of L2, 48 KB of shared memory, 3072 MB of memory;
    # TPDS Sec. 6.1: 64 warps per SM
    assert facts == DeviceFacts(
        source="profile",
        name="GeForce GTX 780",
        compute_capability="3.5",
        sm_count=12,
        max_threads_per_sm=2048,
        l2_bytes=1536 * 1024,
        shared_per_sm_bytes=48 * 1024,
        shared_per_block_optin_bytes=48 * 1024,
        total_memory_bytes=3072 << 20,
        sm_clock_mhz=1006.0,
        memory_clock_mhz=1502.0,
    )


def test_driver_attributes_become_facts():
    # the attributes an H100 80GB HBM3 reports (cuDeviceGetAttribute; clock rates in kHz)
    attributes = {
        "multiprocessor_count": 132,
        "l2_cache_size": 52428800,
        "memory_clock_rate": 2619000,
        "clock_rate": 1980000,
        "max_shared_memory_per_multiprocessor": 233472,
        "max_shared_memory_per_block_optin": 232448,
        "max_threads_per_multiprocessor": 2048,
        "warp_size": 32,
        "total_constant_memory": 65536,
    }
    facts = facts_from_attributes(
        name="NVIDIA H100 80GB HBM3",
        compute_capability="9.0",
        total_memory_bytes=85520809984,
        attributes=attributes,
    )
    assert facts.source == "driver"
    assert (facts.sm_count, facts.l2_bytes, facts.shared_per_sm_bytes) == (132, 50 << 20, 228 << 10)
    assert facts.shared_per_block_optin_bytes == 227 << 10
    assert (facts.sm_clock_mhz, facts.memory_clock_mhz) == (1980.0, 2619.0)
    assert facts.total_memory_bytes == 85520809984
    assert facts.as_dict()["const_memory_bytes"] == 65536


def test_a_twin_without_a_memory_size_reports_none():
    facts = SimBackend(profile_path=REPO / "tests" / "data" / "tiny_profile.yaml").facts()
    assert facts.total_memory_bytes is None
    assert facts.source == "profile"


def test_every_trace_records_the_facts_its_ranges_came_from(tmp_path):
    from gpudissect.config import parse
    from gpudissect.sweep import run_experiment
    from gpudissect.traces import read_trace

    raw = {"name": "tiny", "backend": "sim", "profile": "tests/data/tiny_profile.yaml"}
    device = parse({"devices": [raw]}, base_dir=REPO).devices[0]
    trace = read_trace(run_experiment(device, "l1_size", out=tmp_path / "t.parquet"))
    facts = trace.provenance["device_facts"]
    # tests/data/tiny_profile.yaml: 1 SM of 32 warps, a 16 KiB L2, no shared or memory size
    assert facts["source"] == "profile" and facts["sm_count"] == 1
    assert facts["max_threads_per_sm"] == 1024 and facts["l2_bytes"] == 16384
    assert facts["total_memory_bytes"] is None
    # the automatic search (array_bytes defaults to auto) ran from 4 strides (512 B) and
    # bracketed the 2 KiB L1 at the stride
    sizes = set(trace.data["array_bytes"])
    assert {512, 1024, 2048, 2048 + 128} <= sizes
