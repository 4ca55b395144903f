"""L2 footprint sweep (TPDS Sec. 4.6; Hopper's partitioned L2): one thread walks arrays of
growing footprint on the L2-only path (`ld.global.cg`), every access timed. Shows the footprints
where latency steps up (L2 capacity, partition or TLB effects) and, in the per-access latencies
of footprints that fit, whether lines sit at different distances (near and far L2 partitions).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from ..backends.base import Backend, ChaseWork
from ..config import AUTO, DeviceEntry
from ..exceptions import ConfigError
from ..patterns import chain_pass_steps, stride_chain
from ..sizesearch import refine_steps
from . import empty_frame
from .auto_ranges import l2_grid

NAME = "l2"
KERNELS = ("pchase",)

SCHEMA = pa.schema(
    [
        pa.field("point", pa.int32()),
        pa.field("path", pa.string()),
        pa.field("array_bytes", pa.int64()),
        pa.field("stride_bytes", pa.int64()),
        pa.field("step", pa.int32()),
        pa.field("index", pa.uint32()),
        pa.field("latency_cycles", pa.uint32()),
    ]
)


@dataclass(frozen=True)
class L2Params:
    enabled: bool
    path: str
    stride_bytes: int
    array_bytes: tuple[int, ...] | None  # None: `auto` (`auto_ranges.l2_grid`, then refined)
    record_steps: int


def parse_params(section: dict, key: str) -> L2Params:
    if section["array_bytes"] == AUTO:
        return L2Params(
            enabled=section["enabled"],
            path=section["path"],
            stride_bytes=section["stride_bytes"],
            array_bytes=None,
            record_steps=section["record_steps"],
        )
    sizes = tuple(sorted(section["array_bytes"]))
    p = L2Params(
        enabled=section["enabled"],
        path=section["path"],
        stride_bytes=section["stride_bytes"],
        array_bytes=sizes,
        record_steps=section["record_steps"],
    )
    if len(set(sizes)) != len(sizes):
        raise ConfigError(f"{key}.array_bytes: sizes repeat; allowed: distinct sizes")
    if p.stride_bytes > sizes[0]:
        raise ConfigError(
            f"{key}.stride_bytes: {p.stride_bytes} is larger than the smallest "
            f"array ({sizes[0]}); allowed: a stride up to the smallest array size"
        )
    return p


def run(
    backend: Backend,
    p: L2Params,
    *,
    device: DeviceEntry,
    inputs: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    if not backend.has_path(p.path):
        return empty_frame(SCHEMA)  # the analysis reports why nothing was measured
    frames: list[pd.DataFrame] = []
    carveout = 100 if backend.supports_carveout else None  # L1 out of the way (cg bypasses it)

    def measure(n: int) -> np.ndarray:
        i = len(frames)
        steps = chain_pass_steps(array_bytes=n, stride_bytes=p.stride_bytes)
        work = ChaseWork(
            path=p.path,
            chain=stride_chain(array_bytes=n, stride_bytes=p.stride_bytes),
            start_index=0,
            warmup_steps=steps,
            record_steps=p.record_steps,
            shared_buffer_bytes=8 * p.record_steps,
        )
        r = backend.run_chase(work, carveout_pct=carveout, seed=i)
        k = len(r.latency_cycles)
        frames.append(
            pd.DataFrame(
                {
                    "point": np.full(k, i, np.int32),
                    "path": p.path,
                    "array_bytes": np.full(k, n, np.int64),
                    "stride_bytes": np.full(k, p.stride_bytes, np.int64),
                    "step": np.arange(k, dtype=np.int32),
                    "index": r.indices,
                    "latency_cycles": r.latency_cycles,
                }
            )
        )
        if progress:
            progress(i + 1, len(p.array_bytes or ()) or i + 1)
        return r.latency_cycles

    if p.array_bytes is not None:
        for n in p.array_bytes:
            measure(n)
    else:
        # the step rule needs scipy.stats: imported only where the sweep refines
        from ..analysis.l2 import step_brackets

        grid, resolution = l2_grid(backend.facts(), stride_bytes=p.stride_bytes)
        refine_steps(measure, step_brackets, grid_bytes=grid, resolution_bytes=resolution,
                     align_bytes=p.stride_bytes)  # fmt: skip
    return pd.concat(frames, ignore_index=True)
