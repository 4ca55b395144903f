"""Warm job starts for a local pipeline run: a process that has imported the package once forks
a copy of itself for each job.

Every job of a run is a new interpreter (`python -m gpudissect analyze ...`, the sweep script):
on a 2-core machine its imports (pandas, pyarrow, scipy, matplotlib) and the simulator's
compiled kernels, loaded from numba's cache, take one to two seconds of CPU before the job's
own work starts, which on the default run is more than the work of most of its jobs. Here one
server process imports all of that when the run starts (the workflow's `onstart`), and a job's
interpreter, still the one Snakemake starts, hands its command to the server over a Unix
socket and waits: the server forks, the child takes the job's standard streams, working folder,
environment and arguments, runs the job, and its exit status becomes the job's. Nothing else
changes: the job runs the same code on the same inputs, writes the same outputs (the traces
byte for byte), and Snakemake sees the same process start and end.

A job falls back to running itself, as before, when no server is named in its environment
(`GPUDISSECT_FORKSERVER`), the server is not up yet or has gone, or the server runs another
interpreter or package than the job's (a job in a conda environment, say). A sweep on a CUDA
device always runs itself. When the job's own process ends (Snakemake stops it, Ctrl-C) the
server kills the child's process group at once, so an interrupted job stops as it did before.
`GPUDISSECT_FORKSERVER=off` in the environment of the run turns the server off.
"""

from __future__ import annotations

import os
import pickle
import selectors
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ENV = "GPUDISSECT_FORKSERVER"
_LEN = struct.Struct("!Q")
_STATUS = struct.Struct("!i")
_ACCEPTED, _REFUSED = b"A", b"R"


def _identity() -> dict[str, str]:
    """What must be the same in a job and the server for the child to be the job's own process:
    the interpreter, the package's files and the module search path of the environment."""
    import gpudissect

    return {
        "executable": os.path.realpath(sys.executable),
        "package": os.path.realpath(os.path.dirname(gpudissect.__file__)),
        "pythonpath": os.environ.get("PYTHONPATH", ""),
    }


def _package_stamp() -> tuple[int, int]:
    """The package's Python files, as their count and latest change: a server whose package
    changed since it started (a checkout edited during a run) takes no more jobs, which then
    import the package as it is now, as each job did before the server."""
    root = Path(__file__).resolve().parent
    latest, count = 0, 0
    for path in root.rglob("*.py"):
        try:
            latest = max(latest, path.stat().st_mtime_ns)
        except OSError:
            continue
        count += 1
    return count, latest


def _recv_exactly(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            return data
        data += chunk
    return data


# --- the job's side -------------------------------------------------------------------------


def forward(kind: str, job: Any) -> None:
    """Run this job in the server named by GPUDISSECT_FORKSERVER and exit with its status.
    Returns (having done nothing) when there is no server to take it: the caller then runs the
    job itself. `kind` is "cli" (`job`: the arguments of `python -m gpudissect`) or "sweep"
    (`job`: the keyword arguments of `gpudissect.sweep_job.run_job`)."""
    path = os.environ.get(ENV, "")
    if not path or path == "off":
        return
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(path)
    except OSError:
        return
    with conn:
        request = pickle.dumps(
            {
                "kind": kind,
                "job": job,
                "cwd": os.getcwd(),
                "env": dict(os.environ),
                "identity": _identity(),
            }
        )
        try:
            # the job's standard streams travel with the request: the child writes where this
            # process would (its log, Snakemake's terminal)
            socket.send_fds(conn, [_LEN.pack(len(request))], [0, 1, 2])
            conn.sendall(request)
            answer = _recv_exactly(conn, 1)
        except OSError:
            return
        if answer != _ACCEPTED:
            return  # refused (another interpreter or package) or gone before it took the job
        status = _recv_exactly(conn, _STATUS.size)
    if len(status) != _STATUS.size:
        print(
            "gpudissect: the fork server ended while it ran this job; run again, or set "
            f"{ENV}=off to run each job in its own interpreter",
            file=sys.stderr,
        )
        sys.exit(1)
    sys.exit(_STATUS.unpack(status)[0])


# --- the server's side ----------------------------------------------------------------------


def _run_cli(job: list[str]) -> int:
    from .cli import main

    sys.argv = ["gpudissect", *job]
    return main(job)


def _run_sweep(job: dict[str, Any]) -> int:
    from .sweep_job import run_job

    run_job(**job)
    return 0


RUNNERS: dict[str, Callable[[Any], int]] = {"cli": _run_cli, "sweep": _run_sweep}


def preload() -> None:
    """Import what the jobs of a run import, and load the simulator's kernels from numba's
    cache by running one short chase, so that a forked child starts with them in memory. What
    cannot be imported here (numba on a GPU host that runs no simulation) is left to the jobs
    that need it. The server reads no file of the run and starts no thread here (a fork copies
    only the thread that calls it)."""
    import importlib

    import matplotlib

    matplotlib.use("Agg")

    from .families import FAMILIES

    for name in ("cli", "sweep_job", "traces", "topology.build", "report.render"):
        try:
            importlib.import_module(f"{__package__}.{name}")
        except ImportError:
            pass
    for fam in FAMILIES.values():  # each family's experiment, analysis, table and figure modules
        for ref in (fam.analyse, fam.table, fam.plot, fam.report_section):
            if ref is not None:
                try:
                    ref.resolve()
                except ImportError:
                    pass
        try:
            _ = fam.schema
        except ImportError:
            pass
    try:
        _warm_simulator()
    except ImportError:
        pass


def _warm_simulator() -> None:
    import numpy as np

    from .sim import SimGPU, load_profile

    # a profile of the checkout the run works in (none: the kernels load in each job instead)
    profile = Path("config", "devices", "gtx780.yaml")
    if not profile.is_file():
        return
    gpu = SimGPU(load_profile(profile), seed=0)
    chain = ((np.arange(1024) + 1) % 1024).astype(np.uint32)
    for path in gpu.paths:
        gpu.chase(
            path,
            chain,
            element_bytes=4,
            base_address_bytes=0,
            start_index=0,
            warmup_steps=4,
            record_steps=4,
        )


def _child(conn: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: become the job's process and run it; never returns."""
    status = 1
    try:
        os.setpgid(0, 0)  # its own group, which the server kills when the job's process ends
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        conn.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        status = RUNNERS[request["kind"]](request["job"])
    except SystemExit as exc:
        code = exc.code
        status = code if isinstance(code, int) else (0 if code is None else 1)
        if not isinstance(code, int | None):
            print(code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - the job's error, shown as the job itself shows it
        import traceback

        traceback.print_exc()
        status = 1
    finally:
        try:
            import logging

            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status if isinstance(status, int) and 0 <= status < 256 else 1)


def serve(path: str, parent_pid: int) -> None:
    """Preload, then answer jobs on the Unix socket `path` until the run's process
    (`parent_pid`) has gone or SIGTERM comes. The socket appears only once the preload is done:
    a job that starts before that runs itself."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the jobs; the run stops us

    def terminate(*_: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, terminate)
    preload()
    sys.stdout.flush()
    sys.stderr.flush()
    identity = _identity()
    stamp = _package_stamp()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    staging = f"{path}.{os.getpid()}"
    listener.bind(staging)
    os.chmod(staging, 0o600)
    listener.listen(64)
    os.replace(staging, path)
    inode = os.stat(path).st_ino
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    running: dict[int, socket.socket] = {}  # child pid -> the job's connection
    try:
        while True:
            for key, _ in sel.select(timeout=0.5):
                if key.fileobj is listener:
                    _take(listener, identity, stamp, sel, running)
                else:  # the job's process closed its end: it was stopped
                    conn = key.fileobj
                    try:
                        gone = not conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
                    except BlockingIOError:
                        gone = False
                    except OSError:
                        gone = True
                    if gone:
                        sel.unregister(conn)
                        for pid, c in running.items():
                            if c is conn:
                                _kill_group(pid)
            _reap(sel, running)
            if os.getppid() != parent_pid:
                break
    finally:
        for pid in list(running):
            _kill_group(pid)
        sel.close()
        listener.close()
        try:
            if os.stat(path).st_ino == inode:  # ours, not a later run's
                os.unlink(path)
        except OSError:
            pass


def _take(listener, identity, stamp, sel, running) -> None:
    conn, _ = listener.accept()
    try:
        conn.settimeout(10)
        head, fds, _, _ = socket.recv_fds(conn, _LEN.size, 3)
        request = pickle.loads(_recv_exactly(conn, _LEN.unpack(head)[0]))
        conn.settimeout(None)
    except (OSError, ValueError, struct.error, pickle.UnpicklingError, EOFError):
        conn.close()
        return
    why = (
        "it runs another interpreter, package or module path than this server"
        if request.get("identity") != identity
        else f"unknown kind {request.get('kind')!r}"
        if request.get("kind") not in RUNNERS
        else "the package's files changed since this server started"
        if _package_stamp() != stamp
        else None
    )
    if why is not None:
        print(f"forkserver: a job runs itself: {why}", file=sys.stderr, flush=True)
        for fd in fds:
            os.close(fd)
        conn.sendall(_REFUSED)
        conn.close()
        return
    conn.sendall(_ACCEPTED)
    pid = os.fork()
    if pid == 0:
        sel.close()
        listener.close()
        for other in running.values():
            other.close()
        _child(conn, request, list(fds))
    for fd in fds:
        os.close(fd)
    running[pid] = conn
    sel.register(conn, selectors.EVENT_READ)


def _reap(sel, running) -> None:
    while running:
        try:
            pid, wait_status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = running.pop(pid, None)
        if conn is None:
            continue
        code = os.waitstatus_to_exitcode(wait_status)
        status = code if code >= 0 else 128 - code  # killed by signal N: 128 + N, as a shell says
        try:
            sel.unregister(conn)
        except (KeyError, ValueError):
            pass
        try:
            conn.sendall(_STATUS.pack(status))
        except OSError:
            pass
        conn.close()


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def start(folder: str | os.PathLike) -> tuple[Any, str] | None:
    """Start a server for this run (from the workflow's `onstart`): its socket and log go in
    `folder` (the socket in the temporary folder where that path is too long for one) and the
    socket's path into this process's environment, which every local job inherits. Returns the
    server's process and the socket path, or None where GPUDISSECT_FORKSERVER=off."""
    import subprocess

    if os.environ.get(ENV) == "off":
        return None
    name = f"gpudissect-forkserver-{os.getpid()}.sock"
    path = str(Path(folder, name).resolve())
    if len(path.encode()) > 100:  # a Unix socket's path holds at most 107 bytes
        import tempfile

        path = str(Path(tempfile.gettempdir(), name))
    # its own errors (a preload that failed: the jobs then run themselves) go to a log beside
    Path(folder).mkdir(parents=True, exist_ok=True)
    with open(Path(folder, "forkserver.log"), "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpudissect.forkserver", path, str(os.getpid())],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
    os.environ[ENV] = path
    return proc, path


def stop(server: tuple[Any, str] | None, *, wait_s: float = 5.0) -> None:
    """Stop a server `start` returned (from `onsuccess` and `onerror`)."""
    if server is None:
        return
    proc, path = server
    os.environ.pop(ENV, None)
    if proc.poll() is None:
        proc.terminate()
        deadline = time.monotonic() + wait_s
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if proc.poll() is None:
            proc.kill()
    try:
        os.unlink(path)
    except OSError:
        pass


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
