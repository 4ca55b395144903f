"""Whole runs compared (`gpudissect runs`, gpudissect/topology/runs.py): structural values that
are not the same in every run are undetermined with each run's reading, measured ones get their
spread, and the result is a topology document that validates."""

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpudissect.exceptions import GpuDissectError
from gpudissect.topology import validate_topology
from gpudissect.topology.runs import compare_runs

REPO = Path(__file__).resolve().parents[1]
# `gpudissect runs` over three H100 runs at 4c11c49 and their topologies (pipeline_run, run_g,
# run_h), once under results/reference/h100/ (results/reference/FINDINGS.md)
RUNS_4C11C49 = REPO / "tests/data/h100_runs_4c11c49"


def _topology(path):
    return json.loads(Path(path).read_text())


@pytest.fixture(scope="module")
def base():
    # one H100 run's topology (the runs' comparison below holds it as run_g)
    return _topology(RUNS_4C11C49 / "run_g.json")


def test_identical_runs_repeat_everything(base):
    doc = compare_runs([base, copy.deepcopy(base)], ["a", "b"])
    validate_topology(doc)
    assert doc["runs"]["does_not_repeat"] == []
    assert doc["elements"]["l1d"]["sets"]["value"] == base["elements"]["l1d"]["sets"]["value"]
    spread = doc["elements"]["l2"]["hit_latency_cycles"]["run_spread"]
    hit = base["elements"]["l2"]["hit_latency_cycles"]["value"]
    assert spread == {"min": hit, "median": hit, "max": hit, "determined_in": 2, "runs": 2}


def test_a_structural_value_that_moves_is_undetermined_with_every_reading(base):
    other = copy.deepcopy(base)
    entries = other["elements"]["l2_tlb"]["entries"]
    entries["value"] = (base["elements"]["l2_tlb"]["entries"]["value"] or 2048) - 2
    lost = other["elements"]["l1d"]["ways_per_set"]
    other["elements"]["l1d"]["ways_per_set"] = {"value": None, "undetermined": "no set verified"}
    other["elements"]["l2"]["hit_latency_cycles"]["value"] += 10.0  # measured: a spread only
    doc = compare_runs([base, other], ["first", "second"])
    validate_topology(doc)
    assert doc["runs"]["does_not_repeat"] == ["l1d.ways_per_set", "l2_tlb.entries"]
    got = doc["elements"]["l2_tlb"]["entries"]
    assert got["value"] is None and got["undetermined"].startswith("does not repeat over 2 runs")
    assert [r["value"] for r in got["readings"]] == [
        base["elements"]["l2_tlb"]["entries"]["value"],
        entries["value"],
    ]
    ways = doc["elements"]["l1d"]["ways_per_set"]
    assert ways["value"] is None and ways["readings"][0]["value"] == lost["value"] is not None
    missing = {"run": "second", "value": None, "undetermined": "no set verified"}
    assert ways["readings"][1] == missing
    hit = doc["elements"]["l2"]["hit_latency_cycles"]
    assert hit["value"] == base["elements"]["l2"]["hit_latency_cycles"]["value"]
    assert hit["run_spread"]["max"] - hit["run_spread"]["min"] == 10.0


def test_runs_of_other_gpus_or_a_single_run_are_refused(base):
    h200 = _topology(REPO / "results/reference/h200/topology/gpu0.json")
    with pytest.raises(GpuDissectError, match=r"different GPUs .*H100.*H200|different GPUs .*H200"):
        compare_runs([base, h200], ["a", "b"])
    with pytest.raises(GpuDissectError, match="1 topology document"):
        compare_runs([base], ["a"])
    with pytest.raises(GpuDissectError, match="one distinct name per topology"):
        compare_runs([base, base], ["a", "a"])


def test_the_committed_comparison_of_three_h100_runs_is_what_the_command_writes(tmp_path):
    committed = RUNS_4C11C49 / "runs_4c11c49.json"
    runs = _topology(committed)["runs"]["compared"]
    paths = {r["run"]: RUNS_4C11C49 / f"{r['run']}.json" for r in runs}
    out = tmp_path / "runs.json"
    proc = subprocess.run(
        [sys.executable, "-m", "gpudissect", "runs", "--topology"]
        + [str(paths[r["run"]].relative_to(REPO)) for r in runs]
        + ["--names", *[r["run"] for r in runs], "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "structural values do not repeat" in proc.stdout
    assert json.loads(out.read_text()) == _topology(committed)


def test_a_per_carveout_size_repeats_within_one_sweep_step_and_not_beyond(base):
    first, second = copy.deepcopy(base), copy.deepcopy(base)
    points = [doc["elements"]["l1d"]["size_bytes"]["by_carveout"] for doc in (first, second)]
    for p in (*points[0], *points[1]):
        p["resolution_bytes"] = 128
    points[1][2]["value"] += 128  # carveout 50: a step on (H100 runs read 119808 and 119936)
    points[1][0]["value"] -= 4224  # carveout 100: 16384 against 12160
    del points[0][4]["resolution_bytes"], points[1][4]["resolution_bytes"]
    points[1][4]["value"] += 128  # carveout 25, no step known: readings must be equal
    doc = compare_runs([first, second], ["a", "b"])
    validate_topology(doc)
    got = doc["elements"]["l1d"]["size_bytes"]["by_carveout"]
    key = [(p["carveout_pct"], p["shared_buffer_bytes"]) for p in got]
    assert doc["runs"]["does_not_repeat"] == [
        f"l1d.size_bytes[carveout {c}%, shared buffer {b} B]" for c, b in (key[0], key[4])
    ]
    assert got[0]["value"] is None and got[0]["undetermined"].startswith("does not repeat")
    assert [r["value"] for r in got[0]["readings"]] == [
        points[0][0]["value"],
        points[1][0]["value"],
    ]
    v = points[0][2]["value"]
    assert got[2]["value"] == v
    assert (
        got[2]["note"] == f"within one sweep step (128 bytes) over 2 runs: {v} (1), {v + 128} (1)"
    )
    assert got[1] == points[0][1]  # equal in both runs: as the first run has it
