"""L2 size from a copy with and without a flushed L2 (Lashgar, Salehi & Baniasadi, Sec. 3.3 and
Fig. 2): a kernel copies `size` bytes (8 bytes per thread) right after the host copied the source
to the device, so the source sits in the L2 as far as it fits; in the flushed variant a large
dummy host-to-device copy evicts it first. The gap between the two times grows while the source
fits in the L2 and saturates beyond it. One point per (size, flushed, repetition).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from ..config import AUTO, DeviceEntry, SizeRange
from ..contract.backend import Backend
from ..exceptions import ConfigError
from .auto_ranges import l2_flush_range

NAME = "l2_flush"
KERNELS = ("l2flush",)
ELEMENT_BYTES = 8

SCHEMA = pa.schema(
    [
        pa.field("point", pa.int32()),
        pa.field("size_bytes", pa.int64()),
        pa.field("flushed", pa.bool_()),
        pa.field("flush_bytes", pa.int64()),
        pa.field("repetition", pa.int16()),
        pa.field("elapsed_ms", pa.float64()),
        pa.field("sm_clock_mhz", pa.float32()),
    ]
)


@dataclass(frozen=True)
class L2FlushSweep:
    enabled: bool
    size_bytes: SizeRange | None  # None: `auto` (`auto_ranges.l2_flush_range`)
    flush_bytes: int | None  # None: `auto` (four times the driver's L2 size)
    repetitions: int
    threads_per_block: int


def parse_params(section: dict, key: str) -> L2FlushSweep:
    r = section["size_bytes"]
    sweep = L2FlushSweep(
        enabled=section["enabled"],
        size_bytes=None if r == AUTO else SizeRange(r["start"], r["stop"], r["step"]),
        flush_bytes=None if section["flush_bytes"] == AUTO else section["flush_bytes"],
        repetitions=section["repetitions"],
        threads_per_block=section["threads_per_block"],
    )
    if sweep.size_bytes is not None:
        check_sizes(sweep.size_bytes, sweep.flush_bytes, key)
    return sweep


def check_sizes(sizes: SizeRange, flush_bytes: int | None, key: str) -> None:
    """The checks of a size range and flush (explicit, or derived from the driver's facts)."""
    if sizes.stop < sizes.start:
        raise ConfigError(f"{key}.size_bytes.stop: below start; allowed: stop >= start")
    for name in ("start", "step"):
        if getattr(sizes, name) % (ELEMENT_BYTES * 32):
            raise ConfigError(
                f"{key}.size_bytes.{name}: {getattr(sizes, name)} is not a multiple "
                f"of {ELEMENT_BYTES * 32} (one warp of 8-byte elements)"
            )
    if flush_bytes is not None and flush_bytes <= sizes.stop:
        raise ConfigError(
            f"{key}.flush_bytes: {flush_bytes} must exceed the largest size "
            f"{sizes.stop} (the flush must evict more than any copy brings in)"
        )


@dataclass(frozen=True)
class CopyWork:
    """One timed copy of `size_bytes` (8-byte elements, `threads_per_block` threads per block)
    right after a host-to-device copy of the source; when `flushed`, a host-to-device copy of
    `flush_bytes` to another buffer runs in between."""

    size_bytes: int
    flushed: bool
    flush_bytes: int
    threads_per_block: int = 256


@dataclass(frozen=True)
class CopyResult:
    elapsed_ms: np.ndarray  # one kernel time
    sm_clock_mhz: float


def run(
    backend: Backend,
    sweep: L2FlushSweep,
    *,
    device: DeviceEntry,
    inputs: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:

    size_range, flush_bytes = sweep.size_bytes, sweep.flush_bytes
    if size_range is None or flush_bytes is None:
        auto_range, auto_flush = l2_flush_range(backend.facts(), align_bytes=ELEMENT_BYTES * 32)
        size_range, flush_bytes = size_range or auto_range, flush_bytes or auto_flush
        check_sizes(size_range, flush_bytes, "l2_flush (from the driver's L2 size)")
    rows = []
    sizes = size_range.sizes()
    total = len(sizes) * 2 * sweep.repetitions
    for rep in range(sweep.repetitions):
        for size in sizes:
            for flushed in (False, True):
                work = CopyWork(size, flushed, flush_bytes, sweep.threads_per_block)
                point = len(rows)
                result = backend.run(work, seed=point)
                rows.append(
                    (point, size, flushed, flush_bytes, rep, float(result.elapsed_ms[0]),
                     result.sm_clock_mhz)
                )  # fmt: skip
                if progress:
                    progress(point + 1, total)
    return pd.DataFrame(rows, columns=SCHEMA.names)
