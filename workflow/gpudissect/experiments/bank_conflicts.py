"""Shared-memory bank conflicts by strided access (Mei & Chu, TPDS Sec. 6.2, Listing 4, Figs.
17-19, Table VIII; Mei et al., NPC 2014 Sec. 3.1, Listing 1, Figs. 5 and 7).

One warp of one block; thread ``t`` starts at element ``t * stride`` of a shared array whose
every element holds its own address, and loads ``LOADS`` times in a dependent chain
(``a = s[a]``), so every load of the chain reads the same addresses; the chain is timed with the
SM clock (one untimed pass first, then ``repetitions`` timed ones). Swept over strides, element
sizes and every bank mode the device offers (Kepler: 4 and 8 bytes, set with
cudaDeviceSetSharedMemConfig; Fermi, Maxwell and later: 4 bytes only).
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
from ..exceptions import ConfigError

log = logging.getLogger(__name__)

NAME = "bank_conflicts"
KERNELS = ("banks",)
LOADS = 64  # timed dependent loads per pass (the papers' repeat64)
WARP_THREADS = 32

SCHEMA = pa.schema(
    [
        pa.field("point", pa.int32()),
        pa.field("bank_mode_bytes", pa.int16()),
        pa.field("element_bytes", pa.int16()),
        pa.field("stride_elements", pa.int32()),
        pa.field("loads", pa.int32()),
        pa.field("repetition", pa.int16()),
        pa.field("elapsed_cycles", pa.uint32()),  # the whole timed chain of `loads` loads
        pa.field("sm_clock_mhz", pa.float32()),
    ]
)


@dataclass(frozen=True)
class SharedFactsQuery:
    """Ask a backend which shared-memory bank modes its device offers."""


@dataclass(frozen=True)
class SharedFacts:
    modes_bytes: tuple[int, ...]  # empty: no shared memory to test
    size_bytes: int  # shared memory one block may use


@dataclass(frozen=True)
class SharedBankWork:
    """One launch: one warp, ``index = threadIdx.x * stride_elements`` into an array of
    ``element_bytes`` elements, ``loads`` dependent loads per timed pass, bank mode
    ``bank_mode_bytes``."""

    stride_elements: int
    element_bytes: int
    bank_mode_bytes: int
    loads: int = LOADS
    repetitions: int = 10

    def __post_init__(self) -> None:
        if self.stride_elements < 0:
            raise ValueError(f"stride_elements must be >= 0, got {self.stride_elements}")
        if self.element_bytes not in (4, 8):
            raise ValueError(f"element_bytes must be 4 or 8, got {self.element_bytes}")
        if self.repetitions < 1 or self.loads < 1:
            raise ValueError("loads and repetitions must be >= 1")

    @property
    def elements(self) -> int:
        """Array elements the warp spans (the last thread's element included)."""
        return (WARP_THREADS - 1) * self.stride_elements + 1

    def start_indices(self) -> np.ndarray:
        """The element each thread reads, every load (the chain returns to it)."""
        return np.arange(WARP_THREADS, dtype=np.int64) * self.stride_elements


@dataclass(frozen=True)
class SharedBankResult:
    elapsed_cycles: np.ndarray  # uint32, one per timed pass
    final_indices: np.ndarray  # uint32, the element each thread's chain ended on
    sm_clock_mhz: float


@dataclass(frozen=True)
class BankConflictSweep:
    enabled: bool
    strides: tuple[int, ...]
    element_bytes: tuple[int, ...]
    bank_modes_bytes: tuple[int, ...]  # empty: every mode the device offers
    repetitions: int


def parse_params(section: dict, key: str) -> BankConflictSweep:
    r = section["strides"]
    if r["stop"] < r["start"]:
        raise ConfigError(
            f"{key}.strides.stop: {r['stop']} is below start {r['start']}; allowed: stop >= start"
        )
    return BankConflictSweep(
        enabled=section["enabled"],
        strides=tuple(range(r["start"], r["stop"] + 1, r["step"])),
        element_bytes=tuple(section["element_bytes"]),
        bank_modes_bytes=tuple(section["bank_modes_bytes"]),
        repetitions=section["repetitions"],
    )


def plan(sweep: BankConflictSweep, facts: SharedFacts) -> list[SharedBankWork]:
    """Every launch, in run order; modes the device lacks and arrays that do not fit are left
    out (logged)."""
    modes = [m for m in (sweep.bank_modes_bytes or facts.modes_bytes) if m in facts.modes_bytes]
    skipped = sorted(set(sweep.bank_modes_bytes) - set(facts.modes_bytes))
    if skipped:
        log.info("bank modes %s not offered by the device (it has %s)", skipped, facts.modes_bytes)
    works = []
    for mode in modes:
        for element in sweep.element_bytes:
            for stride in sweep.strides:
                work = SharedBankWork(stride, element, mode, LOADS, sweep.repetitions)
                # the array plus one sink word per thread must fit one block's shared memory
                if (work.elements + WARP_THREADS) * element > facts.size_bytes:
                    log.info("stride %d of %d-byte elements does not fit", stride, element)
                    continue
                works.append(work)
    return works


def run(
    backend: Backend,
    sweep: BankConflictSweep,
    *,
    device: DeviceEntry,
    inputs: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Run the sweep on `backend`; one row per timed pass."""
    facts = backend.run(SharedFactsQuery())
    works = plan(sweep, facts)
    frames = [pd.DataFrame({f.name: pd.Series(dtype=f.type.to_pandas_dtype()) for f in SCHEMA})]
    for i, work in enumerate(works):
        result = backend.run(work, seed=i)
        n = len(result.elapsed_cycles)
        frames.append(
            pd.DataFrame(
                {
                    "point": np.full(n, i, np.int32),
                    "bank_mode_bytes": np.full(n, work.bank_mode_bytes, np.int16),
                    "element_bytes": np.full(n, work.element_bytes, np.int16),
                    "stride_elements": np.full(n, work.stride_elements, np.int32),
                    "loads": np.full(n, work.loads, np.int32),
                    "repetition": np.arange(n, dtype=np.int16),
                    "elapsed_cycles": result.elapsed_cycles.astype(np.uint32),
                    "sm_clock_mhz": np.full(n, result.sm_clock_mhz, np.float32),
                }
            )
        )
        if progress:
            progress(i + 1, len(works))
    return pd.concat(frames, ignore_index=True)
