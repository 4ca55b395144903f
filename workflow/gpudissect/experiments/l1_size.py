"""Fine-grained P-chase array-size sweep (Mei & Chu, TPDS Sec. 3.2; Wong's method with per-access
latencies): at a fixed stride, grow the array; the first size at which latency steps up bounds
the cache size. One point per (carveout, shared buffer size, array size, repetition).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from ..backends.base import Backend, ChaseWork
from ..config import DeviceEntry, SizeRange, check_stride_and_sizes
from ..exceptions import ConfigError
from ..patterns import chain_pass_steps, stride_chain
from . import empty_frame

log = logging.getLogger(__name__)

NAME = "l1_size"
NO_CARVEOUT = -1  # carveout_pct where the backend has no L1/shared carveout

SCHEMA = pa.schema(
    [
        pa.field("point", pa.int32()),
        pa.field("carveout_pct", pa.int16()),  # -1: the backend has no carveout
        pa.field("shared_buffer_bytes", pa.int32()),
        pa.field("array_bytes", pa.int64()),
        pa.field("stride_bytes", pa.int32()),
        pa.field("repetition", pa.int16()),
        pa.field("step", pa.int32()),
        pa.field("index", pa.uint32()),
        pa.field("latency_cycles", pa.uint32()),
        pa.field("sm_clock_mhz", pa.float32()),
    ]
)


KERNELS = ("pchase",)


@dataclass(frozen=True)
class L1SizeSweep:
    enabled: bool
    path: str
    stride_bytes: int
    array_bytes: SizeRange
    shared_buffer_bytes: tuple[int, ...]
    max_record_steps: int
    repetitions: int


def parse_params(section: dict, key: str) -> L1SizeSweep:
    """Typed parameters with the checks the schema cannot express."""
    r = section["array_bytes"]
    sweep = L1SizeSweep(
        enabled=section["enabled"],
        path=section["path"],
        stride_bytes=section["stride_bytes"],
        array_bytes=SizeRange(r["start"], r["stop"], r["step"]),
        shared_buffer_bytes=tuple(section["shared_buffer_bytes"]),
        max_record_steps=section["max_record_steps"],
        repetitions=section["repetitions"],
    )
    check_stride_and_sizes(sweep.array_bytes, sweep.stride_bytes, key)
    for b in sweep.shared_buffer_bytes:
        if 8 * sweep.max_record_steps > b:
            raise ConfigError(
                f"{key}.shared_buffer_bytes: {b} cannot hold {sweep.max_record_steps} records "
                f"(8 bytes each, {key}.max_record_steps); allowed: at least "
                f"{8 * sweep.max_record_steps}"
            )
    return sweep


@dataclass(frozen=True)
class Point:
    point: int
    carveout_pct: int
    shared_buffer_bytes: int
    array_bytes: int
    repetition: int
    work: ChaseWork


def plan(sweep: L1SizeSweep, *, carveouts: tuple[int, ...]) -> list[Point]:
    """All launches of the sweep, in the order they run."""
    points = []
    for carveout in carveouts:
        for buffer_bytes in sweep.shared_buffer_bytes:
            for array_bytes in sweep.array_bytes.sizes():
                chain = stride_chain(array_bytes=array_bytes, stride_bytes=sweep.stride_bytes)
                steps = chain_pass_steps(array_bytes=array_bytes, stride_bytes=sweep.stride_bytes)
                work = ChaseWork(
                    path=sweep.path,
                    chain=chain,
                    start_index=0,
                    warmup_steps=steps,  # one full pass loads every element once
                    # a fixed count: several passes over small arrays (more samples for the
                    # hit/miss statistics), part of a pass over the largest
                    record_steps=sweep.max_record_steps,
                    shared_buffer_bytes=buffer_bytes,
                )
                for rep in range(sweep.repetitions):
                    points.append(
                        Point(len(points), carveout, buffer_bytes, array_bytes, rep, work)
                    )
    return points


def run(
    backend: Backend,
    sweep: L1SizeSweep,
    *,
    device: DeviceEntry,
    inputs: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Run the sweep on `backend`; one row per recorded access."""
    if not backend.has_path(sweep.path):
        return empty_frame(SCHEMA)  # the analysis reports why nothing was measured
    carveouts = device.carveouts
    if not backend.supports_carveout:
        carveouts = (NO_CARVEOUT,)
    points = plan(sweep, carveouts=carveouts)
    frames = []
    for p in points:
        result = backend.run_chase(
            p.work, carveout_pct=None if p.carveout_pct < 0 else p.carveout_pct, seed=p.point
        )
        n = len(result.latency_cycles)
        frames.append(
            pd.DataFrame(
                {
                    "point": np.full(n, p.point, np.int32),
                    "carveout_pct": np.full(n, p.carveout_pct, np.int16),
                    "shared_buffer_bytes": np.full(n, p.shared_buffer_bytes, np.int32),
                    "array_bytes": np.full(n, p.array_bytes, np.int64),
                    "stride_bytes": np.full(n, sweep.stride_bytes, np.int32),
                    "repetition": np.full(n, p.repetition, np.int16),
                    "step": np.arange(n, dtype=np.int32),
                    "index": result.indices,
                    "latency_cycles": result.latency_cycles,
                    "sm_clock_mhz": np.full(n, result.sm_clock_mhz, np.float32),
                }
            )
        )
        if progress:
            progress(p.point + 1, len(points))
    return pd.concat(frames, ignore_index=True)
