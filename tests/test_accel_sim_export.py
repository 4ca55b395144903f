"""`gpudissect export --format accel-sim`: the output parses as gpgpusim.config options, every
option follows a comment that cites its source, the cache geometries multiply out to the measured
sizes, and what the topology does not determine is listed for the user."""

import json
import re
from pathlib import Path

import pytest

from gpudissect.cli import main

REPO = Path(__file__).resolve().parents[1]
# GPGPU-Sim's cache option: <N|S>:<sets>:<line>:<ways>,<rep>:<write>:<alloc>:<write alloc>:
# <set index>,<mshr type>:<entries>:<merge>,<miss queue>:<result fifo>
CACHE = re.compile(
    r"^(?P<kind>[NS]):(?P<sets>\d+):(?P<line>\d+):(?P<ways>\d+),"
    r"(?P<rep>[LF]):[RBTEL]:[mfs]:[NWFL]:[LHPCX],[AFTS]:\d+:\d+,\d+:\d+$"
)


def _parse(text):
    """{option: value}, and the comment above each option."""
    options, comments, previous = {}, {}, None
    for line in text.splitlines():
        if line.startswith("-"):
            name, value = line.split(None, 1)
            assert name not in options, f"{name} twice"
            options[name] = value
            comments[name] = previous
        previous = line if line.startswith("# ") else None
    left = text.split("# Left for the user:", 1)[1]
    return options, comments, left


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_the_export_of_a_reference_topology_parses_and_cites_every_option(gpu, tmp_path, capsys):
    topo_path = REPO / f"results/reference/{gpu}/topology/gpu0.json"
    topo = json.loads(topo_path.read_text())
    el, driver = topo["elements"], topo["driver"]
    line_bytes = el["l2"]["line_bytes"]["value"]
    l2_lines = el["l2"]["size_bytes"]["value"] // line_bytes
    # a slice count that divides the L2's lines into 16-way sets (the export's default ways)
    slices = next(n for n in (80, 60, 64, 40) if l2_lines % (16 * n) == 0)
    out = tmp_path / "gpgpusim.config"
    argv = ["export", "--format", "accel-sim", "--topology", str(topo_path)]
    assert main([*argv, "--l2-slices", str(slices), "--out", str(out)]) == 0
    options, comments, left = _parse(out.read_text())
    assert all(c and re.match(r"# (measured|driver|derived|one SM)", c) for c in comments.values())
    assert options["-gpgpu_n_clusters"] == str(driver["sm_count"])
    assert options["-gpgpu_shader_core_pipeline"] == f"{driver['max_threads_per_sm']}:32"
    for option, element, per in (
        ("-gpgpu_cache:dl1", "l1d", 1),
        ("-gpgpu_const_cache:l1", "constant_l1", 1),
        ("-gpgpu_cache:dl2", "l2", slices),
    ):
        m = CACHE.match(options[option])
        assert m, options[option]
        size = int(m["sets"]) * int(m["line"]) * int(m["ways"]) * per
        sets, ways = (el[element].get(q, {}).get("value") for q in ("sets", "ways_per_set"))
        if sets and ways and len(set(ways)) == 1:
            # the measured geometry: the sets and ways the eviction sets found
            assert (int(m["sets"]), int(m["ways"])) == (sets, ways[0])
            assert size == sets * ways[0] * el[element]["line_bytes"]["value"]
            assert "ASSUMED" not in comments[option].split("replacement")[0]
        else:
            assert size == el[element]["size_bytes"]["value"]
            assert "ASSUMED" in comments[option]  # the run measured no ways for this cache
        assert int(m["line"]) == el[element]["line_bytes"]["value"]
        # the sector, else the fetch granularity standing in for it
        sector = el[element]["sector_bytes"].get("value") or (
            el[element].get("fetch_granularity_bytes") or {}
        ).get("value")
        sectored = sector == 32 and int(m["line"]) == 128
        assert m["kind"] == ("S" if sectored else "N")

    def latency(element, key="hit_latency_cycles"):
        entry = el[element][key]
        # the calibrated value where the run calibrated it (a run without timing_overhead
        # leaves it None), else the raw one
        calibrated = entry.get("calibrated_value")
        return entry["value"] if calibrated is None else calibrated

    assert options["-gpgpu_l1_latency"] == str(round(latency("l1d")))
    assert options["-gpgpu_shmem_num_banks"] == str(el["shared"]["banks"]["value"])
    l2 = el["l2"]
    # the L2's miss minus its hit latency, both calibrated where the run calibrated them (the
    # overhead cancels, but the two differences round apart at a half: 689.0 - 292.5 = 396.5,
    # 671.21 - 274.71 = 396.50000000000006)
    assert options["-dram_latency"] == str(
        round(latency("l2", "miss_latency_cycles") - latency("l2"))
    )
    assert "-gpgpu_clock_domains" in left
    measured_slices = l2.get("slices", {}).get("value")
    assert "-gpgpu_n_mem" in left  # given on the command line, or not measured
    # without --l2-slices the L2's sets follow the measured slice count, or are left to the user
    assert main(argv) == 0
    options, _, left = _parse(capsys.readouterr().out)
    if measured_slices:
        assert options["-gpgpu_n_mem"] == str(measured_slices)
    else:
        assert "-gpgpu_n_mem" in left
    lines = l2["size_bytes"]["value"] // line_bytes
    if measured_slices and lines % (16 * measured_slices) == 0:
        assert CACHE.match(options["-gpgpu_cache:dl2"])
    elif measured_slices:
        assert f"{lines} lines do not divide into 16 ways x {measured_slices} slices" in left
    else:
        assert "-gpgpu_cache:dl2" not in options and "-gpgpu_cache:dl2: its sets are per L2" in left


def test_export_refuses_a_slice_count_below_one(tmp_path, capsys):
    topo = str(REPO / "results/reference/h100/topology/gpu0.json")
    assert main(["export", "--topology", topo, "--l2-slices", "0"]) != 0
    assert "--l2-slices 0: allowed: a whole number >= 1" in capsys.readouterr().err
