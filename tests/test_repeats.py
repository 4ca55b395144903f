"""Repeats of a whole run (config key `repeats`): the comparison of hand-made analysis documents
(a structural value that differs is flagged and undetermined in the topology, a latency that
differs gets its spread), the repeat paths and seeds, clock flags, and a tiny pipeline run with
`repeats: 2`."""

import json
from pathlib import Path

import pytest

from gpudissect.analysis.common.result import quantity
from gpudissect.analysis.timing.clocks import reason_names, sweep_clocks
from gpudissect.config import parse
from gpudissect.exceptions import ConfigError
from gpudissect.repeat_paths import repeat_of, repeat_path
from gpudissect.topology import build_topology, validate_topology
from gpudissect.topology.repeats import compare_repeats

REPO = Path(__file__).resolve().parents[1]


def l2_doc(size_bytes, hit_cycles, line_bytes=128):
    q = lambda v, unit: quantity(v, unit=unit, confidence=0.9, method="m", evidence="e")  # noqa: E731
    return {
        "device": "d",
        "analysis": "l2",
        "device_info": {"backend": "sim", "name": "hand-made"},
        "elements": {
            "l2": {
                "size_bytes": q(size_bytes, "bytes"),
                "line_bytes": q(line_bytes, "bytes"),
                "hit_latency_cycles": q(hit_cycles, "cycles"),
            }
        },
    }


def write(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_a_structural_value_that_differs_is_flagged_and_undetermined_in_the_topology(tmp_path):
    # three repeats: the L2 size reads 4 MiB, 4 MiB and 3 MiB (no average: it does not repeat);
    # the line repeats; the hit latency reads 200, 210 and 206 cycles: spread 200 / 206 / 210
    paths = [
        write(tmp_path, "l2.json", l2_doc(4 << 20, 200.0)),
        write(tmp_path, "l2.r2.json", l2_doc(4 << 20, 210.0)),
        write(tmp_path, "l2.r3.json", l2_doc(3 << 20, 206.0)),
    ]
    doc = compare_repeats("d", paths)
    by_q = {q["quantity"]: q for q in doc["quantities"]}
    assert doc["repeats"] == 3
    assert by_q["size_bytes"]["kind"] == "structural"
    assert by_q["size_bytes"]["status"] == "does not repeat"
    assert [r["value"] for r in by_q["size_bytes"]["readings"]] == [4 << 20, 4 << 20, 3 << 20]
    assert by_q["line_bytes"]["repeats"] and "status" not in by_q["line_bytes"]
    hit = by_q["hit_latency_cycles"]
    assert hit["kind"] == "measured"
    assert hit["spread"] == {"min": 200.0, "median": 206.0, "max": 210.0, "determined_in": 3}
    assert doc["does_not_repeat"] == ["l2.size_bytes (l2 /elements/l2/size_bytes)"]

    topo = build_topology("d", paths[:1], ("l2",), repeats=doc)
    validate_topology(topo)
    size = topo["elements"]["l2"]["size_bytes"]
    assert size["value"] is None
    assert size["undetermined"] == (
        "does not repeat over 3 repeats (r1: 4194304; r2: 4194304; r3: 3145728)"
    )
    assert topo["elements"]["l2"]["line_bytes"]["value"] == 128
    latency = topo["elements"]["l2"]["hit_latency_cycles"]
    assert latency["value"] == 200.0 and latency["repeat_spread"]["median"] == 206.0
    assert topo["repeats"]["does_not_repeat"] == doc["does_not_repeat"]


def test_a_value_undetermined_in_one_repeat_does_not_repeat(tmp_path):
    undet = l2_doc(4 << 20, 200.0)
    undet["elements"]["l2"]["line_bytes"] = {"value": None, "undetermined": "no step"}
    doc = compare_repeats(
        "d",
        [write(tmp_path, "l2.json", l2_doc(4 << 20, 200.0)), write(tmp_path, "l2.r2.json", undet)],
    )
    line = next(q for q in doc["quantities"] if q["quantity"] == "line_bytes")
    assert line["status"] == "does not repeat"
    assert line["readings"][1] == {"repeat": 2, "value": None, "undetermined": "no step"}


def test_repeat_paths_and_seeds():
    assert repeat_path("results/traces/gpu0/l2.parquet", 1) == "results/traces/gpu0/l2.parquet"
    assert repeat_path("results/traces/gpu0/l2.parquet", 3) == "results/traces/gpu0/l2.r3.parquet"
    assert repeat_of("results/analysis/gpu0/l2.r12.json") == 12
    assert repeat_of("results/analysis/gpu0/l2.json") == 1
    raw = {"devices": [{"name": "t", "backend": "sim", "profile": "tests/data/tiny_profile.yaml"}]}
    cfg = parse(raw | {"repeats": 3}, base_dir=REPO)
    d = cfg.devices[0]
    assert cfg.repeats == 3 and parse(raw, base_dir=REPO).repeats == 1
    assert d.for_repeat(1) is d
    seeds = {d.seed, d.for_repeat(2).seed, d.for_repeat(3).seed}
    assert len(seeds) == 3 and d.for_repeat(2).seed == d.for_repeat(2).seed


@pytest.mark.parametrize(
    ("value", "says"),
    [(0, "repeats: 0 is out of range; allowed: minimum 1"), ("two", "repeats: got 'two'")],
)
def test_repeats_must_be_a_positive_integer(value, says):
    raw = {"devices": [{"name": "t", "backend": "sim", "profile": "tests/data/tiny_profile.yaml"}]}
    with pytest.raises(ConfigError, match=says):
        parse(raw | {"repeats": value}, base_dir=REPO)


def test_sweep_clocks_flag_a_changed_clock_and_throttle_reasons():
    idle = {"sm_clock_mhz": 1980, "memory_clock_mhz": 2619, "clock_event_reasons": 0x1}
    steady = sweep_clocks({"backend": "cuda", "clocks_before": idle, "clocks_after": idle})
    assert not steady["flagged"] and steady["clock_event_reasons"] == ["gpu_idle"]
    # 0x4 | 0x20: software power cap and thermal slowdown after the sweep, the SM clock lower
    hot = {"sm_clock_mhz": 1755, "memory_clock_mhz": 2619, "clock_event_reasons": 0x24}
    flagged = sweep_clocks({"backend": "cuda", "clocks_before": idle, "clocks_after": hot})
    assert flagged["flagged"] and flagged["clock_changed"] and flagged["throttled"]
    assert "sm_clock_mhz: 1980 -> 1755" in flagged["note"]
    assert "sw_power_cap, sw_thermal_slowdown" in flagged["note"]
    assert reason_names(0x1000 | 0x8) == ["hw_slowdown", "0x1000"]
    # steady before and after, but one point read a lower SM clock: flagged by its points
    import pandas as pd

    points = pd.DataFrame({"sm_clock_mhz": [1980.0, 1980.0, 1830.0, float("nan")]})
    prov = {"backend": "cuda", "clocks_before": idle, "clocks_after": idle}
    dipped = sweep_clocks(prov, points)
    assert dipped["flagged"] and dipped["points_sm_clock_mhz"] == {
        "min": 1830.0,
        "max": 1980.0,
        "points": 3,
    }
    assert not sweep_clocks(prov, points.iloc[:2])["flagged"]
    assert sweep_clocks({"backend": "sim", "clocks_before": idle}) is None


def test_report_section_lists_flagged_values_and_spreads(tmp_path):
    from gpudissect.report.sections_repeatability import repeatability_section

    paths = [
        write(tmp_path, "l2.json", l2_doc(4 << 20, 200.0)),
        write(tmp_path, "l2.r2.json", l2_doc(3 << 20, 210.0)),
    ]
    lines = "\n".join(repeatability_section({}, compare_repeats("d", paths)))
    assert "1 do not repeat" in lines
    assert "| l2.size_bytes | l2 | r1: 4194304; r2: 3145728 |" in lines
    assert "| l2.hit_latency_cycles | l2 | 200 cycles | 205 | 210 | 2 of 2 |" in lines


@pytest.mark.slow
def test_a_run_with_two_repeats_writes_both_and_the_repeats_document(tmp_path):
    import shutil
    import subprocess
    import sys

    from gpudissect.traces import read_trace

    for item in ("Snakefile", "workflow", "config", "kernels", "envs", "tests/data"):
        src, dst = REPO / item, tmp_path / item
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, dst)
    targets = ["results/analysis/tiny/repeats.json", "results/topology/tiny.json"]
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", *targets, "--cores", "2"]
        + ["--configfile", "tests/data/tiny_repeats_config.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    first = read_trace(tmp_path / "results/traces/tiny/l1_size.parquet")
    second = read_trace(tmp_path / "results/traces/tiny/l1_size.r2.parquet")
    assert "repeat" not in first.provenance and second.provenance["repeat"] == 2
    assert first.provenance["device_info"]["seed"] == 7
    assert second.provenance["device_info"]["seed"] != 7  # the repeat is seeded apart
    assert (tmp_path / "results/analysis/tiny/l1_size.r2.json").is_file()
    doc = json.loads((tmp_path / "results/analysis/tiny/repeats.json").read_text())
    assert doc["repeats"] == 2 and doc["quantities"]
    assert {r["repeat"] for q in doc["quantities"] for r in q["readings"]} == {1, 2}
    topo = json.loads((tmp_path / "results/topology/tiny.json").read_text())
    assert topo["repeats"]["repeats"] == 2


@pytest.mark.gpu
def test_gpu_clock_record_holds_the_clocks_and_the_clock_event_reasons():
    from gpudissect.backends.cuda import CudaBackend

    with CudaBackend(index=0) as b:
        before = b.clock_record()
        after = b.clock_record()
    assert set(before) == {"sm_clock_mhz", "memory_clock_mhz", "clock_event_reasons"}
    record = sweep_clocks({"backend": "cuda", "clocks_before": before, "clocks_after": after})
    if before["clock_event_reasons"] is not None:  # NVML answers on every GPU host we use
        assert isinstance(before["clock_event_reasons"], int)
        assert isinstance(record["clock_event_reasons"], list)
    assert isinstance(record["flagged"], bool) and record["note"]
