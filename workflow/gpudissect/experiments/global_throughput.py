"""Global-memory copy throughput (Mei & Chu, TPDS Sec. 5.1, Table VI, Fig. 12).

A plain copy of ``copy_bytes`` (several times the L2) from one device buffer to another, swept
over the number of CTAs (a multiple of the SM count), the CTA size and the ILP (elements each
thread loads before it stores them; ``element_bytes`` 4 is the paper's int, 16 a vectorised
copy). Each thread walks the buffer in a grid-stride loop, so every point copies the same bytes;
the launch is timed with CUDA events (the paper timed it on the CPU), one untimed launch first.
Throughput counts the bytes loaded and stored. The same run times a device-to-device copy of the
same buffers (cuMemcpyDtoD) as the ceiling the copy kernel is compared with (Table VI lists
the theoretical bandwidth from the memory clock, bus width and DDR factor beside it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import pyarrow as pa

from ..config import AUTO, DeviceEntry
from ..contract.backend import Backend
from ..exceptions import ConfigError
from .auto_ranges import copy_bytes
from .shared_throughput import KERNEL_ILPS, ThroughputFactsQuery

log = logging.getLogger(__name__)

NAME = "global_throughput"
KERNELS = ("copy",)
ELEMENT_BYTES = (4, 16)
KERNEL_ROWS, CEILING_ROWS = "kernel", "memcpy_dtod"

SCHEMA = pa.schema(
    [
        pa.field("point", pa.int32()),
        pa.field("kind", pa.string()),  # kernel | memcpy_dtod (the ceiling)
        pa.field("ctas", pa.int32()),
        pa.field("ctas_per_sm", pa.int32()),
        pa.field("threads_per_cta", pa.int32()),
        pa.field("ilp", pa.int16()),
        pa.field("element_bytes", pa.int16()),
        pa.field("repetition", pa.int16()),
        pa.field("bytes_moved", pa.int64()),  # loaded + stored
        pa.field("elapsed_ns", pa.float64()),
        pa.field("sm_clock_mhz", pa.float32()),
        pa.field("memory_clock_mhz", pa.float32()),
        # device fact: memory clock x bus width x DDR factor (the profile's value on the sim)
        pa.field("theoretical_gbps", pa.float64()),
        pa.field("sms", pa.int32()),
    ]
)


@dataclass(frozen=True)
class GlobalCopyWork:
    ctas: int
    threads_per_cta: int
    ilp: int
    element_bytes: int
    copy_bytes: int
    repetitions: int = 3

    def __post_init__(self) -> None:
        if self.ilp not in KERNEL_ILPS:
            raise ValueError(f"ilp must be one of {KERNEL_ILPS}, got {self.ilp}")
        if self.element_bytes not in ELEMENT_BYTES:
            raise ValueError(f"element_bytes must be one of {ELEMENT_BYTES}")
        if self.copy_bytes % 16:
            raise ValueError("copy_bytes must be a multiple of 16")


@dataclass(frozen=True)
class DeviceCopyWork:
    """The ceiling: the driver's device-to-device copy of ``copy_bytes``."""

    copy_bytes: int
    repetitions: int = 3


@dataclass(frozen=True)
class CopyTimings:
    elapsed_ns: np.ndarray  # one per timed repetition
    sm_clock_mhz: float
    memory_clock_mhz: float


@dataclass(frozen=True)
class GlobalThroughputSweep:
    enabled: bool
    ctas_per_sm: tuple[int, ...]
    threads_per_cta: tuple[int, ...]
    ilp: tuple[int, ...]
    element_bytes: tuple[int, ...]
    copy_bytes: int | None  # None: `auto` (`auto_ranges.copy_bytes`)
    repetitions: int


def parse_params(section: dict, key: str) -> GlobalThroughputSweep:
    if section["copy_bytes"] != AUTO and section["copy_bytes"] % 16:
        raise ConfigError(
            f"{key}.copy_bytes: {section['copy_bytes']} is not a multiple of 16; allowed: a "
            "multiple of 16 bytes (one vector)"
        )
    return GlobalThroughputSweep(
        enabled=section["enabled"],
        ctas_per_sm=tuple(section["ctas_per_sm"]),
        threads_per_cta=tuple(section["threads_per_cta"]),
        ilp=tuple(section["ilp"]),
        element_bytes=tuple(section["element_bytes"]),
        copy_bytes=None if section["copy_bytes"] == AUTO else section["copy_bytes"],
        repetitions=section["repetitions"],
    )


def plan(sweep: GlobalThroughputSweep, *, sms: int, max_threads_per_sm: int) -> list:
    works: list = [DeviceCopyWork(sweep.copy_bytes, sweep.repetitions)]
    for element in sweep.element_bytes:
        for threads in sweep.threads_per_cta:
            if threads > min(1024, max_threads_per_sm):
                continue
            for per_sm in sweep.ctas_per_sm:
                for ilp in sweep.ilp:
                    works.append(
                        GlobalCopyWork(
                            per_sm * sms, threads, ilp, element, sweep.copy_bytes, sweep.repetitions
                        )
                    )
    return works


def run(
    backend: Backend,
    sweep: GlobalThroughputSweep,
    *,
    device: DeviceEntry,
    inputs: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Run the sweep; one row per timed launch (and per timed ceiling copy)."""
    facts = backend.run(ThroughputFactsQuery())
    frames = [pd.DataFrame({f.name: pd.Series(dtype=f.type.to_pandas_dtype()) for f in SCHEMA})]
    if facts.dram_theoretical_gbps is None:
        log.info("the device has no DRAM throughput description; nothing to run")
        return pd.concat(frames, ignore_index=True)
    if sweep.copy_bytes is None:
        sweep = replace(sweep, copy_bytes=copy_bytes(facts.l2_bytes))
    if sweep.copy_bytes < 2 * facts.l2_bytes:
        log.warning(
            "copy_bytes %d is less than twice the L2 (%d bytes): the copy may hit in the L2",
            sweep.copy_bytes,
            facts.l2_bytes,
        )
    works = plan(sweep, sms=facts.sms, max_threads_per_sm=facts.max_threads_per_sm)
    for i, work in enumerate(works):
        t = backend.run(work, seed=i)
        n = len(t.elapsed_ns)
        ceiling = isinstance(work, DeviceCopyWork)
        frames.append(
            pd.DataFrame(
                {
                    "point": np.full(n, i, np.int32),
                    "kind": [CEILING_ROWS if ceiling else KERNEL_ROWS] * n,
                    "ctas": np.full(n, 0 if ceiling else work.ctas, np.int32),
                    "ctas_per_sm": np.full(n, 0 if ceiling else work.ctas // facts.sms, np.int32),
                    "threads_per_cta": np.full(n, 0 if ceiling else work.threads_per_cta, np.int32),
                    "ilp": np.full(n, 0 if ceiling else work.ilp, np.int16),
                    "element_bytes": np.full(n, 0 if ceiling else work.element_bytes, np.int16),
                    "repetition": np.arange(n, dtype=np.int16),
                    "bytes_moved": np.full(n, 2 * work.copy_bytes, np.int64),
                    "elapsed_ns": t.elapsed_ns.astype(np.float64),
                    "sm_clock_mhz": np.full(n, t.sm_clock_mhz, np.float32),
                    "memory_clock_mhz": np.full(n, t.memory_clock_mhz, np.float32),
                    "theoretical_gbps": np.full(n, facts.dram_theoretical_gbps, np.float64),
                    "sms": np.full(n, facts.sms, np.int32),
                }
            )
        )
        if progress:
            progress(i + 1, len(works))
    return pd.concat(frames, ignore_index=True)
