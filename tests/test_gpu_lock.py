"""The GPU's measurement lock (gpudissect/backends/gpu_lock.py): one holder at a time across
processes, per GPU, given back by `release()` or by the holder's death."""

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from gpudissect.backends.gpu_lock import GpuLock, lock_path

REPO = Path(__file__).resolve().parents[1]
# a second process says it is about to ask (its start-up and imports done), takes the lock of GPU
# argv[1], prints how long it waited, holds it argv[2] seconds
HOLDER = """
import sys, time
from gpudissect.backends.gpu_lock import GpuLock
print("asking", flush=True)
lock = GpuLock(sys.argv[1])
print(f"{lock.waited_s:.3f}", flush=True)
time.sleep(float(sys.argv[2]))
lock.release()
"""


@pytest.fixture
def tmpdir_for_locks(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _holder(tmp: Path, gpu: str, hold_s: float) -> subprocess.Popen:
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(REPO / "workflow")}
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, gpu, str(hold_s)], stdout=subprocess.PIPE, text=True, env=env
    )


def test_a_second_process_waits_until_the_holder_lets_go(tmpdir_for_locks):
    lock = GpuLock("00000000:19:00.0")
    assert lock.path == lock_path("00000000:19:00.0")
    assert lock.path.parent == tmpdir_for_locks
    child = _holder(tmpdir_for_locks, "00000000:19:00.0", 0)
    # the wait is timed from the child's request, not from its start (imports take a while
    # on a loaded machine)
    assert child.stdout.readline().strip() == "asking"
    time.sleep(1.0)
    assert child.poll() is None  # still waiting
    lock.release()
    out, _ = child.communicate(timeout=30)
    assert child.returncode == 0
    assert float(out) >= 0.9  # it waited for the release


def test_another_gpu_is_not_held_up(tmpdir_for_locks):
    lock = GpuLock("00000000:19:00.0")
    try:
        child = _holder(tmpdir_for_locks, "00000000:3B:00.0", 0)
        out, _ = child.communicate(timeout=30)
        assert child.returncode == 0 and float(out.split()[-1]) < 0.5
    finally:
        lock.release()


def test_a_holder_that_dies_lets_go(tmpdir_for_locks):
    child = _holder(tmpdir_for_locks, "00000000:19:00.0", 600)
    assert child.stdout.readline().strip() == "asking"
    assert child.stdout.readline().strip()  # it holds the lock
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    started = time.monotonic()
    lock = GpuLock("00000000:19:00.0")
    lock.release()
    assert time.monotonic() - started < 5
    lock.release()  # a second release does nothing
