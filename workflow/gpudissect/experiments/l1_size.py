"""Fine-grained P-chase array-size sweep (Mei & Chu, TPDS Sec. 3.2; Wong's method with per-access
latencies): at a fixed stride, grow the array; the first size at which latency steps up bounds
the cache size. One point per (carveout, shared buffer size, array size, repetition).

The array holds the visited elements only, written on the GPU by the backend's scatter kernel
(a sparse chase of 4-byte elements: the same walk, the same loads): on an H100 and an H200, an
array copied from the host by the copy engine, as Mei & Chu's chain is, made the L1 at carveout
100 miss on a few percent of the accesses from 8-14 KiB on, in some allocations and not in
others, so that its first miss read anywhere from 8064 to 20352 bytes from run to run; written by
the GPU, the same sweep read 21504 bytes in every run, and the same sizes as before at the other
carveouts (`results/reference/FINDINGS.md`, `h100/l1_placement`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from ..analysis.common.misses import bound_settled, first_miss_bracket
from ..config import AUTO, DeviceEntry, SizeRange, check_stride_and_sizes
from ..contract.backend import Backend, ChaseWork
from ..contract.facts import DeviceFacts
from ..exceptions import ConfigError
from ..patterns import chain_pass_steps, stride_cycle
from ..sizesearch import SearchPlan, search_size
from . import empty_frame
from .auto_ranges import size_plan

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
    array_bytes: SizeRange | None  # None: `auto`, the size search (`auto_plan`)
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
        array_bytes=None if r == AUTO else SizeRange(r["start"], r["stop"], r["step"]),
        shared_buffer_bytes=tuple(section["shared_buffer_bytes"]),
        max_record_steps=section["max_record_steps"],
        repetitions=section["repetitions"],
    )
    if sweep.array_bytes is not None:
        check_stride_and_sizes(sweep.array_bytes, sweep.stride_bytes, key)
    for b in sweep.shared_buffer_bytes:
        if 8 * sweep.max_record_steps > b:
            raise ConfigError(
                f"{key}.shared_buffer_bytes: {b} cannot hold {sweep.max_record_steps} records "
                f"(8 bytes each, {key}.max_record_steps); allowed: at least "
                f"{8 * sweep.max_record_steps}"
            )
    return sweep


def auto_plan(sweep: L1SizeSweep, facts: DeviceFacts) -> SearchPlan:
    """The size search of `array_bytes: auto`: the L1-family rule of `auto_ranges.size_plan`
    (from 4 strides up to twice the shared memory per SM, dense at the stride)."""
    return size_plan(facts, path="ca", level=1, stride_bytes=sweep.stride_bytes,
                     resolution_bytes=sweep.stride_bytes)  # fmt: skip


def _work(sweep: L1SizeSweep, array_bytes: int, buffer_bytes: int) -> ChaseWork:
    positions, values = stride_cycle(array_bytes=array_bytes, stride_bytes=sweep.stride_bytes)
    return ChaseWork(
        path=sweep.path,
        chain=None,
        array_elements=array_bytes // 4,
        sparse_positions=positions,
        sparse_next=values,
        start_index=0,
        # one full pass loads every element once
        warmup_steps=chain_pass_steps(array_bytes=array_bytes, stride_bytes=sweep.stride_bytes),
        # a fixed count: several passes over small arrays (more samples for the hit/miss
        # statistics), part of a pass over the largest
        record_steps=sweep.max_record_steps,
        shared_buffer_bytes=buffer_bytes,
    )


class _Series:
    """The launches of one (carveout, shared buffer) series, one frame per launch."""

    def __init__(self, backend, sweep, carveout: int, buffer_bytes: int, frames: list):
        self.backend, self.sweep, self.frames = backend, sweep, frames
        self.carveout, self.buffer = carveout, buffer_bytes

    def measure(self, array_bytes: int) -> np.ndarray:
        """All repetitions at one size; returns their latencies."""
        work = _work(self.sweep, array_bytes, self.buffer)
        out = []
        for rep in range(self.sweep.repetitions):
            point = len(self.frames)
            result = self.backend.run_chase(
                work, carveout_pct=None if self.carveout < 0 else self.carveout, seed=point
            )
            n = len(result.latency_cycles)
            self.frames.append(
                pd.DataFrame(
                    {
                        "point": np.full(n, point, np.int32),
                        "carveout_pct": np.full(n, self.carveout, np.int16),
                        "shared_buffer_bytes": np.full(n, self.buffer, np.int32),
                        "array_bytes": np.full(n, array_bytes, np.int64),
                        "stride_bytes": np.full(n, self.sweep.stride_bytes, np.int32),
                        "repetition": np.full(n, rep, np.int16),
                        "step": np.arange(n, dtype=np.int32),
                        "index": result.indices,
                        "latency_cycles": result.latency_cycles,
                        "sm_clock_mhz": np.full(n, result.sm_clock_mhz, np.float32),
                    }
                )
            )
            out.append(result.latency_cycles)
        return np.concatenate(out)


def run(
    backend: Backend,
    sweep: L1SizeSweep,
    *,
    device: DeviceEntry,
    inputs: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Run the sweep on `backend`; one row per recorded access. Each (carveout, buffer) series
    runs the configured sizes, or with `auto` the size search (`auto_plan`)."""
    if not backend.has_path(sweep.path):
        return empty_frame(SCHEMA)  # the analysis reports why nothing was measured
    carveouts = device.carveouts if backend.supports_carveout else (NO_CARVEOUT,)
    series = [(c, b) for c in carveouts for b in sweep.shared_buffer_bytes]
    plan = auto_plan(sweep, backend.facts()) if sweep.array_bytes is None else None
    frames: list[pd.DataFrame] = []
    for i, (carveout, buffer_bytes) in enumerate(series):
        s = _Series(backend, sweep, carveout, buffer_bytes, frames)
        if plan is None:
            for n in sweep.array_bytes.sizes():
                s.measure(n)
        else:
            out = search_size(s.measure, first_miss_bracket, plan, bound_settled)
            log.info(
                "l1_size carveout %d buffer %d: %d sizes searched, first miss in (%s, %s]%s",
                carveout, buffer_bytes, len(out.sizes), out.fits_bytes, out.misses_bytes,
                f" ({out.reason})" if out.reason else "",
            )  # fmt: skip
        if progress:
            progress(i + 1, len(series))
    return pd.concat(frames, ignore_index=True)
