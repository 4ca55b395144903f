"""The real pipeline, end to end, on a tiny simulated config in a temporary directory."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpudissect.traces import read_trace

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    work = tmp_path_factory.mktemp("pipeline")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for item in ("Snakefile", "workflow", "config", "kernels", "envs", "tests/data"):
        src = REPO / item
        dst = work / item
        if src.is_dir():
            shutil.copytree(src, dst, ignore=ignore)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dst)
    return work


def _snakemake(work, *args):
    bin_dir = str(Path(sys.executable).parent)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(work)}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--cores",
            "2",
            "--configfile",
            "tests/data/tiny_config.yaml",
            *args,
        ],
        cwd=work,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def test_tiny_pipeline_reports_the_l1_size(workdir):
    proc = _snakemake(workdir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = (workdir / "results/report/report.md").read_text()
    # tests/data/tiny_profile.yaml has a 2 KiB L1; the analysis must find it from latencies
    assert "Measured l1d size (shared buffer 16 KiB): **2 KiB (2048 B)**" in report
    doc = json.loads((workdir / "results/analysis/tiny/l1_size.json").read_text())
    size = doc["elements"]["l1d"]["size_bytes"]
    assert size["value"] == 2048 and size["unit"] == "bytes"
    assert 0.9 <= size["confidence"] <= 1 and size["method"] and size["evidence"]
    for fig in ("l1_size_sweep.png", "l1_size_sweep.pdf", "l1_size_latency_map.png"):
        assert (workdir / "results/figures/tiny" / fig).stat().st_size > 1000
    trace = read_trace(workdir / "results/traces/tiny/l1_size.parquet")
    prov = trace.provenance
    assert prov["device_info"]["profile_sha256"]
    assert prov["backend"] == "sim" and prov["config_hash"]
    assert (workdir / "logs/run_sweep/tiny/l1_size.log").exists()


def test_report_is_rendered_twice_from_one_model(workdir):
    report = workdir / "results/report"
    md, tex = (report / "report.md").read_text(), (report / "report.tex").read_text()
    assert md.index("## Summary") < md.index("**Contents**") < md.index("## Device tiny")
    assert r"\section{Summary}" in tex and r"\tableofcontents" in tex
    assert (report / "tables/provenance.csv").read_text().count("\n") == 1 + 12  # every trace
    if shutil.which("latexmk"):
        assert (report / "report.pdf").read_bytes()[:5] == b"%PDF-"


def test_html_report_captions_name_their_own_figures(workdir):
    proc = _snakemake(workdir, "--report", "results/report/report.html")
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = (workdir / "results/report/report.html").read_text()
    results = json.loads(re.search(r"var results = (\{.*?\});\n", html, re.S).group(1))
    figures = {k: v for k, v in results.items() if v["mime_type"] == "image/png"}
    assert len(figures) == 22  # every figure stem of every family, for the one device
    for path, item in figures.items():
        assert Path(path).name in item["caption"], (path, item["caption"][:200])
        assert item["labels"]["figure"] == Path(path).name
    tables = [k for k, v in results.items() if v["mime_type"] == "text/csv"]
    assert "results/report/tables/provenance.csv" in tables


def test_second_run_has_nothing_to_do(workdir):
    proc = _snakemake(workdir, "--dry-run")
    assert proc.returncode == 0
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_deleted_output_is_rebuilt_alone(workdir):
    (workdir / "results/figures/tiny/l1_size_sweep.png").unlink()
    proc = _snakemake(workdir, "--dry-run")
    out = proc.stdout + proc.stderr
    assert "plot_tiny" in out and "run_sweep" not in out
