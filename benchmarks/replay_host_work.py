"""Host-side work of a sweep, timed without its device: the trace's launches replayed.

An adaptive sweep (caches, tlb_mappings, requests, l1_sets, l2_slices...) reads its own
launches between them to decide the next ones. Given back, launch by launch, what its trace
recorded, the experiment makes the same decisions and the same launches, so the time it takes
here is its host work alone (building chains and arrays, reading the walks so far, assembling
rows): the `experiment_host_s` of its `sweep profile:` line, measured on any machine, without a
GPU.

    python benchmarks/replay_host_work.py results/reference/h200/traces/gpu0/caches.parquet

The parameters are the trace's own (its provenance's config fragment), the driver's facts its
`device_facts`, its inputs (a stage-1 document...) read from the trace's results folder.
Each replayed launch must ask for as many records as the trace holds for it (a replay that
drifts from the trace stops with the launch that differs). `--profile N` prints the N costliest
functions (cProfile); `--check` compares the replayed rows with the trace's.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

from gpudissect.contract.backend import Backend, ChaseResult, handles
from gpudissect.contract.facts import DeviceFacts
from gpudissect.exceptions import TraceError
from gpudissect.experiments.l2_slices import (
    L2ContentionResult,
    L2ContentionWork,
    L2SliceResult,
    L2SliceWork,
)
from gpudissect.experiments.mapped_chase import MappedChaseWork, ReleaseMapping
from gpudissect.experiments.pointer_walk import PointerWalkWork, WalkResult
from gpudissect.experiments.requests import RequestsResult, RequestsWork
from gpudissect.families import family
from gpudissect.traces import read_trace

# families whose launches this replay gives back, and how a launch finds its rows: by the
# order of run_chase calls (the trace's `point`), by the seed each launch is run with, or as
# the next rows of a trace kept in launch order
REPLAYED = {
    "cache_stage1": "order",
    "caches": "order",
    "pchase_classic": "order",
    "tlb_mappings": "seed",
    "l1_sets": "seed",
    "requests": "seed",
    "l2_slices": "rows",
}


class ReplayBackend(Backend):
    """Gives each launch the rows its trace recorded for it (see the module docstring)."""

    kind = "replay"

    def __init__(self, data: pd.DataFrame, provenance: dict, experiment: str) -> None:
        self.experiment = experiment
        self.provenance = provenance
        self.cursor = 0  # "rows": the next launch's first row (the trace's rows in launch order)
        self.rows: dict[int, dict[str, Any]] = {}
        self.launches = 0
        if REPLAYED.get(experiment) == "rows":  # its columns as arrays, sliced launch by launch
            self.columns = {c: data[c].to_numpy() for c in data.columns}
            return
        if experiment == "requests":  # a launch's seed: point + repeat * points of a pass
            planned = int(data["point"].max()) + 1
            keys = data["repeat"].to_numpy(np.int64) * planned + data["point"].to_numpy(np.int64)
        else:
            keys = data["point"].to_numpy(np.int64)
        # every launch's arrays cut out here, before the timed replay, so that giving them
        # back costs next to nothing
        order = np.argsort(keys, kind="stable")
        bounds = np.flatnonzero(np.r_[True, np.diff(keys[order]) != 0, True])
        columns = {
            c: data[c].to_numpy()[order]
            for c in ("latency_cycles", "index", "sm_clock_mhz", "elapsed_cycles")
            if c in data.columns
        }
        self.rows: dict[int, dict[str, Any]] = {}
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            got = {c: v[a:b] for c, v in columns.items()}
            clock = got.pop("sm_clock_mhz", None)
            got["sm_clock_mhz"] = float("nan") if clock is None else float(clock[0])
            if "elapsed_cycles" in got:
                got["elapsed_cycles"] = np.stack([np.asarray(e) for e in got["elapsed_cycles"]])
            self.rows[int(keys[order[a]])] = got
        self.launches = 0

    def take(self, key: int, records: int) -> dict[str, Any]:
        rows = self.rows.get(int(key))
        held = 0 if rows is None else len(next(v for v in rows.values() if np.ndim(v)))
        if held != records:
            raise TraceError(
                f"replay of {self.experiment}: launch {key} asks for {records} records; the "
                f"trace holds {held} for it (the replay drifted)"
            )
        self.launches += 1
        return rows

    def take_rows(self, records: int) -> dict[str, np.ndarray]:
        """The columns of the next `records` rows of a trace kept in launch order
        (l2_slices)."""
        a, b = self.cursor, self.cursor + records
        rows = {c: v[a:b] for c, v in self.columns.items()}
        if len(rows["offset_bytes"]) != records:
            raise TraceError(
                f"replay of {self.experiment}: launch {self.launches} asks for {records} "
                f"records; the trace holds {len(rows['offset_bytes'])} more (the replay drifted)"
            )
        self.cursor += records
        self.launches += 1
        return rows

    def device_info(self) -> dict:
        return dict(self.provenance.get("device_info") or {})

    def facts(self) -> DeviceFacts:
        return DeviceFacts(**self.provenance["device_facts"])

    @property
    def supports_carveout(self) -> bool:
        return self.provenance.get("carveouts_pct") is not None

    def clocks(self) -> dict:
        return dict(self.provenance.get("clocks_before") or {})

    def run_chase(self, work, *, carveout_pct, seed=0) -> ChaseResult:
        rows = self.take(self.launches, work.record_steps)
        return _chase_result(rows)


def _chase_result(rows: dict[str, Any]) -> ChaseResult:
    return ChaseResult(
        latency_cycles=rows["latency_cycles"].astype(np.uint32),
        indices=rows["index"].astype(np.uint32),
        sm_clock_mhz=rows["sm_clock_mhz"],
    )


@handles("replay", MappedChaseWork)
def _mapped(backend: ReplayBackend, work: MappedChaseWork, *, carveout_pct=None, seed=0):
    return _chase_result(backend.take(seed, work.chase.record_steps))


@handles("replay", ReleaseMapping)
def _release(backend: ReplayBackend, work: ReleaseMapping, **_: object) -> None:
    return None


@handles("replay", PointerWalkWork)
def _walk(backend: ReplayBackend, work: PointerWalkWork, *, seed=0) -> WalkResult:
    rows = backend.take(seed, len(work.record_steps))
    return WalkResult(
        latency_cycles=rows["latency_cycles"].astype(np.uint32), sm_clock_mhz=rows["sm_clock_mhz"]
    )


@handles("replay", RequestsWork)
def _requests(backend: ReplayBackend, work: RequestsWork, *, seed=0) -> RequestsResult:
    rows = backend.take(seed, work.runs)
    return RequestsResult(
        elapsed_cycles=rows["elapsed_cycles"].astype(np.uint32), sm_clock_mhz=rows["sm_clock_mhz"]
    )


@handles("replay", L2SliceWork)
def _slice_walk(backend: ReplayBackend, work: L2SliceWork, *, seed=0) -> L2SliceResult:
    rows = backend.take_rows(work.lines * work.passes)
    if not np.array_equal(rows["offset_bytes"][: work.lines], work.offsets_bytes):
        raise TraceError(f"replay of l2_slices: launch {backend.launches - 1} walks other lines")
    return L2SliceResult(
        cycles=rows["cycles"].astype(np.uint32),
        sm=int(rows["sm"][0]),
        helper_sm=int(rows["helper_sm"][0]),
        sm_clock_mhz=float(rows["sm_clock_mhz"][0]),
    )


@handles("replay", L2ContentionWork)
def _contention(backend: ReplayBackend, work: L2ContentionWork, *, seed=0) -> L2ContentionResult:
    rows = backend.take_rows(work.partners_bytes.size)
    if not np.array_equal(rows["offset_bytes"], work.partners_bytes):
        raise TraceError(f"replay of l2_slices: launch {backend.launches - 1} has other partners")
    return L2ContentionResult(
        elapsed_ns=rows["elapsed_ns"].astype(np.float64),
        sm_clock_mhz=float(rows["sm_clock_mhz"][0]),
    )


def replay(trace_path: str | Path, *, profile: cProfile.Profile | None = None):
    """Replay the trace at `trace_path`: (the experiment's rows, seconds of host work, the
    backend that gave the launches back)."""
    trace_path = Path(trace_path)
    trace = read_trace(trace_path)
    prov = trace.provenance
    experiment = prov["experiment"]
    if experiment not in REPLAYED:
        raise TraceError(
            f"{trace_path}: experiment {experiment!r} is not replayed; allowed: {sorted(REPLAYED)}"
        )
    fragment = prov["config"]
    fam = family(experiment)
    params = fam.parse_params(fragment["parameters"], f"experiments.{experiment}")
    device = SimpleNamespace(**fragment["device"])
    root = trace_path.resolve().parents[2]  # <results>/traces/<device>/<experiment>.parquet
    inputs = {
        k: str(root / Path(v).relative_to("results")) if v.startswith("results/") else v
        for k, v in (prov.get("inputs") or {}).items()
    }
    backend = ReplayBackend(trace.data, prov, experiment)
    start = time.perf_counter()
    if profile is not None:
        profile.enable()
    try:
        rows = fam.run(backend, params, device=device, inputs=inputs)
    finally:
        if profile is not None:
            profile.disable()
    return rows, time.perf_counter() - start, backend


def matches(rows: pd.DataFrame, trace: pd.DataFrame) -> bool:
    """Whether the replayed rows hold the trace's timings, row for row."""
    if len(rows) != len(trace):
        return False
    if "latency_cycles" in trace.columns:
        return np.array_equal(rows["latency_cycles"].to_numpy(), trace["latency_cycles"])
    if "cycles" in trace.columns:  # l2_slices: the walks' cycles and the launches' durations
        return np.array_equal(rows["cycles"], trace["cycles"]) and np.array_equal(
            rows["elapsed_ns"], trace["elapsed_ns"]
        )
    return all(
        np.array_equal(a, b)
        for a, b in zip(rows["elapsed_cycles"], trace["elapsed_cycles"], strict=True)
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", type=Path, nargs="+", help="traces of the replayed experiments")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="print N functions")
    ap.add_argument("--check", action="store_true", help="compare the rows with the trace's")
    args = ap.parse_args()
    for path in args.trace:
        prof = cProfile.Profile() if args.profile else None
        rows, seconds, backend = replay(path, profile=prof)
        trace = read_trace(path).data
        print(
            f"{backend.experiment}: {backend.launches} launches replayed, {len(rows)} rows "
            f"(trace {len(trace)}), host work {seconds:.2f} s"
        )
        if args.check:
            same = matches(rows, trace)
            print(f"  rows {'match' if same else 'DIFFER from'} the trace's timings")
            if not same:
                sys.exit(1)
        if prof is not None:
            pstats.Stats(prof).sort_stats("cumulative").print_stats(args.profile)


if __name__ == "__main__":
    main()
