"""`make artifact` builds a bundle that installs and runs offline (ARTIFACT.md).

The bundle is built from a copy of the git-tracked tree. Its rendered report comes from a run of
the tiny config there, its l1_size sweep alone (ARTIFACT_RUN; the shipping and regenerating are
wiring, the same for any config), so that the default pipeline runs once, from the bundle, not
twice: the bundle must regenerate its shipped report (seeded runs, the same documents), and run
the default pipeline. It is unpacked in a temporary directory and installed, run and tested
with no way to reach a package index:
- the install and the runs happen in a new network namespace (`unshare --net`): it has only a
  loopback interface, which is down, so no address outside the process can be reached at all;
- pip gets `--no-index`, `PIP_CONFIG_FILE=/dev/null` (no site or user config adds an index or a
  find-links folder) and `PIP_INDEX_URL` pointing at a closed port, should anything ask one.
Needs root for the namespace, git, and the network for the first download of the wheels (kept
in WHEEL_CACHE for later builds); skipped, with the reason, elsewhere.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from kernel_cache import share_kernel_cache

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow
# a closed port: a request to it fails at once
NOWHERE = "http://127.0.0.1:9/simple"
# the bundle's shipped report: the tiny device's l1_size sweep, analysis, figures and report
TINY = ("tests/data/tiny_config.yaml", "tests/data/l1_size_only.yaml")


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "a network namespace for the offline install needs root"
    if not shutil.which("unshare") or subprocess.run(["unshare", "--net", "true"]).returncode:
        return "unshare --net is not available"
    if not shutil.which("git") or not (REPO / ".git").exists():
        return "the bundle is built from the git-tracked tree: needs git and a checkout"
    return None


def _offline(argv: list[str], cwd: Path, env: dict[str, str], timeout: int = 900):
    return subprocess.run(
        ["unshare", "--net", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _offline_env(work: Path) -> dict[str, str]:
    return {
        "PATH": f"{work / '.venv/bin'}:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": str(work),
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_INDEX_URL": NOWHERE,
        "PIP_NO_INDEX": "1",
    }


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    src = tmp_path_factory.mktemp("source")
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, files):
        path, dst = REPO / os.fsdecode(name), src / os.fsdecode(name)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():  # the package's data/ links to config/ (tracked as links)
            os.symlink(os.readlink(path), dst)
        elif path.is_file():
            shutil.copy2(path, dst)
    subprocess.run(["git", "init", "-q"], cwd=src, check=True)
    subprocess.run(["git", "add", "-A"], cwd=src, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "bundle"],
        cwd=src,
        check=True,
    )
    share_kernel_cache(src)  # the simulator's kernels compiled once for the suite's copies
    # the bundle's report: the tiny config, run here with the current environment; `-o` keeps
    # make from reinstalling that environment (an editable install would then point at this
    # temporary copy). PYTHONPATH puts this copy's package first, so the shipped report is made
    # by the code the bundle holds and its traces record this copy's commit, as the bundle's
    # COMMIT file does (the environment's editable package would record its own checkout's)
    venv = Path(sys.executable).parent.parent
    env = {**os.environ, "PYTHONPATH": str(src / "workflow")}
    start = time.monotonic()
    proc = subprocess.run(
        [
            "make",
            "-j2",  # the wheels download while the report's run works
            "artifact",
            f"VENV={venv}",
            "-o",
            f"{venv}/.installed",
            "CORES=2",
            "WHEELS=1",  # the offline bundle: the install below has no index to reach
            f"ARTIFACT_RUN=--configfile {' '.join(TINY)}",
        ],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    print(f"\nmake artifact: {time.monotonic() - start:.0f} s")
    (tarball,) = (src / "dist").glob("gpudissect-artifact-*.tar.gz")
    return src, tarball


@pytest.fixture(scope="module")
def unpacked(bundle, tmp_path_factory):
    _, tarball = bundle
    dst = tmp_path_factory.mktemp("unpacked")
    with tarfile.open(tarball) as tar:
        tar.extractall(dst, filter="data")
    (work,) = dst.iterdir()
    # move the shipped results aside: the run below must make its own
    shipped = dst / "shipped"
    shipped.mkdir()
    for part in ("report", "analysis", "figures"):
        shutil.move(work / "results" / part, shipped / part)
    env = _offline_env(work)
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", ".venv"], cwd=work, check=True)
    for args in (
        ["-r", "requirements.lock"],
        ["--no-deps", "-e", "."],
    ):
        proc = _offline(
            [
                "./.venv/bin/python",
                "-m",
                "pip",
                "install",
                "-q",
                "--no-index",
                "--find-links",
                "wheelhouse",
                *args,
            ],
            work,
            env,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    print(f"\noffline install: {time.monotonic() - start:.0f} s")
    return work, shipped, env


def test_bundle_holds_tree_wheelhouse_reference_and_report(bundle):
    src, tarball = bundle
    with tarfile.open(tarball) as tar:
        names = set(tar.getnames())
    (top,) = {n.split("/")[0] for n in names}
    assert top == tarball.name.removesuffix(".tar.gz")
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=src, capture_output=True, text=True, check=True
    ).stdout.split()
    assert {f"{top}/{f}" for f in tracked} <= names
    for must in (
        "ARTIFACT.md",
        "COMMIT",
        "results/report/report.md",
        "results/reference/h100/README.md",
    ):
        assert f"{top}/{must}" in names
    wheels = [n.split("/")[-1] for n in names if n.startswith(f"{top}/wheelhouse/")]
    assert any(re.match(r"pycuda-[\d.]+\.tar\.gz$", w) for w in wheels), "pycuda source archive"
    for pure in ("nvidia_ml_py-", "cuda_python-", "snakemake_executor_plugin_slurm-"):
        assert any(w.startswith(pure) and w.endswith("-py3-none-any.whl") for w in wheels), pure


# The order of these tests is the order they run in. The regeneration comes before the default
# pipeline, which writes into the same results/. Two quick tests follow the default pipeline:
# under pytest-xdist (loadscope) a worker is given the next module once two or fewer of its
# tests are left, and that module would wait behind the default pipeline's minutes while the
# other worker runs out of work.


def test_bundle_regenerates_its_report_offline(bundle, unpacked):
    src, _ = bundle
    work, shipped, env = unpacked
    proc = _offline(["./.venv/bin/snakemake", "--cores", "2", "--configfile", *TINY], work, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    made = sorted((work / "results/analysis").rglob("*.json"))
    assert made and len(made) == len(list(shipped.rglob("analysis/**/*.json")))
    for path in made:
        rel = path.relative_to(work / "results")
        ours, theirs = json.loads(path.read_text()), json.loads((shipped / rel).read_text())
        assert _results(ours) == _results(theirs), rel
    # the bundle has no git history: its traces record the commit its COMMIT file names, the one
    # it was made from
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=src, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert (work / "COMMIT").read_text().strip() == head
    assert f"`{head[:10]}`" in (work / "results/report/report.md").read_text()
    # the job times of the regeneration appendix differ between two runs
    times = r"(written \S+\.|\| \d+(\.\d+)? s \|)"
    ours = re.sub(times, "", (work / "results/report/report.md").read_text())
    assert ours == re.sub(times, "", (shipped / "report/report.md").read_text())


def test_default_pipeline_runs_offline_from_the_bundle(unpacked, monkeypatch):
    from report.test_report_truth import run_defects
    from test_topology import _check_traceable

    from gpudissect.topology import validate_topology

    work, _, env = unpacked
    start = time.monotonic()
    proc = _offline(["./.venv/bin/snakemake", "--cores", "2"], work, env, timeout=3000)
    assert proc.returncode == 0, proc.stderr[-3000:]
    print(f"\ndefault pipeline from the bundle: {time.monotonic() - start:.0f} s")
    report = (work / "results/report/report.md").read_text()
    # config/config.yaml's six simulated twins, each with its section and documents
    twins = ("gtx560ti", "gtx780", "gtx980", "tesla_m2070", "tesla_k20", "tesla_k20c")
    for name in twins:
        assert f"## {name}" in report, name
        assert (work / f"results/analysis/{name}/l1_size.json").is_file(), name
    # each twin's topology document validates against its schema, and every value in it is the
    # value its pointer names in an analysis document of the run (paths relative to the run)
    monkeypatch.chdir(work)
    for name in twins:
        topology = json.loads((work / f"results/topology/{name}.json").read_text())
        validate_topology(topology)
        assert _check_traceable(topology) > 20, name
    # the whole default run's report tells the truth (issue 34): states, labels, template text,
    # legends, readings of two methods that disagree flagged, fits beside their own verdicts
    assert run_defects(work / "results") == []


def _results(doc: dict) -> dict:
    """A document without when and from which checkout its trace was written: the bundle has no
    git history, so its traces say `unknown` where the build's say a commit."""
    for key in ("created_utc", "git_commit"):
        doc.get("trace", {}).pop(key, None)
    return doc


# A quick part of the bundle's own suite: the config, trace and family tests exercise the
# installed package and its data files. The whole suite repeated here would double CI's time;
# the end-to-end run is the test above.
BUNDLE_TESTS = ("tests/test_config.py", "tests/test_traces.py", "tests/test_families.py")


def test_the_tests_run_from_the_bundle(unpacked):
    work, _, env = unpacked
    proc = _offline(
        ["./.venv/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *BUNDLE_TESTS],
        work,
        env,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert re.search(r"\d+ passed", proc.stdout) and "failed" not in proc.stdout


def test_cuda_extra_resolves_from_the_wheelhouse_alone(unpacked):
    work, _, env = unpacked
    # pip builds pycuda's metadata from its source archive, with setuptools, wheel and numpy
    # taken from the wheelhouse: the whole `cuda` extra is there (building pycuda itself needs
    # CUDA and happens on a GPU host). An empty `~/.aksetup-defaults.py` (HOME is the bundle's
    # folder here) is pycuda's default configuration, without the setup's ten-second waits
    (work / ".aksetup-defaults.py").write_text("")
    proc = _offline(
        [
            "./.venv/bin/python",
            "-m",
            "pip",
            "download",
            "-q",
            "--no-index",
            "--find-links",
            "wheelhouse",
            "-d",
            str(work.parent / "cuda-check"),
            "--no-binary",
            "pycuda",
            "-c",
            "requirements.lock",
            ".[cuda]",
        ],
        work,
        env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
