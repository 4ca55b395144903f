"""A non-editable install: the wheel carries the schemas, the papers' values and the captions,
and the tiny pipeline (its l1_size sweep alone: the test checks where the imports and data files
come from, which every experiment does alike) runs with it from a copy of the workflow that holds
no package source."""

import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _run(cmd, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    assert proc.returncode == 0, (cmd, proc.stdout[-2000:], proc.stderr[-3000:])
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel, built offline from a copy of the sources (the build leaves no `build/` in the
    checkout); copying follows the data/ links, as a source distribution would."""
    src = tmp_path_factory.mktemp("src")
    for item in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / item, src / item)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc")
    shutil.copytree(
        REPO / "workflow" / "gpudissect", src / "workflow" / "gpudissect", ignore=ignore
    )
    dist = tmp_path_factory.mktemp("dist")
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
        + ["-q", "-w", str(dist), str(src)]
    )
    (whl,) = dist.glob("gpudissect-*.whl")
    return whl


def test_wheel_carries_the_data_files(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in (
        "gpudissect/data/schemas/config.schema.yaml",
        "gpudissect/data/schemas/profile.schema.yaml",
        "gpudissect/data/schemas/experiments/caches.schema.yaml",
        "gpudissect/data/papers/tpds_table5.yaml",
    ):
        assert path in names, path
    for folder, pattern in (
        ("schemas/experiments", "*.yaml"),
        ("papers", "*.yaml"),
        ("captions", "*.rst"),
    ):
        shipped = {n.split("/")[-1] for n in names if n.startswith(f"gpudissect/data/{folder}/")}
        expected = {p.name for p in (REPO / "workflow/gpudissect/data" / folder).glob(pattern)}
        assert expected and shipped == expected, folder


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """A fresh venv with the wheel installed (not editable); the dependencies come from this
    interpreter's site-packages through a .pth line (its .pth files, the editable install among
    them, are not processed from there)."""
    env_dir = tmp_path_factory.mktemp("venv")
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"])
    Path(site.stdout.strip(), "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
        + ["--no-index", str(wheel)]
    )
    return python


def test_installed_package_is_not_the_source(installed):
    proc = _run([str(installed), "-c", "import gpudissect; print(gpudissect.__file__)"], cwd="/")
    where = Path(proc.stdout.strip())
    assert "site-packages" in where.parts and REPO not in where.parents


def test_tiny_pipeline_runs_with_the_installed_package(installed, tmp_path):
    work = tmp_path / "work"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    # the workflow without workflow/gpudissect: every import must find the installed package
    for item in ("Snakefile", "workflow/rules", "workflow/scripts", "workflow/report", "config",
                 "kernels", "envs", "tests/data"):  # fmt: skip
        src, dst = REPO / item, work / item
        if src.is_dir():
            shutil.copytree(src, dst, ignore=ignore)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dst)
    env = {"PATH": f"{installed.parent}:/usr/bin:/bin", "HOME": str(work)}
    _run(
        [str(installed), "-m", "snakemake", "--cores", "2"]
        + ["--configfile", "tests/data/tiny_config.yaml", "tests/data/l1_size_only.yaml"],
        cwd=work,
        env=env,
    )
    report = (work / "results/report/report.md").read_text()
    assert "Measured l1d size (shared buffer 16 KiB): **2 KiB (2048 B)**" in report
    _run(
        [str(installed), "-m", "gpudissect", "validate", "--config", "config/config.yaml"], cwd=work
    )
