"""`make artifact`'s WHEELS option, read from make's dry run (the build itself is
tests/test_artifact_bundle.py): 0 leaves the wheelhouse out, 1 resolves it from the wheel
cache, anything else is refused naming what is allowed."""

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not shutil.which("make"), reason="needs make")


def _dry_run(*args: str) -> subprocess.CompletedProcess:
    # VENV names a folder that does not exist: nothing in a dry run reaches for it
    return subprocess.run(
        ["make", "-n", "artifact", "VENV=/nonexistent-venv-for-the-test", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
    )


def _commands(proc: subprocess.CompletedProcess) -> list[str]:
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_the_default_bundle_leaves_the_wheelhouse_out():
    lines = _commands(_dry_run())
    assert any(line.startswith("tar -czf dist/gpudissect-artifact-") for line in lines)
    assert not [line for line in lines if "wheelhouse" in line or "pip download" in line]


def test_wheels_1_puts_the_wheelhouse_in_from_the_cache():
    lines = _commands(_dry_run("WHEELS=1", "WHEEL_CACHE=/cache-for-the-test"))
    text = " ".join(line.rstrip("\\").strip() for line in lines)
    # the cache is filled first (with the index), then the bundle's wheelhouse from it alone
    fill = text.index("pip download -q -d /cache-for-the-test")
    copy = text.index(
        "pip download -q --no-index --find-links /cache-for-the-test -d "
        "build/artifact/gpudissect-artifact-"
    )
    assert fill < copy


def test_switching_wheels_makes_the_bundle_again():
    lines = _commands(_dry_run("WHEELS=1", "WHEEL_CACHE=/cache-for-the-test"))
    assert "mkdir -p dist && rm -f dist/.wheels-* && touch dist/.wheels-1" in lines


@pytest.mark.parametrize("bad", ["2", "yes", ""])
def test_a_wheels_value_other_than_0_or_1_is_refused_naming_what_is_allowed(bad):
    proc = _dry_run(f"WHEELS={bad}")
    assert proc.returncode != 0
    assert f"WHEELS={bad}: allowed are 0" in proc.stderr and "and 1" in proc.stderr
