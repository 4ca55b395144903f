"""`make artifact`'s WHEELS option, read from make's dry run of the Makefile in a folder of its
own (the build itself is tests/test_artifact_bundle.py): 0 leaves the wheelhouse out, 1
resolves it from the wheel cache, a switch between them makes the bundle again, and anything
else is refused naming what is allowed."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not shutil.which("make"), reason="needs make")


@pytest.fixture
def work(tmp_path):
    """The Makefile and the version it reads, a finished report and an installed (stand-in)
    environment: what `make artifact` needs before it packs."""
    for name in ("Makefile", "pyproject.toml", "requirements.lock"):
        shutil.copy(REPO / name, tmp_path / name)
    (tmp_path / "venv").mkdir()
    (tmp_path / "results" / "report").mkdir(parents=True)
    later = (tmp_path / "Makefile").stat().st_mtime + 10
    for made in ("venv/.installed", "results/report/report.md"):
        (tmp_path / made).write_text("")
        os.utime(tmp_path / made, (later, later))
    return tmp_path


def _dry_run(work: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "-n", "artifact", f"VENV={work / 'venv'}", *args],
        cwd=work,
        capture_output=True,
        text=True,
    )


def _commands(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stderr
    # the recipe lines as make prints them, continuation lines joined
    return " ".join(line.rstrip("\\").strip() for line in proc.stdout.splitlines())


def _built(work: Path, wheels: str) -> None:
    """A bundle built with WHEELS=`wheels`: its stamp, then the bundle, both newer than the
    report and the environment."""
    dist = work / "dist"
    dist.mkdir()
    (dist / f".wheels-{wheels}").write_text("")
    version = re.search(r'^version = "(.*)"$', (work / "pyproject.toml").read_text(), re.M)[1]
    bundle = dist / f"gpudissect-artifact-{version}.tar.gz"
    bundle.write_text("")
    later = (work / "results" / "report" / "report.md").stat().st_mtime + 10
    os.utime(dist / f".wheels-{wheels}", (later, later))
    os.utime(bundle, (later + 1, later + 1))


def test_the_default_bundle_leaves_the_wheelhouse_out(work):
    text = _commands(_dry_run(work))
    assert "tar -czf dist/gpudissect-artifact-" in text
    assert "wheelhouse" not in text and "pip download" not in text


def test_wheels_1_puts_the_wheelhouse_in_from_the_cache(work):
    text = _commands(_dry_run(work, "WHEELS=1", "WHEEL_CACHE=/cache-for-the-test"))
    # the cache is filled first (with the index), then the bundle's wheelhouse from it alone
    fill = text.index("pip download -q -d /cache-for-the-test")
    copy = text.index(
        "pip download -q --no-index --find-links /cache-for-the-test -d "
        "build/artifact/gpudissect-artifact-"
    )
    assert fill < copy < text.index("tar -czf dist/gpudissect-artifact-")


def test_a_bundle_is_made_again_only_when_wheels_changes(work):
    _built(work, "0")
    assert "tar -czf" not in _commands(_dry_run(work))  # up to date
    switched = _commands(_dry_run(work, "WHEELS=1", "-o", "wheel-cache"))
    assert "rm -f dist/.wheels-* && touch dist/.wheels-1" in switched
    assert "tar -czf dist/gpudissect-artifact-" in switched


@pytest.mark.parametrize("bad", ["2", "yes", ""])
def test_a_wheels_value_other_than_0_or_1_is_refused_naming_what_is_allowed(work, bad):
    proc = _dry_run(work, f"WHEELS={bad}")
    assert proc.returncode != 0
    assert f"WHEELS={bad}: allowed are 0" in proc.stderr and "and 1" in proc.stderr
