"""Run one experiment on one configured device and write its trace with full provenance."""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from .backends import open_backend
from .config import DeviceEntry
from .contract.profile import PROFILE_TAG
from .exceptions import ConfigError
from .families import family
from .limits import available_memory_bytes, sweep_memory_problem
from .provenance import base_provenance
from .traces import write_trace

log = logging.getLogger(__name__)
TIMING_TAG = "sweep timing:"
# a folder: each sweep's run (the experiment and its backend calls) is profiled with cProfile
# into <folder>/<device>_<experiment>.pstats (benchmarks/bench_gpu_pipeline.py --pstats); the
# profiler slows the run, so its times are for finding the costly functions, not for timing
PSTATS_ENV = "GPUDISSECT_SWEEP_PSTATS"


def _progress(name: str):
    last = [0.0]

    def report(done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - last[0] > 5:
            last[0] = now
            log.info("%s: %d/%d points", name, done, total)

    return report


def _profiled(name: str, fn, *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)`, under cProfile into the `PSTATS_ENV` folder when it is set."""
    folder = os.environ.get(PSTATS_ENV)
    if not folder:
        return fn(*args, **kwargs)
    import cProfile

    Path(folder).mkdir(parents=True, exist_ok=True)
    profiler = cProfile.Profile()
    try:
        return profiler.runcall(fn, *args, **kwargs)
    finally:
        profiler.dump_stats(Path(folder) / f"{name}.pstats")


def _refuse_oversized(device: DeviceEntry, experiment: str) -> None:
    """Refuse, before the backend opens, a simulated sweep whose caches cannot fit in this
    machine (a cuda sweep's arrays live on the GPU, whose memory the driver guards)."""
    if device.backend != "sim" or device.profile is None:
        return
    from .sim.profile import load_profile

    problem = sweep_memory_problem(load_profile(device.profile), available=available_memory_bytes())
    if problem is not None:
        raise ConfigError(f"{device.name}/{experiment}: the sweep {problem}")


def run_experiment(
    device: DeviceEntry,
    experiment: str,
    *,
    out: str | os.PathLike,
    cubin_dir: str | os.PathLike | None = None,
    inputs: dict[str, str] | None = None,
    repeat: int = 1,
) -> Path:
    """Run `experiment` on `device`, write the trace to `out` atomically, return its path.
    `repeat` > 1: a repeat of the run (config key `repeats`), seeded apart from the first."""
    device = device.for_repeat(repeat)
    fam = family(experiment)
    params = device.params[experiment]
    fragment = device.sweep_fragment(experiment)
    _refuse_oversized(device, experiment)
    # a GPU is this sweep's alone while its backend is open (another sweep job may wait for it)
    with open_backend(device, cubin_dir=cubin_dir, exclusive=True) as backend:
        started_utc = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        started = time.monotonic()
        lock = backend.lock
        if lock is not None and lock.waited_s >= 0.01:
            log.info("%s: waited %.2f s for the GPU (%s)", experiment, lock.waited_s, lock.path)
        clocks_before = backend.clock_record()
        info = backend.device_info()
        facts = backend.facts()
        run_started = time.monotonic()
        data = _profiled(
            f"{device.name}_{experiment}" + (f".r{repeat}" if repeat > 1 else ""),
            fam.run,
            backend,
            params,
            device=device,
            inputs=inputs or {},
            progress=_progress(f"{device.name}/{experiment}"),
        )
        run_s = time.monotonic() - run_started
        clocks_after = backend.clock_record()
        kernels = {}
        if backend.kind == "cuda":
            kernels = {f"{k}.cubin_sha256": backend.cubin_sha256(k) for k in fam.kernels}
    provenance: dict[str, Any] = base_provenance(config_fragment=fragment) | {
        "experiment": experiment,
        "device": device.name,
        "backend": device.backend,
        "device_info": info,
        # the driver's facts the automatic sweep ranges started from (never read by an analysis)
        "device_facts": facts.as_dict(),
        "clocks_before": clocks_before,
        "clocks_after": clocks_after,
        "carveouts_pct": list(device.carveouts) if backend.supports_carveout else None,
        "kernels": kernels,
        "inputs": inputs or {},
    }
    if repeat > 1:
        provenance["repeat"] = repeat
    write_started = time.monotonic()
    path = write_trace(out, data, schema=fam.schema, provenance=provenance)
    write_s = time.monotonic() - write_started
    # wall-clock facts go to the log, never into the trace: the trace stays byte-identical for
    # a config and seed (benchmarks/bench_gpu_pipeline.py reads this line); the time runs from
    # the device's backend open (on a GPU, its lock taken) to the trace written
    wall_s = time.monotonic() - started
    timing = {"started_utc": started_utc, "elapsed_s": round(wall_s, 3)}
    log.info("%s %s", TIMING_TAG, json.dumps(timing))
    # where that time went (contract/profile.py): launches, waits, copies, host work
    profile = backend.sweep_profile.summary(
        wall_s=wall_s, run_s=run_s, write_s=write_s, backend=backend.kind
    )
    log.info("%s %s", PROFILE_TAG, json.dumps(profile))
    return path
