"""The pipeline through profiles/slurm on a real one-node Slurm (tests/slurm_localhost.sh).

Two simulated devices run once locally and once through the profile; the sweeps must run as
Slurm jobs (their job ids in Snakemake's log and, completed, in Slurm's job-completion log) and
the analysis documents must equal the local run's. Needs root and Debian's slurm-wlm and munge
(`tests/slurm_localhost.sh install`, which .ci/run does); skipped, with the reason, elsewhere.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpudissect.config import parse
from gpudissect.exceptions import ConfigError

REPO = Path(__file__).resolve().parents[1]
CLUSTER = REPO / "tests" / "slurm_localhost.sh"
JOBCOMP_LOG = Path("/var/log/slurm/jobcomp.log")
CONFIG = "tests/data/two_device_config.yaml"
pytestmark = pytest.mark.slow


def _plugin_missing() -> str | None:
    try:
        import snakemake_executor_plugin_slurm  # noqa: F401
    except ImportError:
        return "snakemake-executor-plugin-slurm is not installed (pip install -e .[slurm])"
    return None


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "starting slurmctld, slurmd and munged needs root"
    if not shutil.which("slurmctld") or not shutil.which("munged"):
        return "slurm-wlm and munge are not installed (tests/slurm_localhost.sh install)"
    return _plugin_missing()


@pytest.fixture(scope="module")
def cluster():
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    was_up = subprocess.run(["sinfo", "-h"], capture_output=True).returncode == 0
    subprocess.run(["bash", str(CLUSTER), "start"], check=True, timeout=120)
    subprocess.run(["bash", str(CLUSTER), "check"], check=True, timeout=120)
    yield
    if not was_up:
        subprocess.run(["bash", str(CLUSTER), "stop"], check=True, timeout=60)


def _copy_workflow(dst: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for item in ("Snakefile", "workflow", "config", "kernels", "envs", "profiles", "tests/data"):
        src = REPO / item
        if src.is_dir():
            shutil.copytree(src, dst / item, ignore=ignore)
        else:
            (dst / item).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dst / item)
    return dst


def _snakemake(work: Path, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    # the jobs inherit this environment (sbatch --export=ALL): the interpreter's bin first
    bin_dir = str(Path(sys.executable).parent)
    env = {"PATH": f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(work)}
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--configfile", CONFIG, *args],
        cwd=work,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    return proc, time.monotonic() - start


def _documents(work: Path) -> dict[str, dict]:
    """The analysis documents, without the time their trace was written (it differs by run)."""
    docs = {}
    for path in sorted((work / "results/analysis").rglob("*.json")):
        doc = json.loads(path.read_text())
        doc.get("trace", {}).pop("created_utc", None)
        docs[str(path.relative_to(work))] = doc
    return docs


@pytest.fixture(scope="module")
def runs(cluster, tmp_path_factory):
    local = _copy_workflow(tmp_path_factory.mktemp("local"))
    slurm = _copy_workflow(tmp_path_factory.mktemp("slurm"))
    local_proc, local_s = _snakemake(local, "--cores", "2")
    assert local_proc.returncode == 0, local_proc.stderr[-3000:]
    # the group jobs' Slurm logs say which sweeps each ran (the plugin deletes them otherwise)
    slurm_proc, slurm_s = _snakemake(
        slurm, "--profile", "profiles/slurm", "--slurm-keep-successful-logs"
    )
    assert slurm_proc.returncode == 0, slurm_proc.stderr[-3000:]
    # shown with `pytest -s`: the cost of the cluster route against the local one
    print(
        f"\nlocal run: {local_s:.0f} s; through Slurm: {slurm_s:.0f} s"
        f" ({slurm_s / local_s:.2f} times the local run)"
    )
    return {"local": local, "slurm": slurm, "log": slurm_proc.stderr, "s": (local_s, slurm_s)}


def _submitted(log: str) -> dict[str, Path]:
    """Slurm job id of each submitted job -> its Slurm log."""
    pattern = r"submitted with SLURM jobid (\d+) \(log: (\S+?\.log)\)"
    return {jobid: Path(path) for jobid, path in re.findall(pattern, log)}


def test_every_sweep_ran_as_a_completed_slurm_job(runs):
    submitted = _submitted(runs["log"])
    traces = sorted((runs["slurm"] / "results/traces").rglob("*.parquet"))
    assert traces, "the run wrote no traces"
    expected = {f"{t.parent.name}/{t.stem}" for t in traces}
    # the sweeps went as group jobs, one per device (profiles/slurm: group-components sweeps),
    # with the analyses they read; the other analyses, figures and the report are local rules:
    # no Slurm job each
    assert all(p.parent.name.startswith("group_sweeps_") for p in submitted.values()), submitted
    ran, analysed = {}, {}
    for jobid, log in submitted.items():
        text = log.read_text()
        for sweep in re.findall(r"output: results/traces/(\S+)\.parquet", text):
            ran[sweep] = jobid
        for doc in re.findall(r"output: results/analysis/(\S+)\.json", text):
            analysed[doc] = jobid
        # one job step ran them all: the job's Snakemake started one more, not one per sweep
        assert len(re.findall(r"Command: .* --local-groupid ", text)) == 2, log
    assert expected <= set(ran), sorted(expected - set(ran))
    devices = {t.parent.name for t in traces}
    assert len(submitted) == len(devices) < len(expected)
    # the analyses that sweeps read (stage 1 of the caches, for stage 2) ran in the job of their
    # device's sweeps, between the sweep that wrote the trace and those that read the result
    assert analysed, "no analysis ran in a device's job"
    assert all(ran[doc] == jobid for doc, jobid in analysed.items()), (analysed, ran)
    completed = set(re.findall(r"JobId=(\d+) .*?JobState=COMPLETED", JOBCOMP_LOG.read_text()))
    assert {ran[s] for s in expected} <= completed
    print(f"\nSlurm job ids of the sweeps: {dict(sorted(ran.items()))}")
    print(f"Slurm job ids of the analyses in them: {dict(sorted(analysed.items()))}")


def test_cluster_documents_equal_the_local_ones(runs):
    local, slurm = _documents(runs["local"]), _documents(runs["slurm"])
    assert len(local) >= 2 and set(local) == set(slurm)
    for name in local:
        assert slurm[name] == local[name], name
    local_report = (runs["local"] / "results/report/report.md").read_text()
    slurm_report = (runs["slurm"] / "results/report/report.md").read_text()
    assert _without_times(slurm_report) == _without_times(local_report)


def _without_times(text: str) -> str:
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\+00:00|Z)?", "<time>", text)
    return re.sub(r"\| \d+(\.\d+)? s \|", "| <job time> |", text)  # the appendix's job times


def test_cluster_run_costs_little_more_than_the_local_one(runs):
    local_s, slurm_s = runs["s"]
    # a queue wait, two Snakemake start-ups and the status check's lag per device job are the
    # price, and the analyses of a device's traces wait for its job to end; the goal is under
    # twice the local time, with a minute of slack for a loaded machine
    assert slurm_s < 2 * local_s + 60, (local_s, slurm_s)


def _dry_run(work: Path, *args: str) -> str:
    bin_dir = str(Path(sys.executable).parent)
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--dry-run", *args],
        cwd=work,
        capture_output=True,
        text=True,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(work)},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def _sweep_resources(out: str) -> dict[str, dict[str, str]]:
    """`resources:` of every run_sweep job of a dry run, by its device."""
    found = {}
    for block in out.split("rule run_sweep:")[1:]:
        device = re.search(r"wildcards: device=([^,\s]+)", block).group(1)
        line = re.search(r"resources: (.*)", block).group(1)
        found.setdefault(device, dict(kv.split("=", 1) for kv in line.split(", ")))
    return found


def test_fleet_sweeps_ask_for_one_gpu_of_their_partition_and_model(tmp_path):
    if _plugin_missing():
        pytest.skip(_plugin_missing())
    work = _copy_workflow(tmp_path)
    out = _dry_run(
        work, "--profile", "profiles/slurm", "--configfile", "config/gpu.yaml", "config/fleet.yaml"
    )
    got = _sweep_resources(out)
    # config/fleet.yaml: h100 on partition gpu, type h100; h200 on gpu-h200, type h200
    assert got["h100"]["gpu"] == "1" and got["h200"]["gpu"] == "1"
    assert (got["h100"]["slurm_partition"], got["h100"]["gpu_model"]) == ("gpu", "h100")
    assert (got["h200"]["slurm_partition"], got["h200"]["gpu_model"]) == ("gpu-h200", "h200")
    # both devices' documents feed one report
    assert out.count("rule render_report:") == 1 and "plot_h100" in out and "plot_h200" in out


def test_sim_sweeps_ask_for_no_gpu_and_keep_the_profiles_partition(tmp_path):
    if _plugin_missing():
        pytest.skip(_plugin_missing())
    work = _copy_workflow(tmp_path)
    out = _dry_run(work, "--profile", "profiles/slurm", "--configfile", CONFIG)
    for res in _sweep_resources(out).values():
        assert res["gpu"] == "0"
        # no device entry names a partition: the rule sets none, the profile's default applies
        assert "slurm_partition" not in res and "gpu_model" not in res


def test_cuda_arch_from_the_command_line_needs_no_gpu(tmp_path):
    # a login node has no GPU to detect the arch from: --config cuda_arch names it
    work = _copy_workflow(tmp_path)
    out = _dry_run(
        work, "--cores", "1", "--configfile", "config/gpu.yaml", "--config", "cuda_arch=sm_89"
    )
    assert "results/build/sm_89/pchase.cubin" in out
    assert "sm_90" not in out


def test_placement_keys_are_for_cuda_entries_and_an_entrys_arch_wins():
    sim = {"name": "s", "backend": "sim", "profile": str(REPO / "tests/data/tiny_profile.yaml")}
    for key, value in (("partition", "gpu"), ("gpu_model", "h100")):
        with pytest.raises(ConfigError, match=rf"devices\[0\]\.{key}: only for backend cuda"):
            parse({"devices": [{**sim, key: value}]})
    run = parse(
        {
            "cuda_arch": "sm_89",
            "devices": [
                {"name": "a", "backend": "cuda", "arch": "sm_90", "partition": "gpu"},
                {"name": "b", "backend": "cuda", "gpu_model": "h200"},
            ],
        }
    )
    a, b = run.devices
    assert (a.arch, a.partition, a.gpu_model) == ("sm_90", "gpu", None)
    assert (b.arch, b.partition, b.gpu_model) == ("sm_89", None, "h200")
    with pytest.raises(ConfigError, match="gpu_model"):
        parse({"devices": [{"name": "c", "backend": "cuda", "gpu_model": "a100:2"}]})
