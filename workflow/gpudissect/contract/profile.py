"""Where a sweep's wall time goes: the profile both backends keep while a sweep runs.

A sweep's wall time (`sweep.run_experiment`: from the backend open to the trace written) splits
into the calls into the backend (`Backend.run`, `run_chase`) and the experiment's own host work
between them (building chains and arrays with numpy, adaptive steps, assembling the table).
Inside the backend calls, the cuda backend times each driver call by kind (launch submission,
waits for the GPU, copies with their bytes, memsets, allocations, virtual-memory mapping); what
is left of a backend call is its handler's host work (Python and numpy beside the driver). The
sim backend has no driver: its backend calls are the simulator running, each counted as one
launch. Every timer is a host-side `perf_counter` around a call: nothing runs inside a kernel,
and no launch is moved, added or merged (the kernels time their loads with clock64 as before).

The profile goes to the sweep's log as one `sweep profile:` line (JSON), never into the trace.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

PROFILE_TAG = "sweep profile:"

# the driver-call kinds the cuda backend times; a sim profile has them all at zero
#   launch: submitting a kernel (the launch call returns before the kernel ends)
#   sync:   waiting for the GPU (context, event or stream synchronise): kernel execution that
#           the host waited for
#   htod / dtoh / dtod: copies (a blocking copy back also waits for the kernels before it)
#   memset: device memsets; alloc: device and pinned host allocations
#   map:    virtual-memory reservations, physical allocations and mappings, and their release
KINDS = ("launch", "sync", "htod", "dtoh", "dtod", "memset", "alloc", "map")
COPY_KINDS = ("htod", "dtoh", "dtod")


class SweepProfile:
    """Counters and host-side timers of one sweep's backend (see the module docstring)."""

    def __init__(self) -> None:
        # per kind: [calls, seconds, bytes], lists the driver stand-ins add to in place (a
        # launch of a few microseconds should not wait on the counting)
        self._acc = {k: [0, 0.0, 0] for k in KINDS}
        self.backend_calls = 0
        self.backend_s = 0.0
        self._depth = 0

    def accumulator(self, kind: str) -> list:
        """The [calls, seconds, bytes] of `kind`, to add to in place."""
        return self._acc[kind]

    def add(self, kind: str, seconds: float, *, nbytes: int = 0, calls: int = 1) -> None:
        """Count `calls` driver calls of `kind` that took `seconds` (and moved `nbytes`)."""
        acc = self._acc[kind]
        acc[0] += calls
        acc[1] += seconds
        acc[2] += int(nbytes)

    @property
    def calls(self) -> dict[str, int]:
        return {k: a[0] for k, a in self._acc.items()}

    @property
    def seconds(self) -> dict[str, float]:
        return {k: a[1] for k, a in self._acc.items()}

    @property
    def copy_bytes(self) -> dict[str, int]:
        return {k: self._acc[k][2] for k in COPY_KINDS}

    @contextmanager
    def timed(self, kind: str, *, nbytes: int = 0) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(kind, time.perf_counter() - start, nbytes=nbytes)

    @contextmanager
    def backend_call(self, *, launch: bool = False) -> Iterator[None]:
        """One call into the backend; calls made from inside it count in the outermost only.
        `launch`: the call is itself one launch (the simulator's runs of work)."""
        self._depth += 1
        start = time.perf_counter()
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                self.backend_calls += 1
                self.backend_s += time.perf_counter() - start
                if launch:
                    self._acc["launch"][0] += 1

    def summary(
        self, *, wall_s: float, run_s: float, write_s: float, backend: str
    ) -> dict[str, Any]:
        """The profile as the `sweep profile:` line holds it. `wall_s`: the sweep's wall time
        (its `sweep timing:` elapsed_s); `run_s`: the experiment's run, backend calls
        included; `write_s`: writing the trace."""
        calls, seconds, copy_bytes = self.calls, self.seconds, self.copy_bytes
        driver_s = sum(seconds.values())
        out: dict[str, Any] = {
            "backend": backend,
            "wall_s": round(wall_s, 4),
            "run_s": round(run_s, 4),
            "trace_write_s": round(write_s, 4),
            # opening clocks, device info and facts, before and after the run
            "setup_s": round(max(wall_s - run_s - write_s, 0.0), 4),
            "backend_calls": self.backend_calls,
            "backend_s": round(self.backend_s, 4),
            # the experiment's host work between backend calls (numpy, pandas, adaptive steps)
            "experiment_host_s": round(max(run_s - self.backend_s, 0.0), 4),
            # the handlers' host work beside the driver calls (on the simulator: the simulator)
            "backend_host_s": round(max(self.backend_s - driver_s, 0.0), 4),
            "launches": calls["launch"],
        }
        for k in KINDS:
            out[f"{k}_calls"] = calls[k]
            out[f"{k}_s"] = round(seconds[k], 4)
        for k in COPY_KINDS:
            out[f"{k}_bytes"] = copy_bytes[k]
        return out


def profiled_call(method: Callable) -> Callable:
    """Decorate a backend method so that it counts as one backend call of the backend's
    profile (and as one launch where the backend's `calls_are_launches`: the simulator)."""

    @functools.wraps(method)
    def inner(self, *args: Any, **kwargs: Any) -> Any:
        # `backend_call` written out: a sweep of many short launches makes tens of thousands
        # of these calls, and a context manager's own work was a tenth of its host time
        profile = self.sweep_profile
        profile._depth += 1
        start = time.perf_counter()
        try:
            return method(self, *args, **kwargs)
        finally:
            profile._depth -= 1
            if profile._depth == 0:
                profile.backend_calls += 1
                profile.backend_s += time.perf_counter() - start
                if self.calls_are_launches:
                    profile._acc["launch"][0] += 1

    return inner
