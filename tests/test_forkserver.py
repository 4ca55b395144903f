"""The run's fork server (gpudissect/forkserver.py): a job it runs writes what the job run in its
own interpreter writes, exits as it exits, stops when the job's process is stopped, and a job
that the server cannot take runs itself."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from gpudissect import forkserver

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests/data/tiny_config.yaml"


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "workflow"), **extra}
    env.pop(forkserver.ENV, None)
    env.update(extra)
    return env


@pytest.fixture
def server(tmp_path, monkeypatch):
    """A server started as the workflow starts one, this test's process its run."""
    monkeypatch.chdir(REPO)  # its preload's kernel warm-up reads a profile of the checkout
    monkeypatch.setenv("PYTHONPATH", str(REPO / "workflow"))
    monkeypatch.delenv(forkserver.ENV, raising=False)
    started = forkserver.start(tmp_path / "srv")
    assert started is not None
    proc, path = started
    for _ in range(600):
        if os.path.exists(path) or proc.poll() is not None:
            break
        time.sleep(0.1)
    assert os.path.exists(path), (tmp_path / "srv/forkserver.log").read_text()
    yield started
    forkserver.stop(started)
    monkeypatch.delenv(forkserver.ENV, raising=False)


def _gpudissect(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpudissect", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    out = tmp_path_factory.mktemp("trace") / "l1_size.parquet"
    proc = _gpudissect(
        *("run", "--config", str(TINY), "--device", "tiny", "--experiment", "l1_size"),
        *("--out", str(out)),
        env=_env(),
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def test_a_job_in_the_server_writes_and_prints_what_it_does_alone(server, trace, tmp_path):
    _, path = server
    served, alone = tmp_path / "served.json", tmp_path / "alone.json"
    a = _gpudissect(
        "analyze",
        "--trace",
        str(trace),
        "--out",
        str(served),
        env=_env(**{forkserver.ENV: path}),
        cwd=tmp_path,
    )
    b = _gpudissect("analyze", "--trace", str(trace), "--out", str(alone), env=_env(), cwd=tmp_path)
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    assert a.stdout == b.stdout and a.stdout
    assert served.read_bytes() == alone.read_bytes()
    # the child ran in the job's folder, with the job's environment
    env = _env(**{forkserver.ENV: path, "GPUDISSECT_GIT_COMMIT": "abc123"})
    c = _gpudissect("analyze", "--trace", str(trace), "--out", "rel.json", env=env, cwd=tmp_path)
    assert c.returncode == 0, c.stderr
    assert (tmp_path / "rel.json").is_file()


def test_the_jobs_error_and_exit_status_come_back(server, tmp_path):
    _, path = server
    proc = _gpudissect(
        "analyze",
        "--trace",
        "nosuch.parquet",
        "--out",
        "x.json",
        env=_env(**{forkserver.ENV: path}),
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert "nosuch.parquet: trace file does not exist" in proc.stderr
    assert "fork server" not in proc.stderr


def test_a_job_of_another_environment_runs_itself(server, trace, tmp_path):
    _, path = server
    # another module search path: the server refuses, and the job runs in its own interpreter
    env = _env(**{forkserver.ENV: path})
    env["PYTHONPATH"] = f"{REPO / 'workflow'}{os.pathsep}{tmp_path}"
    proc = _gpudissect("analyze", "--trace", str(trace), "--out", "x.json", env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # no server at the path named: the same
    env = _env(**{forkserver.ENV: str(tmp_path / "none.sock")})
    proc = _gpudissect("analyze", "--trace", str(trace), "--out", "y.json", env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "x.json").read_bytes() == (tmp_path / "y.json").read_bytes()


def _children(server_pid: int) -> list[int]:
    out = subprocess.run(
        ["ps", "-o", "pid=", "--ppid", str(server_pid)], capture_output=True, text=True
    ).stdout
    return [int(p) for p in out.split()]


def test_a_stopped_job_stops_its_child_and_leaves_no_trace(server, tmp_path):
    proc, path = server
    # a sweep of a minute or so: the tiny device's l1_size over 8000 array sizes
    config = yaml.safe_load(TINY.read_text())
    config["devices"][0]["profile"] = str(REPO / "tests/data/tiny_profile.yaml")
    config["experiments"]["l1_size"]["array_bytes"] = {"start": 512, "stop": 1 << 20, "step": 128}
    config["experiments"]["l1_size"]["max_record_steps"] = 2048
    (tmp_path / "long.yaml").write_text(yaml.safe_dump(config))
    out = tmp_path / "long.parquet"
    job = subprocess.Popen(
        [sys.executable, "-m", "gpudissect", "run", "--config", "long.yaml", "--device", "tiny"]
        + ["--experiment", "l1_size", "--out", str(out)],
        cwd=tmp_path,
        env=_env(**{forkserver.ENV: path}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(300):
        if _children(proc.pid):
            break
        time.sleep(0.05)
    (child,) = _children(proc.pid)
    time.sleep(1)
    assert job.poll() is None, "the sweep ended before it could be stopped"
    job.send_signal(signal.SIGTERM)  # as Snakemake stops a job
    job.wait(timeout=30)
    for _ in range(100):
        if child not in _children(proc.pid):
            break
        time.sleep(0.05)
    assert child not in _children(proc.pid)
    assert not list(tmp_path.glob("long.parquet*"))  # nor a partial file beside it
    assert proc.poll() is None  # the server goes on for the run's other jobs


def test_the_server_ends_with_its_run_and_removes_its_socket(tmp_path):
    # the run's process: a Python that starts a server, then is killed without stopping it
    script = (
        "import sys, time; from gpudissect import forkserver; "
        f"proc, path = forkserver.start({str(tmp_path)!r}); print(proc.pid, path, flush=True); "
        "time.sleep(600)"
    )
    run = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO, env=_env(), stdout=subprocess.PIPE, text=True
    )
    pid, path = run.stdout.readline().split()
    for _ in range(600):
        if os.path.exists(path):
            break
        time.sleep(0.1)
    assert os.path.exists(path)
    run.kill()
    run.wait()
    for _ in range(100):
        if not os.path.exists(f"/proc/{pid}"):
            break
        time.sleep(0.05)
    assert (
        not os.path.exists(f"/proc/{pid}")
        or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
    )
    assert not os.path.exists(path)


def test_off_starts_no_server(tmp_path, monkeypatch):
    monkeypatch.setenv(forkserver.ENV, "off")
    assert forkserver.start(tmp_path) is None
    assert os.environ[forkserver.ENV] == "off"


def test_the_preload_goes_on_without_numba_as_on_a_gpu_host():
    # the GPU host's wheelhouse has no numba: the server still starts, the simulator left out
    script = (
        "import sys; sys.modules['numba'] = None; from gpudissect import forkserver; "
        "forkserver.preload(); "
        "print(*(m in sys.modules for m in ('gpudissect.cli', 'gpudissect.analysis.caches', "
        "'gpudissect.sim._kernels')))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=_env(), capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["True", "True", "False"]


def test_a_package_edited_during_the_run_is_imported_afresh(tmp_path, monkeypatch, trace):
    # a copy of the package, so that this test may edit it
    import shutil

    copy = tmp_path / "pkg"
    shutil.copytree(REPO / "workflow/gpudissect", copy / "gpudissect")
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("PYTHONPATH", str(copy))
    monkeypatch.delenv(forkserver.ENV, raising=False)
    started = forkserver.start(tmp_path / "srv")
    proc, path = started
    try:
        for _ in range(600):
            if os.path.exists(path) or proc.poll() is not None:
                break
            time.sleep(0.1)
        env = {**os.environ, "PYTHONPATH": str(copy), forkserver.ENV: path}
        log = tmp_path / "srv/forkserver.log"
        first = _gpudissect(
            "analyze", "--trace", str(trace), "--out", "a.json", env=env, cwd=tmp_path
        )
        assert first.returncode == 0, first.stderr
        assert "runs itself" not in log.read_text()
        (copy / "gpudissect/edited.py").write_text("")
        second = _gpudissect(
            "analyze", "--trace", str(trace), "--out", "b.json", env=env, cwd=tmp_path
        )
        assert second.returncode == 0, second.stderr
        assert "the package's files changed since this server started" in log.read_text()
        assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    finally:
        forkserver.stop(started)
