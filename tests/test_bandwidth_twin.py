"""The twin's throughput block: built from the bandwidths a run measured, it makes the twin's
run of the bandwidth experiment read them back."""

import json
from pathlib import Path

import pytest
import yaml

from gpudissect.analysis.throughput.bandwidth import analyse
from gpudissect.backends.sim import SimBackend
from gpudissect.experiments import bandwidth as bw
from gpudissect.families import FAMILIES
from gpudissect.topology import build_topology
from gpudissect.twin.reading import TopologyReader
from gpudissect.twin.throughput import throughput_block

DATA = Path(__file__).resolve().parent / "data"
SECTION = {
    "enabled": True,
    "levels": ["l1", "l2", "dram"],
    "ctas_per_sm": [1, 2, 4, 8],
    "threads_per_cta": 256,
    "l1_fraction": 0.5,
    "l2_fraction": 0.75,
    "l2_near_fraction": 0.5,
    "dram_l2_multiple": 4,
    "min_bytes_per_launch": 1 << 30,
    "repetitions": 3,
    "carveout_pct": 0,
    "l1_capacity": {"points": 0, "threads_per_cta": 32, "start_fraction": 0.875},
}

QUANTITIES = [
    ("l1d", "read"),
    ("l2", "read"),
    ("l2", "write"),
    ("dram", "read"),
    ("dram", "write"),
]


def _gpu_profile(tmp_path, write_fraction):
    """The unseen profile, its DRAM's stores at their own share of the peak where given."""
    profile = yaml.safe_load((DATA / "unseen_bandwidth_a.yaml").read_text())
    if write_fraction is not None:
        profile["throughput"]["dram_write_achievable_fraction"] = write_fraction
    path = tmp_path / "gpu.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path, profile


def _measure(profile_path, tmp_path):
    backend = SimBackend(profile_path=profile_path, seed=11)
    backend.load_handlers()
    sweep = bw.parse_params(
        {**SECTION, "l1_capacity": {**SECTION["l1_capacity"], "stop_fraction": "auto"}},
        "bandwidth",
    )
    stage1 = tmp_path / "cache_stage1.json"  # the sizes the sweep reads: the profile's L1
    stage1.write_text(json.dumps({"elements": {"l1d": {"size_bytes": {"value": 98304}}}}))
    data = bw.run(backend, sweep, device=None, inputs={"cache_stage1": str(stage1)})
    return analyse(data, provenance={"device": "gpu"})


@pytest.mark.parametrize("write_fraction", [None, 0.7])
def test_the_twin_reads_back_the_bandwidths_it_was_built_from(tmp_path, write_fraction):
    gpu_path, profile = _gpu_profile(tmp_path, write_fraction)
    doc = _measure(gpu_path, tmp_path)
    dram = doc["elements"]["dram"]
    # stores stream at their own rate where the GPU's DRAM writes slower than it reads
    ratio = dram["write_bandwidth_gbps"]["value"] / dram["read_bandwidth_gbps"]["value"]
    assert ratio == pytest.approx(1.0 if write_fraction is None else 0.7 / 0.875, rel=0.02)
    path = tmp_path / "bandwidth.json"
    path.write_text(json.dumps(doc))
    topology = build_topology("gpu", [str(path)], tuple(FAMILIES))
    # what a driver reports of the profile's DRAM: 2 x 2000 MHz x 640 bits / 8 = 320 GB/s
    topology["driver"] = {"memory_clock_khz": 2000000, "memory_bus_width_bits": 640}
    block = throughput_block(TopologyReader(topology), sms=16, sm_mhz=1500)
    assert block["dram_peak_gbps"] == pytest.approx(320.0)
    assert block["dram_achievable_fraction"] == pytest.approx(0.875, rel=0.01)
    expected_write = 0.875 if write_fraction is None else write_fraction
    assert block["dram_write_achievable_fraction"] == pytest.approx(expected_write, rel=0.01)
    assert all(v.startswith(("measured:", "derived:", "driver:")) for v in block["cite"].values())
    # the same GPU with the twin's block in place of its own
    profile["throughput"] = block
    twin_path = tmp_path / "twin.yaml"
    twin_path.write_text(yaml.safe_dump(profile))
    again = _measure(twin_path, tmp_path)
    for element, direction in QUANTITIES:
        key = f"{direction}_bandwidth_gbps"
        ours, theirs = doc["elements"][element][key], again["elements"][element][key]
        assert theirs["value"] == pytest.approx(ours["value"], rel=0.01), (element, direction)


def test_without_a_dram_reading_or_the_drivers_memory_facts_there_is_no_block():
    topology = {"elements": {"l2": {"read_bandwidth_gbps": {"value": 900.0}}}, "driver": {}}
    assert throughput_block(TopologyReader(topology), sms=16, sm_mhz=1500) is None


def test_a_footprint_each_partitions_store_holds_whole_reads_at_the_near_rate(tmp_path):
    # the unseen GPU with its L2 in two partitions (line parity), 8 SMs in each, every
    # partition's near store holding 1 MiB, and reads served within one partition at 600 GB/s
    # against the L2's 900: the l2_near footprint (half of the near size cache_stage1 reads,
    # 512 KiB) is held whole by each store and reads 600; the l2 footprint (3/4 of 4 MiB) is
    # not and reads 900 (each saturated stream tends to the slowest server it passes)
    profile = yaml.safe_load((DATA / "unseen_bandwidth_a.yaml").read_text())
    profile["throughput"]["l2_near_read_peak_gbps"] = 600
    profile["l2_slices"] = {
        "cache": "l2",
        "slices": 2,
        "index": {"kind": "xor", "masks": [1 << 7]},
        "slice_partition": [0, 1],
        "sm_partition": [s % 2 for s in range(16)],
        "far_cycles": 100,
        "near_copies": {"size_bytes": 1 << 20, "ways": 16},
    }
    path = tmp_path / "gpu.yaml"
    path.write_text(yaml.safe_dump(profile))
    backend = SimBackend(profile_path=path, seed=11)
    backend.load_handlers()
    section = {**SECTION, "levels": ["l2_near", "l2", "dram"]}
    section["l1_capacity"] = {**SECTION["l1_capacity"], "stop_fraction": "auto"}
    sweep = bw.parse_params(section, "bandwidth")
    stage1 = tmp_path / "cache_stage1.json"
    stage1.write_text(json.dumps({"elements": {"l2": {"size_bytes": {"value": 1 << 20}}}}))
    data = bw.run(backend, sweep, device=None, inputs={"cache_stage1": str(stage1)})
    l2 = analyse(data, provenance={"device": "gpu"})["elements"]["l2"]
    assert l2["near_read_bandwidth_gbps"]["value"] == pytest.approx(600, rel=0.02)
    assert l2["read_bandwidth_gbps"]["value"] == pytest.approx(900, rel=0.02)
    # without the near rate both footprints read the L2's
    del profile["throughput"]["l2_near_read_peak_gbps"]
    path.write_text(yaml.safe_dump(profile))
    backend = SimBackend(profile_path=path, seed=11)
    backend.load_handlers()
    data = bw.run(backend, sweep, device=None, inputs={"cache_stage1": str(stage1)})
    l2 = analyse(data, provenance={"device": "gpu"})["elements"]["l2"]
    assert l2["near_read_bandwidth_gbps"]["value"] == pytest.approx(900, rel=0.02)
