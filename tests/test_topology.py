"""The topology document: gathering, the reconciliation rule, traceability, schema, MT4G form."""

import json
from pathlib import Path

import pytest

from gpudissect.families import FAMILIES
from gpudissect.topology import build_topology, to_mt4g, validate_topology
from gpudissect.topology.gather import resolve_pointer

REGISTRY = tuple(FAMILIES)
H100 = Path("results/reference/h100/analysis/gpu0")


def _q(value, unit="bytes", method="m", confidence=1.0):
    return {
        "value": value,
        "unit": unit,
        "confidence": confidence,
        "method": method,
        "evidence": "e",
    }


def _doc(tmp_path, experiment, elements, **extra):
    path = tmp_path / f"{experiment}.json"
    path.write_text(json.dumps({"analysis": experiment, "elements": elements, **extra}))
    return str(path)


def test_the_experiment_built_for_the_element_wins_and_the_other_reading_is_named(tmp_path):
    # the L2 path's first miss (cache_stage1) of a partitioned L2 is the near partition's
    # footprint: 23 MiB against the l2 family's 50 MiB whole and 24 MiB near partition
    stage1 = _doc(tmp_path, "cache_stage1", {"l2": {"size_bytes": _q(23 << 20, method="a")}})
    l2 = _doc(
        tmp_path,
        "l2",
        {"l2": {"size_bytes": _q(50 << 20, method="b"), "near_size_bytes": _q(24 << 20)}},
    )
    doc = build_topology("d", [stage1, l2], REGISTRY)
    size = doc["elements"]["l2"]["size_bytes"]
    assert size["value"] == 50 << 20 and size["experiment"] == "l2"
    (other,) = size["other_readings"]
    assert other["experiment"] == "cache_stage1" and other["agrees"] is False
    assert other["note"].startswith("a reading of l2.near_size_bytes")


def test_a_tlb_levels_entries_come_from_the_controlled_mapping_first(tmp_path):
    # the walks over a plain allocation read 1874 L2-TLB entries in one H100 run, 2046 in
    # another; the walks over the mapping the experiment made read 2051 in both. Only the
    # entries rank the controlled mapping first: the penalty keeps the registry order
    tlbs = _doc(
        tmp_path,
        "tlbs",
        {"l2_tlb": {"entries": _q(1874, "entries"), "miss_penalty_cycles": _q(103, "cycles")}},
    )
    mapped = _doc(
        tmp_path,
        "tlb_mappings",
        {"l2_tlb": {"entries": _q(2051, "entries"), "miss_penalty_cycles": _q(145, "cycles")}},
    )
    doc = build_topology("d", [tlbs, mapped], REGISTRY)
    entries = doc["elements"]["l2_tlb"]["entries"]
    assert (entries["value"], entries["experiment"]) == (2051, "tlb_mappings")
    (other,) = entries["other_readings"]
    assert (other["experiment"], other["value"], other["agrees"]) == ("tlbs", 1874, False)
    assert doc["elements"]["l2_tlb"]["miss_penalty_cycles"]["experiment"] == "tlbs"
    assert doc["reconciliation"]["precedence"]["l2_tlb.entries"] == ["tlb_mappings", "tlbs"]
    validate_topology(doc)


def test_an_identical_carried_value_is_named_not_compared(tmp_path):
    a = _doc(tmp_path, "cache_stage1", {"l1d": {"line_bytes": _q(128)}})
    b = _doc(tmp_path, "caches", {"l1d": {"line_bytes": _q(128)}})
    entry = build_topology("d", [b, a], REGISTRY)["elements"]["l1d"]["line_bytes"]
    assert entry["experiment"] == "cache_stage1"
    assert [x["experiment"] for x in entry["also_in"]] == ["caches"]
    assert "other_readings" not in entry


def test_readings_within_three_percent_agree_and_farther_ones_do_not(tmp_path):
    a = _doc(tmp_path, "cache_stage1", {"l1d": {"hit_latency_cycles": _q(100.0, "cycles", "x")}})
    b = _doc(tmp_path, "l1_size", {"l1d": {"hit_latency_cycles": _q(102.0, "cycles", "y")}})
    c = _doc(tmp_path, "caches", {"l1d": {"hit_latency_cycles": _q(110.0, "cycles", "z")}})
    entry = build_topology("d", [a, b, c], REGISTRY)["elements"]["l1d"]["hit_latency_cycles"]
    agree = {o["experiment"]: o["agrees"] for o in entry["other_readings"]}
    assert agree == {"caches": False, "l1_size": True}


def test_sizes_whose_resolution_intervals_overlap_agree_and_disjoint_ones_do_not(tmp_path):
    # the footprint sweep brackets the L2 in [2, 2.5) MiB; a flushed copy reading 2.125 MiB
    # with a 64 KiB step lies inside it, one reading 2.625 MiB does not (both 6% and more
    # from 2 MiB: the relative rule alone would call both disagreements)
    l2 = _doc(
        tmp_path, "l2", {"l2": {"size_bytes": _q(2 << 20) | {"bracket_bytes": [2 << 20, 5 << 19]}}}
    )
    for value, agrees, by in (
        (17 << 17, True, "resolution"),
        (21 << 17, False, "beyond resolution"),
    ):
        flush = _doc(
            tmp_path,
            "l2_flush",
            {"l2": {"size_bytes": _q(value, method="f") | {"resolution_bytes": 1 << 16}}},
        )
        (other,) = build_topology("d", [l2, flush], REGISTRY)["elements"]["l2"]["size_bytes"][
            "other_readings"
        ]
        assert (other["value"], other["agrees"], other["agrees_by"]) == (value, agrees, by)
        assert other["resolution_bytes"] == 1 << 16
    # without a resolution on one side the relative rule decides
    flush = _doc(tmp_path, "l2_flush", {"l2": {"size_bytes": _q(17 << 17, method="f")}})
    (other,) = build_topology("d", [l2, flush], REGISTRY)["elements"]["l2"]["size_bytes"][
        "other_readings"
    ]
    assert (other["agrees"], other["agrees_by"]) == (False, "beyond 3%")


def test_an_undetermined_first_choice_gives_way_to_a_determined_reading(tmp_path):
    l2 = _doc(tmp_path, "l2", {"l2": {"size_bytes": {"value": None, "undetermined": "why"}}})
    flush = _doc(tmp_path, "l2_flush", {"l2": {"size_bytes": _q(1 << 20)}})
    entry = build_topology("d", [l2, flush], REGISTRY)["elements"]["l2"]["size_bytes"]
    assert entry["value"] == 1 << 20 and entry["experiment"] == "l2_flush"
    assert entry["other_readings"][0]["undetermined"] == "why"


def test_l1_values_at_other_carveouts_are_listed_not_compared(tmp_path):
    stage1 = _doc(
        tmp_path, "cache_stage1", {"l1d": {"size_bytes": _q(216 << 10)}}, carveout_pct=[0]
    )
    series = [
        {"carveout_pct": 100, "shared_buffer_bytes": 16384, "l1d": {"size_bytes": _q(12 << 10)}},
        {"carveout_pct": 0, "shared_buffer_bytes": 16384, "l1d": {"size_bytes": _q(216 << 10)}},
    ]
    l1 = _doc(
        tmp_path,
        "l1_size",
        {"l1d": {"size_bytes": _q(12 << 10), "carveout_pct": 100}},
        series=series,
    )
    entry = build_topology("d", [stage1, l1], REGISTRY)["elements"]["l1d"]["size_bytes"]
    assert entry["carveout_pct"] == 0 and entry["value"] == 216 << 10
    assert entry["other_readings"][0]["agrees"] is None
    assert [(p["carveout_pct"], p["value"]) for p in entry["by_carveout"]] == [
        (100, 12 << 10),
        (0, 216 << 10),
    ]


def test_a_miss_penalty_follows_the_experiment_of_the_latencies(tmp_path):
    stage1 = _doc(
        tmp_path,
        "cache_stage1",
        {
            "l2": {
                "miss_penalty_cycles": _q(274.0, "cycles"),
                "hit_latency_cycles": _q(306.0, "cycles"),
            }
        },
    )
    l2 = _doc(
        tmp_path,
        "l2",
        {
            "l2": {
                "hit_latency_cycles": _q(300.0, "cycles"),
                "miss_latency_cycles": _q(741.0, "cycles"),
            }
        },
    )
    entry = build_topology("d", [stage1, l2], REGISTRY)["elements"]["l2"]["miss_penalty_cycles"]
    assert entry["value"] == 441.0 and entry["experiment"] == "l2"
    assert entry["other_readings"][0]["value"] == 274.0


def test_one_populations_far_hit_and_miss_rank_before_the_pooled_plateaus(tmp_path):
    # a partitioned L2 whose partitions hold their home lines: the footprint sweep's far
    # plateau pools far hits (473) with near-homed DRAM misses (575), its DRAM plateau two miss
    # levels (575, 751); the split by the partition function gives each population's level
    pooled = {
        "hit_latency_cycles": _q(292.5, "cycles"),
        "far_hit_latency_cycles": _q(522.25, "cycles"),
        "miss_latency_cycles": _q(712.0, "cycles"),
    }
    l2 = _doc(tmp_path, "l2", {"l2": pooled})
    split = {
        "far_hit_latency_cycles": _q(473.0, "cycles"),
        "miss_latency_cycles": _q(575.15, "cycles"),
        "miss_penalty_cycles": _q(288.15, "cycles"),
    }
    slices = _doc(tmp_path, "l2_slices", {"l2": split})
    got = build_topology("d", [l2, slices], REGISTRY)["elements"]["l2"]
    for name, entry in split.items():
        assert (got[name]["value"], got[name]["experiment"]) == (entry["value"], "l2_slices")
    (other,) = got["miss_latency_cycles"]["other_readings"]
    assert (other["experiment"], other["value"], other["agrees"]) == ("l2", 712.0, False)
    assert got["hit_latency_cycles"]["experiment"] == "l2"
    # without the split's readings (no home lines, no partition function) the plateaus stand
    alone = build_topology("d", [l2], REGISTRY)["elements"]["l2"]
    assert alone["miss_latency_cycles"]["value"] == 712.0


def _check_traceable(doc):
    """Every value of the document is the value at its pointer in its analysis document (or
    the difference of two there, or the driver's fact there)."""
    cache: dict[str, dict] = {}

    def at(path, pointer):
        if path not in cache:
            cache[path] = json.loads(Path(path).read_text())
        return resolve_pointer(cache[path], pointer)

    checked = 0
    for element, quantities in doc["elements"].items():
        for name, entry in quantities.items():
            where = f"{element}.{name}"
            if entry.get("value") is None:
                continue
            if "derived_from" in entry:
                d = entry["derived_from"]
                a = at(entry["analysis"], d["minuend"])["value"]
                b = at(entry["analysis"], d["subtrahend"])["value"]
                assert entry["value"] == pytest.approx(a - b), where
            elif entry["experiment"] == "driver":
                assert at(entry["analysis"], entry["source"]) == entry["value"], where
            else:
                assert at(entry["analysis"], entry["source"])["value"] == entry["value"], where
            for other in entry.get("other_readings", []) + entry.get("by_carveout", []):
                assert at(other["analysis"], other["source"])["value"] == other["value"], where
            checked += 1
    return checked


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_the_committed_reference_topologies_validate_and_trace_back(gpu):
    doc = json.loads(Path(f"results/reference/{gpu}/topology/gpu0.json").read_text())
    validate_topology(doc)
    assert _check_traceable(doc) > 50
    assert doc["gpu"].startswith(f"NVIDIA {gpu.upper()}")


def test_every_value_of_the_h100_reference_topology_traces_back_to_an_analysis():
    docs = sorted(str(p) for p in H100.glob("*.json"))
    doc = build_topology("gpu0", docs, REGISTRY)
    validate_topology(doc)
    assert _check_traceable(doc) > 50
    # what the driver reports sits beside what was measured
    assert (
        doc["elements"]["l2"]["size_bytes"]["driver_value"] == doc["driver"]["l2_cache_size_bytes"]
    )
    assert doc["elements"]["dram"]["size_bytes"]["experiment"] == "driver"


def test_the_schema_refuses_a_quantity_without_its_source(tmp_path):
    docs = sorted(str(p) for p in H100.glob("*.json"))
    doc = build_topology("gpu0", docs, REGISTRY)
    del doc["elements"]["l2"]["size_bytes"]["source"]
    with pytest.raises(Exception, match="l2/size_bytes"):
        validate_topology(doc)


def test_the_mt4g_form_uses_mt4g_field_names_and_keeps_the_rest():
    docs = sorted(str(p) for p in H100.glob("*.json"))
    doc = build_topology("gpu0", docs, REGISTRY)
    m = to_mt4g(doc)
    l1 = m["memory"]["l1"]
    assert l1["size"]["size"] == doc["elements"]["l1d"]["size_bytes"]["value"]
    assert l1["lineSize"]["size"] == doc["elements"]["l1d"]["line_bytes"]["value"]
    fetch = doc["elements"]["l1d"]["fetch_granularity_bytes"]["value"]
    assert l1["fetchGranularity"]["size"] == fetch
    # MT4G has no field for the sector: it stays under gpudissect
    kept = m["gpudissect"]["quantities_without_mt4g_field"].get("l1d", {})
    assert "sector_bytes" in kept or "sector_bytes" in m["gpudissect"]["undetermined"]["l1d"]
    assert l1["latency"]["p50"] == doc["elements"]["l1d"]["hit_latency_cycles"]["value"]
    assert (
        m["memory"]["l2"]["segmentSize"]["size"]
        == doc["elements"]["l2"]["near_size_bytes"]["value"]
    )
    const_size = doc["elements"]["constant_l1"]["size_bytes"]["value"]
    assert m["memory"]["constant"]["l1"]["size"]["size"] == const_size
    assert m["general"]["computeCapability"] == {"major": 9, "minor": 0}
    assert m["compute"]["multiProcessorCount"] == doc["driver"]["sm_count"]
    # nothing is lost: quantities without an MT4G field and the undetermined stay, by our names
    assert "l2_tlb" in m["gpudissect"]["quantities_without_mt4g_field"]
    # the reference's L1: sets measured (no MT4G field), its bit-defined index undetermined
    # because the index is hashed (the masks kept beside it)
    sets = doc["elements"]["l1d"]["sets"]["value"]
    assert m["gpudissect"]["quantities_without_mt4g_field"]["l1d"]["sets"]["value"] == sets
    assert "hashed" in m["gpudissect"]["undetermined"]["l1d"]["set_index_bits"]


def test_the_topology_table_puts_paper_and_driver_values_beside_the_measured_ones():
    from gpudissect.report.topology_table import to_markdown, topology_table

    docs = sorted(str(p) for p in H100.glob("*.json"))
    doc = build_topology("gpu0", docs, REGISTRY)
    paper = {"l1d": {"line_bytes": {"value": 64, "cite": "x"}}}
    table = topology_table(doc, paper, "a paper")
    rows = {row[0]: row for row in table.rows}
    assert rows["L1 data"][2] == "128 B [64 B]"
    assert "(driver 50 MiB)" in rows["L2"][1]
    assert rows["Main memory"][1].endswith("(driver)")
    # main memory's latency is the L2's miss latency, read by the timed window (raw) and less
    # the window overhead timing_overhead measured (calibrated)
    miss = doc["elements"]["l2"]["miss_latency_cycles"]
    overhead = miss["calibration"]["window_overhead_cycles"]
    assert rows["Main memory"][3] == (
        f"{miss['value']:.0f} raw / {miss['value'] - overhead:.0f} calibrated"
    )
    assert len(to_markdown(table)) == 2 + len(table.rows) + 1 + len(table.notes)
