"""The L1/shared carveout (sim/carveout.py): the driver's partition rule against the H100's
measured L1 sizes, a sim device whose L1 follows its carveout through `l1_size`, the twin's
carveout block and its agreement rows, and bad blocks refused with the key."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from gpudissect.backends.sim import SimBackend
from gpudissect.config import load as load_config
from gpudissect.exceptions import ConfigError, ProfileError
from gpudissect.sim.carveout import CarveoutSpec
from gpudissect.sim.profile import load_profile
from gpudissect.twin.agreement import compare_topologies
from gpudissect.twin.carveout import SHARED_STEPS_KIB, carveout_block
from gpudissect.twin.reading import TopologyReader

REPO = Path(__file__).resolve().parents[2]
UNSEEN = REPO / "tests/data/unseen_carveout.yaml"
KIB = 1024

# The H100's L1 as `l1_size` measured it on the GPU, three runs each, identical
# (results/reference/FINDINGS.md, `h100/hand_ranges`): (carveout %, shared buffer) -> bytes
H100_MEASURED = {
    (100, 16384): 21504,
    (100, 65536): 21504,
    (50, 16384): 119808,
    (50, 65536): 119808,
    (25, 16384): 189440,
    (25, 65536): 152576,
    (0, 16384): 222208,
    (0, 65536): 152576,
}


def test_one_measured_size_and_the_guides_partitions_predict_the_h100s_other_seven():
    steps = tuple(s * KIB for s in SHARED_STEPS_KIB["9.0"])
    probe = CarveoutSpec(
        "l1d", steps, data_plus_shared_bytes=steps[-1] + 1, block_reserved_bytes=1024
    )
    # the constant from the carveout-0 point alone, then every other point predicted
    total = H100_MEASURED[(0, 16384)] + probe.shared_partition_bytes(0, 16384)
    spec = CarveoutSpec("l1d", steps, data_plus_shared_bytes=total, block_reserved_bytes=1024)
    predicted = {k: spec.l1_data_bytes(*k) for k in H100_MEASURED}
    assert predicted == H100_MEASURED
    # the driver's facts the rule implies are the H100's and H200's: 228 KiB per SM, 227 per block
    assert (spec.max_shared_bytes, spec.max_shared_per_block_bytes) == (233472, 232448)


def test_the_partition_is_the_smallest_step_holding_the_preference_and_the_block():
    spec = CarveoutSpec(
        "l1d", (0, 8192, 32768), data_plus_shared_bytes=65536, block_reserved_bytes=1024
    )
    assert spec.shared_partition_bytes(None, 0) == 0  # no preference, no shared memory
    assert spec.shared_partition_bytes(None, 7168) == 8192  # 7 KiB + 1 KiB reserve fit 8 KiB
    assert spec.shared_partition_bytes(None, 7169) == 32768
    assert spec.shared_partition_bytes(1, 0) == 8192  # 1 % of 32 KiB rounds up to a step
    assert spec.shared_partition_bytes(100, 0) == 32768
    with pytest.raises(ValueError, match="at most 31744 B per block"):
        spec.shared_partition_bytes(0, 32000)


@pytest.mark.parametrize(
    "block, match",
    [
        ({"shared_steps_bytes": [8192, 0]}, "ascending"),
        ({"data_plus_shared_bytes": 167936}, "leaves no L1"),
        ({"cache": "l1x"}, "carveout.cache: 'l1x' is not a cache"),
        ({"block_reserved_bytes": 10**6}, "block_reserved_bytes"),
    ],
)
def test_a_bad_carveout_block_is_refused_naming_the_key(tmp_path, block, match):
    doc = yaml.safe_load(UNSEEN.read_text())
    doc["carveout"].update(block)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ProfileError, match=match):
        load_profile(path)


def _config(tmp_path, profile: Path, carveouts=(100, 50, 0)) -> Path:
    cfg = {
        "devices": [
            {"name": "dev", "backend": "sim", "profile": str(profile), "carveouts": list(carveouts)}
        ],
        "experiments": {
            "l1_size": {
                "path": "ca",
                "stride_bytes": 128,
                "shared_buffer_bytes": [16384, 65536],
                "max_record_steps": 1024,
            }
        },
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_carveouts_on_a_sim_device_need_a_profile_with_a_carveout_block(tmp_path):
    doc = yaml.safe_load(UNSEEN.read_text())
    del doc["carveout"]
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match=r"devices\[0\]\.carveouts: the profile .* no carveout"):
        load_config(_config(tmp_path, plain))
    assert load_config(_config(tmp_path, UNSEEN)).devices[0].carveouts == (100, 50, 0)


def test_the_driver_facts_of_a_twin_with_a_carveout_are_its_largest_partition():
    facts = SimBackend(profile_path=UNSEEN).facts()
    assert (facts.shared_per_sm_bytes, facts.shared_per_block_optin_bytes) == (167936, 166912)


def test_l1_size_on_an_unseen_sim_device_reads_the_l1_its_carveout_leaves(tmp_path):
    from gpudissect.cli import main

    config, trace, result = _config(tmp_path, UNSEEN), tmp_path / "l1.parquet", tmp_path / "r.json"
    run = ["run", "--config", str(config), "--device", "dev", "--experiment", "l1_size"]
    assert main([*run, "--out", str(trace)]) == 0
    assert main(["analyze", "--trace", str(trace), "--out", str(result)]) == 0
    doc = json.loads(result.read_text())
    got = {
        (s["carveout_pct"], s["shared_buffer_bytes"]): s["l1d"]["size_bytes"] for s in doc["series"]
    }
    # 192 KiB less the compute capability 8.0 partition each launch gets (worked by hand):
    # 100 % -> 164 KiB; 50 % = 82 KiB -> 100 KiB; 0 % beside 16 KiB + 1 KiB -> 32 KiB and
    # beside 64 KiB + 1 KiB -> 100 KiB
    expected = {
        (100, 16384): 28672,
        (100, 65536): 28672,
        (50, 16384): 94208,
        (50, 65536): 94208,
        (0, 16384): 163840,
        (0, 65536): 94208,
    }
    for key, size in expected.items():
        entry = got[key]
        assert entry.get("value") is not None, (key, entry)
        # within one sweep step of the L1 the carveout leaves
        assert (
            0 <= entry["value"] - size + entry["resolution_bytes"] <= 2 * entry["resolution_bytes"]
        ), (key, entry)


def _h200_topology() -> dict:
    return json.loads((REPO / "results/reference/h200/topology/gpu0.json").read_text())


def test_the_twin_reads_the_carveout_block_from_the_gpus_l1_per_carveout():
    block, why = carveout_block(TopologyReader(_h200_topology()))
    assert why == "" and block["shared_steps_bytes"][-1] == 233472
    measured = {
        (p["carveout_pct"], p["shared_buffer_bytes"]): p["value"]
        for p in _h200_topology()["elements"]["l1d"]["size_bytes"]["by_carveout"]
    }
    spec = CarveoutSpec(
        "l1d",
        tuple(block["shared_steps_bytes"]),
        block["data_plus_shared_bytes"],
        block["block_reserved_bytes"],
    )
    for key, value in measured.items():  # every measured point within the 128-B sweep step
        assert abs(spec.l1_data_bytes(*key) - value) <= 128, key


def test_an_h100_unit_two_lines_off_the_rule_at_one_carveout_still_gets_the_block():
    # GPU-6cdfae92's run read 120064 B at 50% on both buffers, 256 B (two lines) above the size
    # the other six points' constant gives: the h100 reference with its 50% points put there
    # keeps the block and the constant the other points give
    topo = copy.deepcopy(
        json.loads((REPO / "results/reference/h100/topology/gpu0.json").read_text())
    )
    points = topo["elements"]["l1d"]["size_bytes"]["by_carveout"]
    block, why = carveout_block(TopologyReader(topo))
    assert why == ""
    spec = CarveoutSpec(
        "l1d",
        tuple(block["shared_steps_bytes"]),
        block["data_plus_shared_bytes"],
        block["block_reserved_bytes"],
    )
    for p in points:
        rule = spec.l1_data_bytes(p["carveout_pct"], p["shared_buffer_bytes"])
        assert abs(p["value"] - rule) <= 128  # the reference itself: within the sweep's step
        if p["carveout_pct"] == 50:
            p["value"] = rule + 256
    off, why = carveout_block(TopologyReader(topo))
    assert why == "" and off["data_plus_shared_bytes"] == block["data_plus_shared_bytes"]
    assert "within 256 B" in off["cite"]["data_plus_shared_bytes"]


def test_sizes_the_partitions_do_not_explain_give_no_carveout_block():
    topo = copy.deepcopy(_h200_topology())
    points = topo["elements"]["l1d"]["size_bytes"]["by_carveout"]
    points[0]["value"] += 8192  # one point 8 KiB off the rule
    block, why = carveout_block(TopologyReader(topo))
    assert block is None and "do not explain them" in why
    topo["driver"]["shared_memory_per_sm_bytes"] = 100 * KIB
    assert "not the largest partition" in carveout_block(TopologyReader(topo))[1]


def test_the_agreement_compares_the_l1_at_every_carveout_measured():
    gpu = _h200_topology()
    twin = copy.deepcopy(gpu)
    twin["sources"] = [{"experiment": "l1_size"}, {"experiment": "cache_stage1"}]
    points = twin["elements"]["l1d"]["size_bytes"]["by_carveout"]
    points[0]["value"] = 40000  # the twin reads one carveout far off
    doc = compare_topologies(gpu, twin)
    rows = {r["quantity"]: r for r in doc["rows"] if r["quantity"].startswith("size_bytes at")}
    assert len(rows) == len(points)
    pct, buffer = points[0]["carveout_pct"], points[0]["shared_buffer_bytes"]
    first = f"size_bytes at carveout {pct}% beside {buffer} B of shared memory"
    assert rows[first]["status"] == "differ"
    assert sum(r["status"] == "agree" for r in rows.values()) == len(points) - 1
