"""Timing overhead of the per-access timed window (Mei & Chu, TPDS Sec. 4.2; Größler's thesis
Sec. 4.4), so that every latency the P-chase reads can be given raw and calibrated.

On each listed load path, over the same few lines of a small array that stays in the path's
first cache after a warm-up walk (`kernels/clock_overhead.cu`, header comment):
- `window`: the fine-grained P-chase exactly as every other experiment times it
  (`kernels/pchase.cu`), every access timed: the raw latency;
- `amortized_index`: `loads` dependent loads of the same 32-bit index chain between two clock
  reads (and `2 * loads`, so that the window's one store and clock read at the end cancel in
  the difference): the latency per load with its index arithmetic, without the window;
- `amortized_pointer`: the same over 64-bit pointers (`p = *p`): the load-to-use latency alone.
  Not on `tex`: a texture fetch takes an index as its coordinate (`j = tex1Dfetch(t, j)`, no
  address arithmetic between two fetches), so there the index chase is the load-to-use latency.
Once per sweep: `clock_pair` (two consecutive clock reads) and `empty_window` (the window with
no load in it), `record_steps` samples each. Every sample is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from ..config import DeviceEntry
from ..contract.backend import Backend, ChaseWork
from ..exceptions import ConfigError
from ..patterns import chain_pass_steps, stride_chain

NAME = "timing_overhead"
KERNELS = ("clock_overhead", "pchase")
WINDOW_KINDS = ("clock_pair", "empty_window")
CHASE_KINDS = ("amortized_index", "amortized_pointer")
WARMUP_PASSES = 4  # untimed passes over the array before any timed load
# the element sizes of the amortized chases per path: a texture fetch takes an index only
ELEMENT_BYTES = {"tex": (4,)}
DEFAULT_ELEMENT_BYTES = (4, 8)


def element_sizes(path: str) -> tuple[int, ...]:
    """The element sizes of `path`'s amortized chases (4: index chase, 8: pointer chase)."""
    return ELEMENT_BYTES.get(path, DEFAULT_ELEMENT_BYTES)


SCHEMA = pa.schema(
    [
        pa.field("point", pa.int32()),
        # clock_pair | empty_window | window | amortized_index | amortized_pointer
        pa.field("kind", pa.string()),
        pa.field("path", pa.string()),  # "" for the clock kinds
        pa.field("element_bytes", pa.int16()),
        pa.field("loads", pa.int32()),  # loads between the two clock reads (0: none)
        pa.field("sample", pa.int32()),
        pa.field("index", pa.uint32()),  # element the load returned (amortized: the last one)
        pa.field("cycles", pa.uint32()),
        pa.field("sm_clock_mhz", pa.float32()),
    ]
)


@dataclass(frozen=True)
class ClockWindowWork:
    """`record_steps` samples of an empty timed section: `clock_pair` (two consecutive clock
    reads) or `empty_window` (clock, store of an index to shared memory, clock)."""

    kind: str
    record_steps: int

    def __post_init__(self) -> None:
        if self.kind not in WINDOW_KINDS:
            raise ValueError(f"kind must be one of {WINDOW_KINDS}, got {self.kind!r}")
        if self.record_steps < 1:
            raise ValueError(f"record_steps must be >= 1, got {self.record_steps}")


@dataclass(frozen=True)
class AmortizedChaseWork:
    """One launch of the amortized chase on `path`: the chain `next_element` (element i holds the
    element that follows it; 4-byte elements hold that index, 8-byte ones the next element's
    address, which the backend writes from the device address of the array), a warm-up walk of
    `warmup_steps` from `start_element`, then `repetitions` timed chains of `loads` loads each,
    continuing the walk."""

    path: str
    element_bytes: int
    next_element: np.ndarray
    start_element: int
    warmup_steps: int
    loads: int
    repetitions: int
    carveout_pct: int | None = None

    def __post_init__(self) -> None:
        if self.element_bytes not in (4, 8):
            raise ValueError(f"element_bytes must be 4 or 8, got {self.element_bytes}")
        if min(self.loads, self.repetitions) < 1 or self.warmup_steps < 0:
            raise ValueError("loads and repetitions must be >= 1, warmup_steps >= 0")

    @property
    def kind(self) -> str:
        return "amortized_index" if self.element_bytes == 4 else "amortized_pointer"

    def walk(self, steps: int) -> np.ndarray:
        """Element positions of the first `steps` loads (what the kernel reads, in order)."""
        out = np.empty(steps, dtype=np.int64)
        j = self.start_element
        for k in range(steps):
            out[k] = j
            j = int(self.next_element[j])
        return out


@dataclass(frozen=True)
class TimedCycles:
    cycles: np.ndarray  # uint32: one per sample (clock kinds) or per timed chain (amortized)
    final_index: int  # the element the walk ended on (0 for the clock kinds)
    sm_clock_mhz: float


@dataclass(frozen=True)
class TimingParams:
    enabled: bool
    paths: tuple[str, ...]
    array_bytes: int
    stride_bytes: int
    record_steps: int
    loads: int
    repetitions: int
    carveout_pct: int


def parse_params(section: dict, key: str) -> TimingParams:
    p = TimingParams(
        enabled=section["enabled"],
        paths=tuple(section["paths"]),
        array_bytes=section["array_bytes"],
        stride_bytes=section["stride_bytes"],
        record_steps=section["record_steps"],
        loads=section["loads"],
        repetitions=section["repetitions"],
        carveout_pct=section["carveout_pct"],
    )
    if p.array_bytes % p.stride_bytes:
        raise ConfigError(
            f"{key}.array_bytes: {p.array_bytes} is not a multiple of stride_bytes "
            f"{p.stride_bytes}; allowed: a whole number of strides"
        )
    if p.stride_bytes % 8:
        raise ConfigError(
            f"{key}.stride_bytes: {p.stride_bytes}; allowed: a multiple of 8 (the pointer "
            "chase reads 8-byte elements at the same offsets)"
        )
    return p


def element_chain(*, array_bytes: int, stride_bytes: int, element_bytes: int) -> np.ndarray:
    """The cycle over the array's lines at `stride_bytes` in elements of `element_bytes`: element
    i holds i + stride (wrapping), so both element sizes visit the same byte offsets."""
    n, s = array_bytes // element_bytes, stride_bytes // element_bytes
    return ((np.arange(n, dtype=np.int64) + s) % n).astype(np.uint64)


def _frame(point, kind, path, element_bytes, loads, cycles, index, sm_mhz) -> pd.DataFrame:
    k = len(cycles)
    return pd.DataFrame(
        {
            "point": np.full(k, point, np.int32),
            "kind": kind,
            "path": path,
            "element_bytes": np.full(k, element_bytes, np.int16),
            "loads": np.full(k, loads, np.int32),
            "sample": np.arange(k, dtype=np.int32),
            "index": np.asarray(index, dtype=np.uint32),
            "cycles": np.asarray(cycles, dtype=np.uint32),
            "sm_clock_mhz": np.full(k, sm_mhz, np.float32),
        }
    )


def run(
    backend: Backend,
    p: TimingParams,
    *,
    device: DeviceEntry,
    inputs: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """The sweep: the clock kinds once, then per path the window and both amortized chases."""
    paths = [path for path in p.paths if backend.has_path(path)]
    total = len(WINDOW_KINDS) + sum(1 + 2 * len(element_sizes(path)) for path in paths)
    carveout = p.carveout_pct if backend.supports_carveout else None
    frames: list[pd.DataFrame] = []

    def done() -> None:
        if progress:
            progress(len(frames), total)

    for kind in WINDOW_KINDS:
        r = backend.run(ClockWindowWork(kind, p.record_steps), seed=len(frames))
        frames.append(_frame(len(frames), kind, "", 0, 0, r.cycles, 0, r.sm_clock_mhz))
        done()
    passes = chain_pass_steps(array_bytes=p.array_bytes, stride_bytes=p.stride_bytes)
    for path in paths:
        work = ChaseWork(
            path=path,
            chain=stride_chain(array_bytes=p.array_bytes, stride_bytes=p.stride_bytes),
            start_index=0,
            warmup_steps=WARMUP_PASSES * passes,
            record_steps=p.record_steps,
            shared_buffer_bytes=8 * p.record_steps,
        )
        r = backend.run_chase(work, carveout_pct=carveout, seed=len(frames))
        frames.append(
            _frame(len(frames), "window", path, 4, 1, r.latency_cycles, r.indices, r.sm_clock_mhz)
        )
        done()
        for element_bytes in element_sizes(path):
            chain = element_chain(
                array_bytes=p.array_bytes, stride_bytes=p.stride_bytes, element_bytes=element_bytes
            )
            for loads in (p.loads, 2 * p.loads):
                chase = AmortizedChaseWork(
                    path=path,
                    element_bytes=element_bytes,
                    next_element=chain,
                    start_element=0,
                    warmup_steps=WARMUP_PASSES * passes,
                    loads=loads,
                    repetitions=p.repetitions,
                    carveout_pct=carveout,
                )
                r = backend.run(chase, seed=len(frames))
                # the element each chain ended on, in 4-byte elements (the trace's unit)
                index = np.full(len(r.cycles), r.final_index * element_bytes // 4)
                frames.append(
                    _frame(
                        len(frames), chase.kind, path, element_bytes, loads, r.cycles, index,
                        r.sm_clock_mhz,
                    )
                )  # fmt: skip
                done()
    return pd.concat(frames, ignore_index=True)
