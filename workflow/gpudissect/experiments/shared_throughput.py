"""Shared-memory copy throughput per SM (Mei & Chu, TPDS Sec. 6.1, Table VII, Figs. 15-16).

Every CTA copies, ``iterations`` times, ``ilp`` elements per thread from one shared region to
another (each thread uses ``2 x ilp x vector_bytes`` of shared memory: the paper's 8 x ILP bytes
for 4-byte ints); consecutive threads touch consecutive elements, so no access has a bank
conflict. Launched with ``ctas_per_sm`` CTAs per SM (grid = SMs x ctas_per_sm); each CTA records
its SM and the SM clock after a __syncthreads() before and after the copy. Per SM, the bytes
loaded and stored by its CTAs over the span from the first start to the last end give the
throughput in bytes per cycle (the paper's ``2 x sizeof(int) x threads x ILP / cycles``), at
``active warps = CTAs on the SM x CTA size / 32``.

Only combinations whose CTAs are all resident together run: CTAs x CTA size within the SM's
threads, CTAs within its CTA limit, CTAs x shared bytes within its shared memory.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from ..config import DeviceEntry
from ..contract.backend import Backend

log = logging.getLogger(__name__)

NAME = "shared_throughput"
KERNELS = ("copy",)
WARP_THREADS = 32
KERNEL_ILPS = (1, 2, 4, 6, 8)  # ILPs kernels/copy.cu is instantiated for
VECTOR_BYTES = (4, 16)

SCHEMA = pa.schema(
    [
        pa.field("point", pa.int32()),
        pa.field("threads_per_cta", pa.int32()),
        pa.field("ctas_per_sm", pa.int16()),
        pa.field("ilp", pa.int16()),
        pa.field("vector_bytes", pa.int16()),
        pa.field("iterations", pa.int32()),
        pa.field("repetition", pa.int16()),
        pa.field("cta", pa.int32()),
        pa.field("smid", pa.int32()),
        pa.field("start_cycle", pa.int64()),
        pa.field("end_cycle", pa.int64()),
        pa.field("bytes", pa.int64()),  # loaded + stored by this CTA
        pa.field("sm_clock_mhz", pa.float32()),
        # device fact: theoretical shared bandwidth of one SM (banks x bytes per bank per cycle)
        pa.field("peak_bytes_per_cycle_per_sm", pa.float32()),
    ]
)


@dataclass(frozen=True)
class ThroughputFactsQuery:
    """Ask a backend for the occupancy limits and datasheet bandwidths of its device."""


@dataclass(frozen=True)
class ThroughputFacts:
    sms: int
    max_threads_per_sm: int
    max_ctas_per_sm: int
    shared_bytes_per_sm: int | None  # None: no shared memory to test
    shared_bytes_per_cta: int | None  # the most one CTA may use
    shared_reserved_bytes_per_cta: int
    shared_peak_bytes_per_cycle_per_sm: float | None
    dram_theoretical_gbps: float | None  # None: no DRAM bandwidth to test
    l2_bytes: int


@dataclass(frozen=True)
class SharedCopyWork:
    threads_per_cta: int
    ctas_per_sm: int
    ilp: int
    vector_bytes: int = 4
    iterations: int = 512
    repetitions: int = 3

    def __post_init__(self) -> None:
        if self.ilp not in KERNEL_ILPS:
            raise ValueError(f"ilp must be one of {KERNEL_ILPS}, got {self.ilp}")
        if self.vector_bytes not in VECTOR_BYTES:
            raise ValueError(f"vector_bytes must be one of {VECTOR_BYTES}")
        if not 1 <= self.threads_per_cta <= 1024 or self.threads_per_cta % WARP_THREADS:
            raise ValueError("threads_per_cta must be a multiple of 32 up to 1024")

    @property
    def shared_bytes_per_cta(self) -> int:
        return 2 * self.ilp * self.vector_bytes * self.threads_per_cta

    @property
    def bytes_per_cta(self) -> int:
        """Loaded + stored by one CTA in one launch."""
        return self.shared_bytes_per_cta * self.iterations


@dataclass(frozen=True)
class SharedCopyResult:
    """Per CTA of every timed launch (arrays of equal length)."""

    repetition: np.ndarray
    cta: np.ndarray
    smid: np.ndarray
    start_cycle: np.ndarray
    end_cycle: np.ndarray
    sm_clock_mhz: float


@dataclass(frozen=True)
class SharedThroughputSweep:
    enabled: bool
    threads_per_cta: tuple[int, ...]
    ctas_per_sm: tuple[int, ...]
    ilp: tuple[int, ...]
    vector_bytes: tuple[int, ...]
    iterations: int
    repetitions: int


def parse_params(section: dict, key: str) -> SharedThroughputSweep:
    return SharedThroughputSweep(
        enabled=section["enabled"],
        threads_per_cta=tuple(section["threads_per_cta"]),
        ctas_per_sm=tuple(section["ctas_per_sm"]),
        ilp=tuple(section["ilp"]),
        vector_bytes=tuple(section["vector_bytes"]),
        iterations=section["iterations"],
        repetitions=section["repetitions"],
    )


def fits(work: SharedCopyWork, facts: ThroughputFacts) -> bool:
    """Whether all ``ctas_per_sm`` CTAs of the launch are resident on one SM together."""
    if facts.shared_bytes_per_sm is None or facts.shared_bytes_per_cta is None:
        return False
    per_cta = work.shared_bytes_per_cta + facts.shared_reserved_bytes_per_cta
    return (
        work.ctas_per_sm * work.threads_per_cta <= facts.max_threads_per_sm
        and work.ctas_per_sm <= facts.max_ctas_per_sm
        and work.shared_bytes_per_cta <= facts.shared_bytes_per_cta
        and work.ctas_per_sm * per_cta <= facts.shared_bytes_per_sm
    )


def plan(sweep: SharedThroughputSweep, facts: ThroughputFacts) -> list[SharedCopyWork]:
    works = []
    for vector in sweep.vector_bytes:
        for threads in sweep.threads_per_cta:
            for ctas in sweep.ctas_per_sm:
                for ilp in sweep.ilp:
                    work = SharedCopyWork(
                        threads, ctas, ilp, vector, sweep.iterations, sweep.repetitions
                    )
                    if fits(work, facts):
                        works.append(work)
    return works


def run(
    backend: Backend,
    sweep: SharedThroughputSweep,
    *,
    device: DeviceEntry,
    inputs: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Run the sweep; one row per CTA of every timed launch."""
    facts = backend.run(ThroughputFactsQuery())
    works = plan(sweep, facts)
    if not works:
        log.info("no shared-copy configuration fits this device (or it has no shared memory)")
    frames = [pd.DataFrame({f.name: pd.Series(dtype=f.type.to_pandas_dtype()) for f in SCHEMA})]
    for i, work in enumerate(works):
        r = backend.run(work, seed=i)
        n = len(r.cta)
        frames.append(
            pd.DataFrame(
                {
                    "point": np.full(n, i, np.int32),
                    "threads_per_cta": np.full(n, work.threads_per_cta, np.int32),
                    "ctas_per_sm": np.full(n, work.ctas_per_sm, np.int16),
                    "ilp": np.full(n, work.ilp, np.int16),
                    "vector_bytes": np.full(n, work.vector_bytes, np.int16),
                    "iterations": np.full(n, work.iterations, np.int32),
                    "repetition": r.repetition.astype(np.int16),
                    "cta": r.cta.astype(np.int32),
                    "smid": r.smid.astype(np.int32),
                    "start_cycle": r.start_cycle.astype(np.int64),
                    "end_cycle": r.end_cycle.astype(np.int64),
                    "bytes": np.full(n, work.bytes_per_cta, np.int64),
                    "sm_clock_mhz": np.full(n, r.sm_clock_mhz, np.float32),
                    "peak_bytes_per_cycle_per_sm": np.full(
                        n, facts.shared_peak_bytes_per_cycle_per_sm, np.float32
                    ),
                }
            )
        )
        if progress:
            progress(i + 1, len(works))
    return pd.concat(frames, ignore_index=True)
