"""A study's target on a fresh copy of the workflow: it runs only that study's sweeps, on the
twins of its GPUs, and renders that study's report. The smallest study (the thesis: one twin,
three experiments) runs end to end; the others are checked as dry runs."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    work = tmp_path_factory.mktemp("clone")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for item in ("Snakefile", "workflow", "config", "kernels", "envs", "profiles"):
        src, dst = REPO / item, work / item
        if src.is_dir():
            shutil.copytree(src, dst, ignore=ignore)
        else:
            shutil.copy(src, dst)
    return work


def _snakemake(work, *args):
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(work)}
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "2", *args],
        cwd=work,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )


@pytest.mark.parametrize(
    "study, sweeps",
    [("tpds", 3 * 10), ("npc", 3 * 5), ("lashgar", 2 * 2), ("thesis", 5)],
)
def test_a_study_plans_only_its_sweeps(fresh, study, sweeps):
    proc = _snakemake(fresh, "--dry-run", study)
    assert proc.returncode == 0, proc.stderr[-2000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", proc.stdout, re.M))
    assert int(counts["run_sweep"]) == sweeps
    assert "render_report " not in proc.stdout  # the study's report, not the full one


def test_thesis_runs_alone_and_renders_its_report(fresh):
    target = "thesis" if shutil.which("latexmk") else "results/report/thesis.md"
    proc = _snakemake(fresh, target)
    assert proc.returncode == 0, proc.stderr[-3000:]
    traces = sorted(p.stem for p in (fresh / "results/traces").rglob("*.parquet"))
    # the thesis twin's cache sweeps, the sharing and instance tests
    assert traces == ["cache_instances", "cache_sharing", "cache_stage1", "caches", "l1_size"]
    md = (fresh / "results/report/thesis.md").read_text()
    assert "Größler Table 5.4" in md and "## Device tesla_k20c" in md
    # the topology table, with the thesis's values in brackets
    assert "| Texture | 12 KiB [12.01 KiB] | 32 B [32 B] |" in md
    assert "Read-only [Read-only] | 4 [4] |" in md
    assert "## Study: Mei & Chu" not in md  # no other study's part
    for path in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md):
        assert (fresh / "results/report" / path).is_file(), path
    if shutil.which("latexmk"):
        assert (fresh / "results/report/thesis.pdf").read_bytes()[:5] == b"%PDF-"
