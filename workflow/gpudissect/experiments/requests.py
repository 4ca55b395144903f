"""Outstanding memory requests: the Thread-Latency sweep of Lashgar, Salehi & Baniasadi
("A Case Study in Reverse Engineering GPGPUs: Outstanding Memory Handling Resources", Listing 1,
Sec. 3-5).

One thread block of 2..1024 threads (step 2), N independent loads per thread, addresses by
pattern: UNQ (a unique 128-byte block per load) or MergerK (K neighbouring threads load the same
block). Each launch configuration runs `runs` times (the paper reports the harmonic mean of
three); every thread's t2 - t1 of every run is kept. The work (threads, N, byte offsets) is built
here once and executed by either backend (`backends/requests_sim.py`, `requests_cuda.py`).

**Past one block.** `threads.stop: auto` takes the device's most threads per SM from the
driver's facts (the profile's on sim); counts above one block (1024 threads) step by
`threads.wide_step` and run as several co-resident blocks of at most 1024 threads (an even
share each, in whole warps) on one SM: the GPU launches SM count x blocks, every block takes a
slot on its SM by %smid, and only the first `blocks` of one target SM wait for each other and
time their loads (`kernels/requests.cu`, `req_<path>_sm_n<N>`); each thread's time runs from
the blocks' common start to its own block's completion.

**Scoreboard first.** Every sweep's smallest launch runs before the rest of the pass, so the
per-warp scoreboard limit (which compares them) is read from the first launches of all N.

The whole sweep runs `repeats.min` times; then, once more at a time, only the sweeps whose
saturation reading is not yet held by a majority of the repeats that measured it (and every
sweep's first launch while the scoreboard limit is not; `analysis.requests.request_repeats`), until
none is left that more repeats could settle or `repeats.max` repeats have run. The trace's `repeat`
column tells them apart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ..config import DeviceEntry
from ..contract.backend import Backend
from ..exceptions import ConfigError, DeviceUnavailable

log = logging.getLogger(__name__)

NAME = "requests"
KERNELS = ("requests",)
MAX_LOADS = 8  # kernels/requests.cu instantiates req_<path>_n1 .. n8 (and _sm_n1 .. n8)
BLOCK_THREADS = 1024  # most threads of one block; more run as several blocks on one SM
MAX_THREADS = 4096  # most threads of one launch configuration (several blocks of one SM)
PATTERNS = {"unq": 1, "merger2": 2, "merger4": 4, "merger8": 8, "merger16": 16, "merger32": 32}

SCHEMA = pa.schema(
    [
        pa.field("point", pa.int32()),  # one launch configuration (pattern, N, threads)
        pa.field("repeat", pa.int8()),  # one pass over every launch configuration
        pa.field("pattern", pa.string()),
        pa.field("merge_threads", pa.int16()),  # K: threads sharing one block (1 for UNQ)
        pa.field("loads_per_thread", pa.int8()),
        pa.field("threads", pa.int16()),  # threads of the SM, over all its blocks
        pa.field("blocks", pa.int16()),  # co-resident blocks of one SM holding them
        pa.field("block_threads", pa.int16()),  # threads of each block (thread t: t // this)
        pa.field("run", pa.int8()),
        pa.field("block_bytes", pa.int32()),
        pa.field("footprint_bytes", pa.int64()),  # distinct blocks x block_bytes
        pa.field("elapsed_cycles", pa.list_(pa.uint32())),  # t2 - t1 of every thread
        pa.field("sm_clock_mhz", pa.float32()),
    ]
)


@dataclass(frozen=True)
class ThreadRange:
    """Thread counts from start to stop (None: `auto`, the device's most threads per SM) in
    steps of `step` up to one block (1024 threads), then from 1024 + `wide_step` in steps of
    `wide_step` (default `step`)."""

    start: int
    stop: int | None
    step: int
    wide_step: int | None = None

    def counts(self, max_threads: int | None = None) -> tuple[int, ...]:
        stop = self.stop if self.stop is not None else max_threads
        if stop is None:
            raise ValueError("threads.stop is auto: the device's most threads per SM is needed")
        narrow = tuple(range(self.start, min(stop, BLOCK_THREADS) + 1, self.step))
        if stop <= BLOCK_THREADS:
            return narrow
        wide = self.wide_step or self.step
        return narrow + tuple(range(BLOCK_THREADS + wide, stop + 1, wide))


def blocks_of(threads: int) -> int:
    """Co-resident blocks that hold `threads` threads of one SM (at most 1024 per block)."""
    return -(-threads // BLOCK_THREADS)


def block_threads_of(threads: int) -> int:
    """Threads of each block (the last may hold fewer): an even share of `threads` over
    `blocks_of(threads)` blocks, rounded up to whole warps, so two blocks of 1536 threads per SM
    fit an SM that holds 1536; thread t runs in block t // block_threads_of(threads)."""
    blocks = blocks_of(threads)
    if blocks == 1:
        return threads
    share = -(-threads // blocks)
    return 32 * -(-share // 32)


@dataclass(frozen=True)
class Repeats:
    """How often the sweep runs: `min` times whole, then its unsettled sweeps until they agree,
    at most `max` times in all."""

    min: int = 1
    max: int = 1


@dataclass(frozen=True)
class RequestsSweep:
    enabled: bool
    path: str
    patterns: tuple[str, ...]
    loads_per_thread: tuple[int, ...]
    threads: ThreadRange
    runs: int
    warmup_launches: int
    block_bytes: int
    repeats: Repeats = Repeats()


def parse_params(section: dict, key: str) -> RequestsSweep:
    t = section["threads"]
    rep = section.get("repeats", {"min": 1, "max": 1})
    stop = t["stop"]
    if stop != "auto" and (not isinstance(stop, int) or not 1 <= stop <= MAX_THREADS):
        raise ConfigError(
            f"{key}.threads.stop: {stop!r}; allowed: auto (the device's most threads per SM) "
            f"or an integer 1..{MAX_THREADS}"
        )
    sweep = RequestsSweep(
        enabled=section["enabled"],
        path=section["path"],
        patterns=tuple(section["patterns"]),
        loads_per_thread=tuple(section["loads_per_thread"]),
        threads=ThreadRange(
            t["start"], None if stop == "auto" else stop, t["step"], t.get("wide_step")
        ),
        runs=section["runs"],
        warmup_launches=section["warmup_launches"],
        block_bytes=section["block_bytes"],
        repeats=Repeats(rep["min"], rep["max"]),
    )
    if sweep.repeats.max < sweep.repeats.min:
        raise ConfigError(
            f"{key}.repeats.max: {sweep.repeats.max} is below min {sweep.repeats.min}; "
            "allowed: max >= min"
        )
    if sweep.threads.stop is not None and sweep.threads.stop < sweep.threads.start:
        raise ConfigError(
            f"{key}.threads.stop: {sweep.threads.stop} is below start {sweep.threads.start}; "
            "allowed: stop >= start"
        )
    if len(set(sweep.patterns)) != len(sweep.patterns):
        raise ConfigError(f"{key}.patterns: {list(sweep.patterns)} repeats a pattern")
    if len(set(sweep.loads_per_thread)) != len(sweep.loads_per_thread):
        raise ConfigError(f"{key}.loads_per_thread: {list(sweep.loads_per_thread)} repeats")
    if sweep.block_bytes & (sweep.block_bytes - 1):
        raise ConfigError(f"{key}.block_bytes: {sweep.block_bytes} is not a power of two")
    worst = max(sweep.loads_per_thread) * (sweep.threads.stop or MAX_THREADS) * sweep.block_bytes
    if worst >= 2**32:
        raise ConfigError(
            f"{key}: the largest footprint ({worst} bytes) does not fit 32-bit offsets; "
            "use a smaller block_bytes"
        )
    return sweep


@dataclass(frozen=True)
class RequestsWork:
    """One launch configuration of Listing 1, run `runs` times (after `warmup_launches` untimed
    launches on a GPU): `offsets_bytes[t, j]` is the byte offset thread `t` loads with load `j`
    from the start of the data array, through load path `path`."""

    path: str
    offsets_bytes: np.ndarray  # uint32, shape (threads, loads per thread)
    runs: int
    warmup_launches: int = 0
    # thread t of one SM runs in block t // block_threads (several co-resident blocks past 1024)

    def __post_init__(self) -> None:
        o = self.offsets_bytes
        if o.dtype != np.uint32 or o.ndim != 2:
            raise TypeError(f"offsets_bytes must be 2-D uint32, got {o.dtype} {o.shape}")
        if not 1 <= o.shape[0] <= MAX_THREADS or not 1 <= o.shape[1] <= MAX_LOADS:
            raise ValueError(
                f"offsets_bytes shape {o.shape}: threads must be 1..{MAX_THREADS}, loads "
                f"1..{MAX_LOADS}"
            )

    @property
    def threads(self) -> int:
        return int(self.offsets_bytes.shape[0])

    @property
    def loads_per_thread(self) -> int:
        return int(self.offsets_bytes.shape[1])

    @property
    def blocks(self) -> int:
        return blocks_of(self.threads)

    @property
    def block_threads(self) -> int:
        return block_threads_of(self.threads)


class NoRequestTable(DeviceUnavailable):
    """The device has nothing to run Listing 1 on (a simulated profile without a request table);
    the sweep then records no launch and the analysis reports every quantity undetermined."""


@dataclass(frozen=True)
class RequestsResult:
    elapsed_cycles: np.ndarray  # uint32, shape (runs, threads)
    sm_clock_mhz: float


def pattern_offsets(
    *, threads: int, loads_per_thread: int, merge_threads: int, block_bytes: int
) -> np.ndarray:
    """Byte offsets (threads, N): load j of thread t reads block ``j * G + t // K`` with
    ``G = ceil(threads / K)`` blocks per load, so every load instruction touches its own blocks
    (UNQ: K = 1) and exactly K neighbouring threads share each block (MergerK)."""
    groups = -(-threads // merge_threads)
    # in uint32 throughout: every term and sum is below the largest offset, which parse_params
    # keeps below 2^32
    block = np.arange(threads, dtype=np.uint32) // np.uint32(merge_threads) * np.uint32(block_bytes)
    load = np.arange(loads_per_thread, dtype=np.uint32) * np.uint32(groups * block_bytes)
    return block[:, None] + load[None, :]


@dataclass(frozen=True)
class Point:
    point: int
    pattern: str
    merge_threads: int
    loads_per_thread: int
    threads: int


def plan(sweep: RequestsSweep, max_threads: int | None = None) -> list[Point]:
    """Every launch configuration; `max_threads` (the device's most threads per SM) ends an
    `auto` thread range."""
    points = []
    counts = sweep.threads.counts(max_threads)
    if counts and counts[-1] > MAX_THREADS:
        raise ConfigError(
            f"experiments.requests.threads: the device holds {counts[-1]} threads per SM, more "
            f"than the {MAX_THREADS} the sweep supports; set threads.stop to at most {MAX_THREADS}"
        )
    for pattern in sweep.patterns:
        for n in sweep.loads_per_thread:
            for threads in counts:
                points.append(Point(len(points), pattern, PATTERNS[pattern], n, threads))
    return points


def run(
    backend: Backend,
    sweep: RequestsSweep,
    *,
    device: DeviceEntry,
    inputs: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Run the sweep `repeats.min` times whole, then, up to `repeats.max` repeats, once more at a
    time over only the sweeps whose readings are not settled (and every sweep's first launch
    while the scoreboard limit is not); one row per (repeat, launch configuration, run) holding
    every thread's time."""
    from ..analysis.requests.request_repeats import LIMIT, unsettled
    from ..analysis.requests.requests import repeat_readings

    max_threads = backend.facts().max_threads_per_sm if sweep.threads.stop is None else None
    points = plan(sweep, max_threads)
    first_count = min(p.threads for p in points) if points else 0
    frames: list[pd.DataFrame] = []
    readings: list[dict] = []
    total = len(points) * sweep.repeats.min
    done = 0
    offsets: dict[int, np.ndarray] = {}  # the same arrays every repeat
    todo = points
    for repeat in range(sweep.repeats.max):
        frame = _run_once(
            backend, sweep, todo, repeat, len(points), progress, (done, total), offsets
        )
        if frame is None:  # the device has no request table: nothing to repeat
            break
        done += len(todo)
        frames.append(frame)
        readings.append(repeat_readings(frame, reference=frames[0]))
        if repeat + 1 < sweep.repeats.min:
            continue
        open_keys = unsettled(readings, sweep.repeats.max)
        if not open_keys:
            break
        todo = [
            p
            for p in points
            if (p.pattern, p.merge_threads, p.loads_per_thread) in open_keys
            or (LIMIT in open_keys and p.threads == first_count)
        ]
        total = done + len(todo)
        log.info(
            "requests: %d repeats, %d sweeps not settled yet%s; the next repeat runs %d of %d "
            "launch configurations",
            repeat + 1, len(open_keys - {LIMIT}), " (and the scoreboard limit)"
            if LIMIT in open_keys else "", len(todo), len(points),
        )  # fmt: skip
    if not frames:
        return SCHEMA.empty_table().to_pandas()
    data = pd.concat(frames, ignore_index=True)[SCHEMA.names]
    # launch order puts first launches first; the trace keeps the plan's order
    return data.sort_values(["repeat", "point", "run"], kind="stable", ignore_index=True)


def _run_once(
    backend, sweep, points, repeat, planned, progress, counted, offsets
) -> pd.DataFrame | None:
    """One pass over `points` (every launch configuration, or the unsettled sweeps'). The noise
    seed of a point differs between repeats (a simulated repeat is a new measurement,
    deterministic for the config's seed); `planned`: the points of a whole pass; `counted`:
    (points run before this pass, points to run in all, as known now) for `progress`."""
    # one entry per launch configuration, repeated per run at the end (a row at a time cost
    # more than the launches of the smallest configurations)
    done: list[tuple] = []
    elapsed: list[np.ndarray] = []
    first = min((p.threads for p in points), default=0)
    # every sweep's smallest launch first: the scoreboard limit compares them (stable order)
    for p in sorted(points, key=lambda p: p.threads != first):
        if p.point not in offsets:
            offsets[p.point] = pattern_offsets(
                threads=p.threads,
                loads_per_thread=p.loads_per_thread,
                merge_threads=p.merge_threads,
                block_bytes=sweep.block_bytes,
            )
        work = RequestsWork(sweep.path, offsets[p.point], sweep.runs, sweep.warmup_launches)
        try:
            result = backend.run(work, seed=p.point + repeat * planned)
        except NoRequestTable as exc:
            log.warning("requests: %s; the trace records no launch", exc)
            return None
        # distinct blocks by construction of pattern_offsets: N x ceil(T / K)
        footprint = p.loads_per_thread * -(-p.threads // p.merge_threads) * sweep.block_bytes
        done.append(
            (
                p.point, repeat, p.pattern, p.merge_threads, p.loads_per_thread, p.threads,
                blocks_of(p.threads), block_threads_of(p.threads), sweep.block_bytes, footprint,
                result.sm_clock_mhz,
            )
        )  # fmt: skip
        elapsed.extend(result.elapsed_cycles[: sweep.runs])  # its rows, run by run
        if progress:
            counted = (counted[0] + 1, counted[1])
            progress(*counted)
    if not done:
        return pd.DataFrame({name: [] for name in SCHEMA.names})
    names = [
        "point", "repeat", "pattern", "merge_threads", "loads_per_thread", "threads", "blocks",
        "block_threads", "block_bytes", "footprint_bytes", "sm_clock_mhz",
    ]  # fmt: skip
    cols: dict[str, Any] = {
        name: np.repeat(np.array([d[i] for d in done]), sweep.runs) for i, name in enumerate(names)
    }
    cols["run"] = np.tile(np.arange(sweep.runs), len(done))
    cols["elapsed_cycles"] = elapsed
    return pd.DataFrame({name: cols[name] for name in SCHEMA.names})
