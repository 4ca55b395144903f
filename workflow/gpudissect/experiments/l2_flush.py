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

from ..backends.base import Backend
from ..config import DeviceEntry, SizeRange
from ..exceptions import ConfigError

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
    size_bytes: SizeRange
    flush_bytes: int
    repetitions: int
    threads_per_block: int


def parse_params(section: dict, key: str) -> L2FlushSweep:
    r = section["size_bytes"]
    sweep = L2FlushSweep(
        enabled=section["enabled"],
        size_bytes=SizeRange(r["start"], r["stop"], r["step"]),
        flush_bytes=section["flush_bytes"],
        repetitions=section["repetitions"],
        threads_per_block=section["threads_per_block"],
    )
    if sweep.size_bytes.stop < sweep.size_bytes.start:
        raise ConfigError(f"{key}.size_bytes.stop: below start; allowed: stop >= start")
    for name in ("start", "step"):
        if getattr(sweep.size_bytes, name) % (ELEMENT_BYTES * 32):
            raise ConfigError(
                f"{key}.size_bytes.{name}: {getattr(sweep.size_bytes, name)} is not a multiple "
                f"of {ELEMENT_BYTES * 32} (one warp of 8-byte elements)"
            )
    if sweep.flush_bytes <= sweep.size_bytes.stop:
        raise ConfigError(
            f"{key}.flush_bytes: {sweep.flush_bytes} must exceed the largest size "
            f"{sweep.size_bytes.stop} (the flush must evict more than any copy brings in)"
        )
    return sweep


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

    rows = []
    sizes = sweep.size_bytes.sizes()
    total = len(sizes) * 2 * sweep.repetitions
    for rep in range(sweep.repetitions):
        for size in sizes:
            for flushed in (False, True):
                work = CopyWork(size, flushed, sweep.flush_bytes, sweep.threads_per_block)
                point = len(rows)
                result = backend.run(work, seed=point)
                rows.append(
                    (point, size, flushed, sweep.flush_bytes, rep, float(result.elapsed_ms[0]),
                     result.sm_clock_mhz)
                )  # fmt: skip
                if progress:
                    progress(point + 1, total)
    return pd.DataFrame(rows, columns=SCHEMA.names)
