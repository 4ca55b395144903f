"""The topology's headline L1 size is the largest L1 a kernel gets: the reading at the smallest
shared partition measured, per-carveout series points included; and the bandwidth readings in
the topology and in MT4G's form."""

import json

from gpudissect.families import FAMILIES
from gpudissect.topology import build_topology, to_mt4g, validate_topology

REGISTRY = tuple(FAMILIES)
KIB = 1024


def _q(value, unit="bytes", method="m"):
    return {"value": value, "unit": unit, "confidence": 1.0, "method": method, "evidence": "e"}


def _doc(tmp_path, experiment, elements, **extra):
    path = tmp_path / f"{experiment}.json"
    path.write_text(json.dumps({"analysis": experiment, "elements": elements, **extra}))
    return str(path)


def _l1_size(tmp_path, points):
    series = [
        {"carveout_pct": c, "shared_buffer_bytes": b, "l1d": {"size_bytes": _q(v)}}
        for c, b, v in points
    ]
    first = series[0]["l1d"]["size_bytes"]
    return _doc(
        tmp_path,
        "l1_size",
        {"l1d": {"size_bytes": first, "carveout_pct": points[0][0]}},
        series=series,
    )


def test_the_point_beside_the_smallest_shared_buffer_is_the_headline(tmp_path):
    # stage 1 measured at carveout 0 beside a 64 KiB buffer (152 KiB); l1_size's series has
    # carveout 0 beside 16 KiB (217 KiB): the smaller partition leaves the larger L1
    stage1 = _doc(
        tmp_path,
        "cache_stage1",
        {"l1d": {"size_bytes": _q(152 * KIB)}},
        carveout_pct=[0],
        shared_buffer_bytes=65536,
    )
    l1 = _l1_size(tmp_path, [(100, 16384, 21 * KIB), (0, 16384, 217 * KIB), (0, 65536, 152 * KIB)])
    doc = build_topology("d", [stage1, l1], REGISTRY)
    entry = doc["elements"]["l1d"]["size_bytes"]
    assert entry["value"] == 217 * KIB
    assert (entry["carveout_pct"], entry["shared_buffer_bytes"]) == (0, 16384)
    assert entry["source"] == "/series/1/l1d/size_bytes"
    assert "smallest shared partition" in entry["headline"]
    assert "timing records in shared memory" in entry["headline"]
    assert len(entry["by_carveout"]) == 3  # every per-carveout size stays beside it
    stage1_reading = next(r for r in entry["other_readings"] if r["experiment"] == "cache_stage1")
    # beside another shared buffer: another L1 partition, listed but not compared
    assert stage1_reading["value"] == 152 * KIB and stage1_reading["agrees"] is None
    assert "another shared buffer" in stage1_reading["note"]
    validate_topology(doc)


def test_the_lowest_carveout_wins_over_the_experiment_order(tmp_path):
    # stage 1 (first in the L1's precedence) ran at carveout 100 only: the headline is the
    # series point at carveout 0
    stage1 = _doc(
        tmp_path,
        "cache_stage1",
        {"l1d": {"size_bytes": _q(21 * KIB)}},
        carveout_pct=[100],
        shared_buffer_bytes=16384,
    )
    l1 = _l1_size(tmp_path, [(100, 16384, 21 * KIB), (0, 16384, 217 * KIB)])
    entry = build_topology("d", [stage1, l1], REGISTRY)["elements"]["l1d"]["size_bytes"]
    assert (entry["value"], entry["carveout_pct"]) == (217 * KIB, 0)


def test_at_equal_partitions_the_experiment_order_decides(tmp_path):
    stage1 = _doc(
        tmp_path,
        "cache_stage1",
        {"l1d": {"size_bytes": _q(217 * KIB, method="stage 1")}},
        carveout_pct=[0],
        shared_buffer_bytes=16384,
    )
    l1 = _l1_size(tmp_path, [(0, 16384, 216 * KIB)])
    entry = build_topology("d", [stage1, l1], REGISTRY)["elements"]["l1d"]["size_bytes"]
    assert entry["experiment"] == "cache_stage1" and entry["value"] == 217 * KIB


def test_without_a_carveout_the_plain_rule_holds(tmp_path):
    # the simulator records no carveout: no headline rule, the element's precedence decides
    stage1 = _doc(tmp_path, "cache_stage1", {"l1d": {"size_bytes": _q(64 * KIB)}})
    l1 = _doc(tmp_path, "l1_size", {"l1d": {"size_bytes": _q(60 * KIB)}})
    entry = build_topology("d", [stage1, l1], REGISTRY)["elements"]["l1d"]["size_bytes"]
    assert entry["value"] == 64 * KIB and "headline" not in entry


def test_bandwidths_reach_the_topology_and_mt4g_fields(tmp_path):
    q = {**_q(6000.0, unit="GiB/s"), "ctas_per_sm_at_peak": 4, "ceiling": "none known"}
    bw = _doc(
        tmp_path,
        "bandwidth",
        {
            "l2": {"read_bandwidth_gibps": q, "write_bandwidth_gibps": {**q, "value": 3600.0}},
            "dram": {"read_bandwidth_gibps": {**q, "value": 2800.0}},
            "l1d": {"read_bandwidth_gibps": {**q, "value": 30000.0}},
        },
        carveout_pct=0,
    )
    doc = build_topology("d", [bw], REGISTRY)
    validate_topology(doc)
    assert doc["elements"]["l2"]["read_bandwidth_gibps"]["experiment"] == "bandwidth"
    assert doc["elements"]["l1d"]["read_bandwidth_gibps"]["carveout_pct"] == 0
    mt4g = to_mt4g(doc)
    assert mt4g["memory"]["l2"]["readBandwidth"] == {
        "confidence": 1.0,
        "method": "m",
        "unit": "GiB/s",
        "value": 6000.0,
    }
    assert mt4g["memory"]["l2"]["writeBandwidth"]["value"] == 3600.0
    assert mt4g["memory"]["main"]["readBandwidth"]["value"] == 2800.0
    # MT4G's H100 form has no L1 bandwidth field: it stays in this project's names
    unmapped = mt4g["gpudissect"]["quantities_without_mt4g_field"]
    assert unmapped["l1d"]["read_bandwidth_gibps"]["value"] == 30000.0


def test_the_topology_table_names_the_shared_memory_beside_the_l1(tmp_path):
    from gpudissect.report.topology_table import topology_table

    stage1 = _doc(
        tmp_path,
        "cache_stage1",
        {"l1d": {"size_bytes": _q(217 * KIB)}},
        carveout_pct=[0],
        shared_buffer_bytes=16384,
    )
    table = topology_table(build_topology("d", [stage1], REGISTRY))
    assert table.rows[0][1] == "217 KiB @0% beside 16 KiB shared"
    assert "beside X shared" in table.notes[0]
    none = _doc(tmp_path, "bandwidth", {"l1d": {"size_bytes": _q(240 * KIB)}}, carveout_pct=0)
    with open(none) as f:
        doc = json.load(f)
    doc["shared_buffer_bytes"] = 0
    with open(none, "w") as f:
        json.dump(doc, f)
    table = topology_table(build_topology("d", [stage1, none], REGISTRY))
    assert table.rows[0][1] == "240 KiB @0%, no shared"
