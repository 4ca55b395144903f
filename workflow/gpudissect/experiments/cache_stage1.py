"""Stage 1 of the two-stage fine-grained P-chase (Mei & Chu, TPDS Sec. 4.2, Fig. 6; NPC 2014
Sec. 3), for every configured load path and every cache level on it: size C, miss granule
(sector), line size b, hit and miss latency. The rules are in `analysis.caches.cache_levels`.

Per path and level the sweep runs, in order (each phase sized by the previous one's result,
found with the same analysis functions the analysis uses, so every launch is in the trace):

1. `size`: a coarse grid of array sizes at a small stride (one warm-up pass, then
   `record_steps` timed loads), refined inside the bracket of the first miss until the bracket
   is `size_resolution_bytes` wide (at most `refine_points` sizes per round).
2. `granule_cold`: one launch with no warm-up, timing one pass at stride 4 over 4 x
   `record_steps` bytes (the level starts the launch empty: every granule misses once). Only
   where it shows no granule (a level the host copy filled: a GPU's L2), TPDS's warm walk,
   `granule`: arrays of C + 4 and C + C/8 bytes at stride 4 after one warm-up pass.
3. `line` and `line_check`: capacity against stride (`analysis.caches.cache_line`): for P = g, 2g,
   ... up to `max_line_bytes`, walks of 7/8 C / P elements at stride 2P, then 3P/2, until one fits
   (then, if none did, at 5P/2); a walk of 5/4 C / P elements at the same stride confirms (it
   must overflow) and calibrates walks with a few misses. Each walk starts one warm-up pass
   before its timed window; walks longer than `record_steps` are timed in up to `line_windows`
   windows spread over the pass (a walk that already overflows stops at the first window that
   shows it). On a cache of b-byte lines in g-byte sectors that is 2 log2(b/g) + 2 walks, one
   more where the line crowds stride 2b (bit-indexed sets), one more per walk with few but
   significant misses.

A second level on a path (the constant L1.5 behind the constant L1) is searched at a stride of
at least the first level's line, so that every access misses the first level.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from ..analysis.caches import cache_levels as cl
from ..analysis.caches import cache_line
from ..analysis.common.misses import bound_settled, first_miss_bracket
from ..config import AUTO, DeviceEntry, SizeRange, check_stride_and_sizes
from ..contract.backend import Backend
from ..exceptions import ConfigError, TraceError
from ..patterns import chain_pass_steps, stride_chain
from ..sizesearch import search_size
from .auto_ranges import size_plan
from .chase_recorder import ChaseRecorder, backend_paths

log = logging.getLogger(__name__)

NAME = "cache_stage1"
KERNELS = ("pchase",)
PATHS = ("ca", "cg", "nc", "tex", "const")
CONST_LIMIT_BYTES = cl.CONST_LIMIT_BYTES

SCHEMA = pa.schema(
    [
        pa.field("point", pa.int32()),
        pa.field("path", pa.string()),
        pa.field("level", pa.int8()),
        pa.field("phase", pa.string()),  # size | granule_cold | granule | line | line_check
        pa.field("carveout_pct", pa.int16()),  # -1: the backend has no carveout
        pa.field("shared_buffer_bytes", pa.int32()),
        pa.field("array_bytes", pa.int64()),
        pa.field("stride_bytes", pa.int32()),
        pa.field("line_candidate_bytes", pa.int32()),  # line phases: the candidate P; else 0
        pa.field("step", pa.int32()),
        pa.field("address_bytes", pa.int64()),  # byte offset the timed load read
        pa.field("index", pa.uint32()),  # the value it returned (next element)
        pa.field("latency_cycles", pa.uint32()),
        pa.field("sm_clock_mhz", pa.float32()),
    ]
)


@dataclass(frozen=True)
class LevelSweep:
    array_bytes: SizeRange | None  # None: `auto`, the size search (`auto_plan`)
    stride_bytes: int
    size_resolution_bytes: int


@dataclass(frozen=True)
class PathSweep:
    path: str
    enabled: bool
    levels: tuple[LevelSweep, ...]


@dataclass(frozen=True)
class Stage1Params:
    enabled: bool
    carveout_pct: int
    record_steps: int
    shared_buffer_bytes: int
    refine_points: int
    max_line_bytes: int
    line_windows: int
    paths: tuple[PathSweep, ...]


def parse_params(section: dict, key: str) -> Stage1Params:
    """Typed parameters with the checks the schema cannot express."""
    if 8 * section["record_steps"] > section["shared_buffer_bytes"]:
        raise ConfigError(
            f"{key}.shared_buffer_bytes: {section['shared_buffer_bytes']} cannot hold "
            f"{section['record_steps']} records (8 bytes each, {key}.record_steps); allowed: at "
            f"least {8 * section['record_steps']}"
        )
    paths = []
    for name in PATHS:
        entry = section["paths"][name]
        levels = []
        for i, lv in enumerate(entry["levels"]):
            where = f"{key}.paths.{name}.levels[{i}]"
            r = lv["array_bytes"]
            sweep = LevelSweep(
                None if r == AUTO else SizeRange(r["start"], r["stop"], r["step"]),
                lv["stride_bytes"],
                lv["size_resolution_bytes"],
            )
            if sweep.array_bytes is None:
                levels.append(sweep)
                continue
            check_stride_and_sizes(sweep.array_bytes, sweep.stride_bytes, where)
            if name == "const" and sweep.array_bytes.stop > CONST_LIMIT_BYTES:
                raise ConfigError(
                    f"{where}.array_bytes.stop: {sweep.array_bytes.stop} exceeds constant "
                    f"memory; allowed: at most {CONST_LIMIT_BYTES}"
                )
            levels.append(sweep)
        paths.append(PathSweep(name, entry["enabled"], tuple(levels)))
    return Stage1Params(
        enabled=section["enabled"],
        carveout_pct=section["carveout_pct"],
        record_steps=section["record_steps"],
        shared_buffer_bytes=section["shared_buffer_bytes"],
        refine_points=section["refine_points"],
        max_line_bytes=section["max_line_bytes"],
        line_windows=section["line_windows"],
        paths=tuple(paths),
    )


def _walk(
    rec,
    *,
    path,
    level,
    phase,
    chain,
    stride_bytes,
    warmup_steps,
    record_steps,
    start_index=0,
    candidate_bytes=0,
):
    """One launch over `chain` (an array of len(chain) elements), recorded with its columns."""
    return rec.chase(
        path=path,
        chain=chain,
        warmup_steps=warmup_steps,
        record_steps=record_steps,
        start_index=start_index,
        columns={
            "path": path,
            "level": np.int8(level),
            "phase": phase,
            "array_bytes": np.int64(4 * len(chain)),
            "stride_bytes": np.int32(stride_bytes),
            "line_candidate_bytes": np.int32(candidate_bytes),
        },
    )


def _stride_chase(rec, path, level, phase, array_bytes, stride_bytes, record_steps):
    """TPDS's protocol: one untimed pass over the array from element 0, then timed loads."""
    return _walk(
        rec,
        path=path,
        level=level,
        phase=phase,
        chain=stride_chain(array_bytes=array_bytes, stride_bytes=stride_bytes),
        stride_bytes=stride_bytes,
        warmup_steps=chain_pass_steps(array_bytes=array_bytes, stride_bytes=stride_bytes),
        record_steps=record_steps,
    )


def _size(rec, params, path, level, sweep, stride_bytes, below) -> cl.SizeFinding:
    """Coarse grid, then refinement inside the bracket of the first miss; with `auto`, the
    size search from the driver's facts (`below`: the size of the level in front, or None)."""
    latencies: dict[int, np.ndarray] = {}

    def size_point(n: int) -> np.ndarray:
        frame = _stride_chase(rec, path, level, "size", n, stride_bytes, params.record_steps)
        new = frame["latency_cycles"].astype(np.float64)
        latencies[n] = np.concatenate([latencies[n], new]) if n in latencies else new
        return new

    if sweep.array_bytes is None:
        plan = size_plan(
            rec.backend.facts(), path=path, level=level, stride_bytes=stride_bytes,
            resolution_bytes=sweep.size_resolution_bytes, below_bytes=below,
        )  # fmt: skip
        search_size(size_point, first_miss_bracket, plan, bound_settled)
        return cl.locate_size(list(latencies), list(latencies.values()))
    for n in sweep.array_bytes.sizes():
        if n >= stride_bytes:
            size_point(n)
    finding = cl.locate_size(list(latencies), list(latencies.values()))
    for _ in range(8):
        if finding.size_bytes is None or finding.resolution_bytes <= sweep.size_resolution_bytes:
            break
        lo, hi = finding.size_bytes, finding.next_bytes
        step = max(sweep.size_resolution_bytes, ((hi - lo) // params.refine_points) // 4 * 4, 4)
        new = [n for n in range(lo + step, hi, step) if n not in latencies]
        if not new:
            break
        for n in new:
            size_point(n)
        finding = cl.locate_size(list(latencies), list(latencies.values()))
    return finding


def _granule(rec, params, path, level, finding) -> pd.DataFrame:
    """The cold stride-4 walk; TPDS's warm walks just past C only where it shows no granule
    (a level the copy of the chain filled: the L2 of a GPU)."""
    steps = params.record_steps
    limit = cl.path_limit_bytes(path)
    n = cl.cold_granule_bytes(steps, limit)
    cold = _walk(
        rec,
        path=path,
        level=level,
        phase=cl.COLD_PHASE,
        chain=stride_chain(array_bytes=n, stride_bytes=4),
        stride_bytes=4,
        warmup_steps=0,
        record_steps=n // 4,
    )
    g = cl.cold_granule(cold["address_bytes"], cold["latency_cycles"], finding.classifier)
    if g.granule_bytes is not None:
        return cold.frame
    warm = [
        _stride_chase(rec, path, level, cl.WARM_PHASE, size, 4, steps).frame
        for size in cl.granule_sizes(finding.size_bytes)
        if limit is None or size <= limit
    ]
    return pd.concat([cold.frame, *warm])


def _line_walk(rec, params, path, level, finding, key) -> pd.DataFrame:
    """One capacity-against-stride walk, timed in windows over one pass; a test walk stops at
    the first window after which it overflows (`cache_line.LineWalk.overflows`)."""
    p, s, check = key
    n = cache_line.walk_elements(finding.size_bytes, p, check=check)
    chain = stride_chain(array_bytes=n * s, stride_bytes=s)
    frames = []
    for first in cache_line.windows(n, params.record_steps, params.line_windows):
        frames.append(
            _walk(
                rec,
                path=path,
                level=level,
                phase=cl.LINE_CHECK_PHASE if check else cl.LINE_PHASE,
                chain=chain,
                stride_bytes=s,
                warmup_steps=n,  # one pass, from the window's first element back to it
                record_steps=params.record_steps,
                start_index=first * (s // 4),
                candidate_bytes=p,
            )
        )
        if not check:
            slow = finding.classifier.slow(np.concatenate([f["latency_cycles"] for f in frames]))
            walk = cache_line.line_walk(
                slow,
                outlier_rate=finding.classifier.outlier_rate,
                candidate_bytes=p,
                stride_bytes=s,
                check=check,
                elements=n,
            )
            if walk.overflows:
                break
    return pd.concat([f.frame for f in frames])


def _line(rec, params, path, level, finding, first_bytes) -> int | None:
    """Capacity against stride: the walks `cache_line.locate_line` asks for, one at a time."""
    rows = pd.DataFrame({"phase": pd.Series(dtype=str)})
    run_keys: set = set()
    while True:  # at most 4 walks per candidate; the candidates double up to the max
        line = cl.level_line(
            rows, finding, first_bytes, path=path, max_line_bytes=params.max_line_bytes
        )
        if line.next_walk is None:
            return line.line_bytes
        if line.next_walk in run_keys:
            raise TraceError(
                f"{path} level {level}: the line search asks again for walk {line.next_walk}; "
                "its rows do not reach the rule (a bug in the sweep's columns)"
            )
        run_keys.add(line.next_walk)
        frame = _line_walk(rec, params, path, level, finding, line.next_walk)
        rows = frame if rows.empty else pd.concat([rows, frame])


def _run_level(rec, params, path, level, sweep, stride_bytes, below):
    """One level's phases; returns its line size (or granule) and size for the next level."""
    finding = _size(rec, params, path, level, sweep, stride_bytes, below)
    if finding.size_bytes is None:
        log.info("%s level %d: size undetermined (%s)", path, level, finding.reason)
        return None, None
    grain = _granule(rec, params, path, level, finding)
    g, _ = cl.level_granule(grain, finding.classifier)
    if g.granule_bytes is None:
        log.info("%s level %d: granule undetermined (%s)", path, level, g.reason)
    line = _line(rec, params, path, level, finding, g.granule_bytes or stride_bytes)
    return line or g.granule_bytes, finding.size_bytes


def run(
    backend: Backend,
    params: Stage1Params,
    *,
    device: DeviceEntry,
    inputs: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Run stage 1 on every enabled path the backend has; one row per timed access."""
    rec = ChaseRecorder(
        backend, carveout_pct=params.carveout_pct, shared_buffer_bytes=params.shared_buffer_bytes
    )
    available = backend_paths(backend)
    todo = [p for p in params.paths if p.enabled and (available is None or p.path in available)]
    for i, p in enumerate(todo):
        previous_line = previous_size = None
        for level, sweep in enumerate(p.levels, start=1):
            stride = sweep.stride_bytes
            if level > 1:
                if previous_line is None:
                    break  # the level in front is undetermined: nothing to build on
                stride = max(stride, previous_line)
            previous_line, previous_size = _run_level(
                rec, params, p.path, level, sweep, stride, previous_size
            )
        if progress:
            progress(i + 1, len(todo))
    if not rec.launches:
        return pd.DataFrame({f.name: pd.Series(dtype=f.type.to_pandas_dtype()) for f in SCHEMA})
    return rec.table()
