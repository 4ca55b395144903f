"""An experiment asked for a load path the device lacks measures nothing and reports the path
not applicable, with the reason, never an exception. The Fermi twin (config/devices/gtx560ti.yaml)
has no `nc` path: ld.global.nc, the read-only data cache, needs compute capability 3.5. Every
GPU that nvcc 13 compiles for (sm_75 on) has all five paths (tests/test_kernels.py compiles every
kernel for each), so a twin is where a path is missing."""

import json
from pathlib import Path

import pytest

from gpudissect.analysis.tlb.latency_patterns import summary_table
from gpudissect.config import load
from gpudissect.families import family
from gpudissect.report.sections_tlb import latency_patterns_section
from gpudissect.sweep import run_experiment
from gpudissect.traces import read_trace

REPO = Path(__file__).resolve().parents[1]
REASON = "the device has no `nc` load path, so nothing was measured"
CONFIG = """
devices:
  - name: fermi
    backend: sim
    profile: {repo}/config/devices/gtx560ti.yaml
    seed: 1
experiments:
  l1_size: {{path: nc}}
  l2: {{path: nc}}
  pchase_classic: {{path: nc}}
  latency_patterns: {{paths: [nc]}}
  cache_stage1:
    paths:
      ca: {{enabled: false}}
      cg: {{enabled: false}}
      tex: {{enabled: false}}
      const: {{enabled: false}}
report: {{title: absent load path}}
"""
# what tlbs.json would give the latency patterns: the Fermi twin's 2 MB pages, 16 and 65 entries
TLBS = {
    "elements": {
        "l1_tlb": {"page_bytes": {"value": 2097152}, "entries": {"value": 16}},
        "l2_tlb": {"page_bytes": {"value": 2097152}, "entries": {"value": 65}},
    },
    "page_table": {"page_table_window_bytes": {"value": None}},
}


@pytest.fixture(scope="module")
def fermi(tmp_path_factory):
    work = tmp_path_factory.mktemp("absent")
    (work / "config.yaml").write_text(CONFIG.format(repo=REPO))
    (work / "tlbs.json").write_text(json.dumps(TLBS))
    return load(work / "config.yaml", base_dir=REPO).device("fermi"), work


def _run(fermi, experiment, **inputs):
    device, work = fermi
    trace = read_trace(
        run_experiment(device, experiment, out=work / f"{experiment}.parquet"),
        schema=family(experiment).schema,
    )
    doc = family(experiment).analyse(trace.data, provenance=trace.provenance, **inputs)
    return trace, doc


@pytest.mark.parametrize(
    "experiment, where",
    [
        ("l1_size", ("elements", "readonly", "size_bytes")),
        ("l2", ("elements", "l2", "size_bytes")),
        ("pchase_classic", ("inferences", "saavedra", "size_bytes")),
        ("pchase_classic", ("inferences", "wong", "size_bytes")),
    ],
)
def test_one_path_experiment_is_not_applicable(fermi, experiment, where):
    trace, doc = _run(fermi, experiment)
    assert trace.data.empty
    q = doc
    for key in where:
        q = q[key]
    assert q == {"value": None, "not_applicable": REASON}


def test_cache_stage1_marks_the_path_not_applicable(fermi):
    trace, doc = _run(fermi, "cache_stage1")
    assert trace.data.empty
    assert doc["paths"]["nc"]["not_applicable"] is True
    assert "no such load path" in doc["paths"]["nc"]["reason"]


@pytest.mark.parametrize("tlbs", [False, True], ids=["no_tlbs", "with_tlbs"])
def test_latency_patterns_of_a_missing_path_are_not_applicable(fermi, tlbs):
    # with no path the device has, the sweep once crashed concatenating no launches
    inputs = {"inputs": {"tlbs": str(fermi[1] / "tlbs.json")}} if tlbs else {}
    trace, doc = _run(fermi, "latency_patterns", **inputs)
    assert trace.data.empty
    patterns = doc["paths"]["nc"]
    assert patterns == {
        p: {"value": None, "not_applicable": REASON} for p in ("P1", "P2", "P3", "P4", "P5", "P6")
    }
    assert summary_table(trace.data, doc).empty
    section = "\n".join(latency_patterns_section(doc, []))
    assert section.count(f"not applicable ({REASON})") == 6
    assert "undetermined" not in section
