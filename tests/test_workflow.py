"""The real pipeline, end to end, on a tiny simulated config in a temporary directory."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from gpudissect.traces import read_trace

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _copy_workflow(work):
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for item in ("Snakefile", "workflow", "config", "kernels", "envs", "profiles", "tests/data"):
        src = REPO / item
        dst = work / item
        if src.is_dir():
            shutil.copytree(src, dst, ignore=ignore)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dst)
    return work


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return _copy_workflow(tmp_path_factory.mktemp("pipeline"))


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _snakemake(work, *args, targets=(), path_first=None, popen=False):
    bin_dir = str(Path(sys.executable).parent)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(work)}
    if path_first:
        env["PATH"] = f"{path_first}:{env['PATH']}"
    if popen:  # in its own process group, as a shell's foreground job is
        return subprocess.Popen(
            [sys.executable, "-m", "snakemake", "--cores", "2"]
            + ["--configfile", "tests/data/tiny_config.yaml", *args],
            cwd=work,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,
            # Ctrl-C's default action, as a shell gives its jobs: a test worker that ignores
            # SIGINT would pass that on, and the interrupted run would finish instead
            preexec_fn=_default_sigint,
        )
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            *targets,
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
    # the size-sweep figure draws the table the analysis wrote beside its document
    table = pd.read_parquet(workdir / "results/analysis/tiny/l1_size.parquet")
    assert {"array_bytes", "mean_latency_cycles"} <= set(table.columns) and len(table) > 3
    trace = read_trace(workdir / "results/traces/tiny/l1_size.parquet")
    prov = trace.provenance
    assert prov["device_info"]["profile_sha256"]
    assert prov["backend"] == "sim" and prov["config_hash"]
    assert (workdir / "logs/run_sweep/tiny/l1_size.log").exists()


def test_tiny_pipeline_writes_a_valid_topology_that_traces_back(workdir):
    from gpudissect.topology import validate_topology
    from gpudissect.topology.gather import resolve_pointer

    topo = json.loads((workdir / "results/topology/tiny.json").read_text())
    validate_topology(topo)
    size = topo["elements"]["l1d"]["size_bytes"]
    assert size["value"] == 2048 and size["experiment"] in ("cache_stage1", "l1_size")
    doc = json.loads((workdir / size["analysis"]).read_text())
    assert resolve_pointer(doc, size["source"])["value"] == 2048


def test_report_is_rendered_twice_from_one_model(workdir):
    report = workdir / "results/report"
    md, tex = (report / "report.md").read_text(), (report / "report.tex").read_text()
    assert md.index("## Summary") < md.index("**Contents**") < md.index("## Device tiny")
    assert r"\section{Summary}" in tex and r"\tableofcontents" in tex
    assert (report / "tables/provenance.csv").read_text().count("\n") == 1 + 15  # every trace
    if shutil.which("latexmk"):
        assert (report / "report.pdf").read_bytes()[:5] == b"%PDF-"


def test_html_report_captions_name_their_own_figures(workdir):
    proc = _snakemake(workdir, "--report", "results/report/report.html")
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = (workdir / "results/report/report.html").read_text()
    results = json.loads(re.search(r"var results = (\{.*?\});\n", html, re.S).group(1))
    figures = {k: v for k, v in results.items() if v["mime_type"] == "image/png"}
    assert len(figures) == 25  # every figure stem of every family, for the one device
    for path, item in figures.items():
        assert Path(path).name in item["caption"], (path, item["caption"][:200])
        assert item["labels"]["figure"] == Path(path).name
        # the caption the plot job wrote from the drawing, not the prose alone
        assert (workdir / path).with_suffix(".rst").read_text().split(": ", 1)[1][:40] in (
            re.sub(r"<[^>]+>", "", item["caption"])
        ), path
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


def test_two_runs_give_byte_identical_traces_and_documents(workdir, tmp_path):
    """The same config and seed give the same files, byte for byte (no wall-clock time in
    them): a fresh copy runs the sweep and the analysis again."""
    again = _copy_workflow(tmp_path)
    documents = sorted(p.relative_to(workdir) for p in workdir.glob("results/analysis/*/*.json"))
    traces = sorted(p.relative_to(workdir) for p in workdir.glob("results/traces/*/*.parquet"))
    assert len(documents) == len(traces) > 1
    proc = _snakemake(again, targets=[str(p) for p in documents])
    assert proc.returncode == 0, proc.stderr[-3000:]
    for out in documents + traces:
        assert (again / out).read_bytes() == (workdir / out).read_bytes(), out


def test_figures_drawn_in_parallel_equal_those_drawn_one_by_one(workdir, tmp_path):
    """`plot --jobs N` draws experiments in N processes; the PNG files (and the captions written
    beside them) are the same bytes."""
    from gpudissect.families import family

    docs = sorted(workdir.glob("results/analysis/tiny/*.json"))
    exps = [d.stem for d in docs]
    traces = [str(workdir / "results/traces/tiny" / f"{e}.parquet") for e in exps]
    drawn = {}
    for jobs in (1, 3):
        out = tmp_path / f"jobs{jobs}"
        proc = subprocess.run(
            [sys.executable, "-m", "gpudissect", "plot", "--experiment", *exps, "--trace",
             *traces, "--analysis", *map(str, docs), "--out-dir", str(out), "--formats", "png",
             "--jobs", str(jobs)],
            capture_output=True, text=True, cwd=workdir,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        drawn[jobs] = {p.name: p.read_bytes() for p in out.glob("*.*")}
    expected = {
        f"{stem}.{ext}" for e in exps for stem in family(e).figures for ext in ("png", "rst")
    }
    assert set(drawn[1]) == expected and len(expected) > 10
    assert drawn[3] == drawn[1]


def _edited(workdir, name, edit):
    cfg = yaml.safe_load((workdir / "tests/data/tiny_config.yaml").read_text())
    edit(cfg)
    (workdir / "tests/data" / name).write_text(yaml.safe_dump(cfg))
    return f"tests/data/{name}"


def _dry_run_jobs(workdir, configfile):
    """Every job of a dry run: rule name, input files, output files."""
    proc = _snakemake(workdir, "--dry-run", "--configfile", configfile)
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = []
    # a job of a group job is printed indented under the group's line
    for block in re.split(r"\n[ \t]*(?:local)?rule ", proc.stdout + proc.stderr)[1:]:
        fields = dict(
            line.strip().split(": ", 1) for line in block.splitlines()[1:] if ": " in line
        )
        inputs, outputs = (
            {p for p in fields.get(k, "").split(", ") if p} for k in ("input", "output")
        )
        jobs.append((block.split(":", 1)[0], inputs, outputs))
    return jobs


def _dry_run_outputs(workdir, configfile):
    """The output files of the jobs a dry run would run."""
    return {p for _, _, outputs in _dry_run_jobs(workdir, configfile) for p in outputs}


def test_edited_config_reruns_exactly_what_it_changes(workdir):
    assert _snakemake(workdir).returncode == 0  # up to date again after the test above
    l1_trace, l2_trace = "results/traces/tiny/l1_size.parquet", "results/traces/tiny/l2.parquet"
    # each edited copy is given after the tiny config and merged over it, as an edit would be
    seed = _edited(workdir, "seed.yaml", lambda c: c["devices"][0].update(seed=8))
    assert {l1_trace, l2_trace} <= _dry_run_outputs(workdir, seed)  # the seed is the device's
    stop = _edited(
        workdir, "stop.yaml", lambda c: c["experiments"]["l1_size"]["array_bytes"].update(stop=3840)
    )
    rerun = _dry_run_outputs(workdir, stop)
    assert l1_trace in rerun and l2_trace not in rerun
    steps = _edited(
        workdir, "steps.yaml", lambda c: c["experiments"].update(l2={"record_steps": 64})
    )
    rerun = _dry_run_outputs(workdir, steps)
    assert l2_trace in rerun and l1_trace not in rerun
    title = _edited(workdir, "title.yaml", lambda c: c["report"].update(title="edited"))
    rerun = _dry_run_outputs(workdir, title)  # the report (Markdown, LaTeX, its tables, PDF)
    assert "results/report/report.md" in rerun
    assert all(p.startswith("results/report/") for p in rerun), rerun


def test_interrupted_figure_job_resumes_with_a_plain_rerun(workdir, tmp_path):
    """Ctrl-C while the figure job runs, after some figures are on disk: a plain rerun draws
    them again instead of stopping with IncompleteFilesException."""
    figures = sorted((workdir / "results/figures/tiny").glob("*.*"))
    for f in figures:
        f.unlink()
    # `python` that draws the figures, then waits to be interrupted: the job's outputs are on
    # disk and Snakemake still counts the job as running
    flag = tmp_path / "drawn"
    wrapper = tmp_path / "bin" / "python"
    wrapper.parent.mkdir()
    wrapper.write_text(
        f'#!/bin/sh\n{sys.executable} "$@"; rc=$?\n'
        f'case "$*" in *"gpudissect plot"*) touch {flag}; exec sleep 300;; esac\nexit $rc\n'
    )
    wrapper.chmod(0o755)
    run = _snakemake(workdir, path_first=wrapper.parent, popen=True)
    try:
        for _ in range(1200):
            if flag.exists() or run.poll() is not None:
                break
            time.sleep(0.1)
        assert flag.exists(), run.communicate()[0][-3000:]
        time.sleep(1)  # the wrapper is asleep by now
        os.killpg(run.pid, signal.SIGINT)  # Ctrl-C: the signal goes to the whole group
        out = run.communicate(timeout=600)[0]
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode != 0, out[-2000:]
    proc = _snakemake(workdir)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "plot_tiny" in proc.stdout + proc.stderr
    for f in figures:  # the figures, and the captions beside them
        assert f.stat().st_size > (100 if f.suffix == ".rst" else 1000), f
    assert not list((workdir / "results/figures/tiny").glob(".plot-*"))


def test_a_gpus_figures_are_drawn_per_experiment_a_twins_in_one_job(workdir):
    # planning needs no GPU: the arch is named, and a dry run starts no job
    mixed = {
        "devices": [
            {"name": "g", "backend": "cuda", "arch": "sm_90"},
            {"name": "tiny", "backend": "sim", "profile": "tests/data/tiny_profile.yaml"},
        ],
        "experiments": {"l2": {"record_steps": 64}},
    }
    (workdir / "tests/data/mixed.yaml").write_text(yaml.safe_dump(mixed))
    jobs = _dry_run_jobs(workdir, "tests/data/mixed.yaml")
    figures = [(name, inp, out) for name, inp, out in jobs if name.startswith("plot_")]
    experiments = {Path(p).stem for _, inp, _ in figures for p in inp if "/traces/g/" in p}
    assert {"l1_size", "l2"} <= experiments
    for exp in experiments:  # one job per experiment of the GPU, reading that experiment alone
        (inp, out), *more = [(i, o) for n, i, o in figures if n == f"plot_g_{exp}"]
        assert not more
        assert {Path(p).stem for p in inp} == {exp}
        assert out and all(p.startswith("results/figures/g/") for p in out)
    # the twin's experiments are drawn in one job, and every figure has exactly one job
    (tiny_out,) = [out for name, _, out in figures if name == "plot_tiny"]
    assert {Path(p).stem for p in tiny_out} >= {"l1_size_sweep", "l2_footprint"}
    every = [p for _, _, out in figures for p in out]
    assert len(every) == len(set(every))
    assert len(figures) == len(experiments) + 1
