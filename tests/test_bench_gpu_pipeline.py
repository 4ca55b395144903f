"""benchmarks/bench_gpu_pipeline.py when the pipeline fails: the run's logs, Snakemake's log and
the failed job survive the run's temporary folder (a whole GPU run's crash left nothing)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
TREE = ("Snakefile", "workflow", "config", "kernels", "envs", "profiles")


def _failing_source(root: Path) -> Path:
    """A copy of this source tree whose sweep jobs raise before they sweep (a crash of the
    first job: the run stops at once, with no simulator to compile)."""
    source = root / "source"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc")
    for item in TREE:
        if (REPO / item).is_dir():
            shutil.copytree(REPO / item, source / item, ignore=ignore)
        else:
            shutil.copy(REPO / item, source / item)
    job = source / "workflow" / "gpudissect" / "sweep_job.py"
    typed = "    typed = parse(config, sweep=(device, experiment)).device(device)\n"
    text = job.read_text()
    assert text.count(typed) == 1, "the sweep job moved: update this test"
    crash = '    logging.error("injected crash")\n    raise RuntimeError("injected crash")\n'
    job.write_text(text.replace(typed, crash + typed))
    return source


def test_a_failed_run_keeps_its_logs_and_names_the_failed_job(tmp_path):
    source = _failing_source(tmp_path)
    config = yaml.safe_load((REPO / "tests" / "data" / "tiny_config.yaml").read_text())
    config["devices"][0]["profile"] = str(REPO / "tests" / "data" / "tiny_profile.yaml")
    configfile = tmp_path / "tiny.yaml"
    configfile.write_text(yaml.safe_dump(config))
    keep, out = tmp_path / "kept", tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_gpu_pipeline.py"), "--cores", "1"]
        + ["--source", str(source), "--configfile", str(configfile)]
        + ["--target", "results/analysis/tiny/l1_size.json", "--keep", str(keep)]
        + ["--json", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode != 0, proc.stdout + proc.stderr
    figures = json.loads(out.read_text())
    assert figures["failed"] is True and figures["returncode"] == proc.returncode
    (job,) = figures["failed_jobs"]
    assert job["rule"] == "run_sweep", job
    assert job["wildcards"] == "device=tiny, experiment=l1_size"
    assert job["output"] == "results/traces/tiny/l1_size.parquet"
    assert job["log"] == "logs/run_sweep/tiny/l1_size.log"
    # the failed job's own log is kept and printed; no trace, no sweep time
    assert "ERROR root: injected crash" in (keep / job["log"]).read_text()
    assert "ERROR root: injected crash" in proc.stderr
    assert figures["sweeps"] == {}
    assert not (keep / "results" / "traces" / "tiny" / "l1_size.parquet").exists()
    # and Snakemake's own log and console, which name the failed job and its exception
    (log,) = (keep / "snakemake_log").glob("*.snakemake.log")
    assert "Error in rule run_sweep" in log.read_text()
    assert "RuntimeError: injected crash" in (keep / "snakemake_console.log").read_text()


def test_failed_jobs_reads_each_error_block(tmp_path):
    log = tmp_path / ".snakemake" / "log" / "2026-01-01T000000.000000.snakemake.log"
    log.parent.mkdir(parents=True)
    log.write_text(
        "Error in rule analyze_trace:\n"
        "    jobid: 12\n"
        "    input: results/traces/gpu0/requests.parquet\n"
        "    output: results/analysis/gpu0/requests.json\n"
        "    log: logs/analyze_trace/gpu0/requests.log (check log file(s) for error details)\n"
        "    shell:\n"
        "        python -m gpudissect analyze --experiment requests\n"
        "        (command exited with non-zero exit code)\n"
        "    wildcards: device=gpu0, experiment=requests\n"
        "\n"
        "Error in rule run_sweep:\n"
        "    jobid: 3\n"
        "    log: logs/run_sweep/gpu0/tlbs.log (check log file(s) for error details)\n"
        "Shutting down, this might take some time.\n"
        "    jobid: 99\n"
    )
    from benchmark_module import load_benchmark

    bench = load_benchmark("bench_gpu_pipeline")
    assert bench.failed_jobs(tmp_path) == [
        {
            "rule": "analyze_trace",
            "jobid": "12",
            "input": "results/traces/gpu0/requests.parquet",
            "output": "results/analysis/gpu0/requests.json",
            "log": "logs/analyze_trace/gpu0/requests.log",
            "wildcards": "device=gpu0, experiment=requests",
        },
        {"rule": "run_sweep", "jobid": "3", "log": "logs/run_sweep/gpu0/tlbs.log"},
    ]
    assert bench.failed_jobs(tmp_path / "none") == []


def test_a_sweeps_run_is_profiled_into_the_pstats_folder_when_asked(tmp_path, monkeypatch):
    import pstats

    from gpudissect import sweep

    def experiment_run(n, *, scale):
        return sum(i * scale for i in range(n))

    monkeypatch.delenv(sweep.PSTATS_ENV, raising=False)
    assert sweep._profiled("gpu0_x", experiment_run, 10, scale=2) == 90
    assert not list(tmp_path.iterdir())
    monkeypatch.setenv(sweep.PSTATS_ENV, str(tmp_path / "pstats"))
    assert sweep._profiled("gpu0_x", experiment_run, 10, scale=2) == 90
    stats = pstats.Stats(str(tmp_path / "pstats" / "gpu0_x.pstats"))
    assert any(name == "experiment_run" for _, _, name in stats.stats)
