"""The classic P-chase both ways (TPDS Sec. 3.1, Fig. 5): Saavedra1992 varies the stride at a few
fixed array sizes; Wong2010 varies the array size at a fixed stride. Both read the average
latency per access; here every access is timed and kept, the averages are taken downstream.
"""

from __future__ import annotations

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

NAME = "pchase_classic"
KERNELS = ("pchase",)

SCHEMA = pa.schema(
    [
        pa.field("point", pa.int32()),
        pa.field("method", pa.string()),  # saavedra | wong
        pa.field("path", pa.string()),
        pa.field("array_bytes", pa.int64()),
        pa.field("stride_bytes", pa.int64()),
        pa.field("step", pa.int32()),
        pa.field("index", pa.uint32()),
        pa.field("latency_cycles", pa.uint32()),
    ]
)


@dataclass(frozen=True)
class ClassicParams:
    enabled: bool
    path: str
    saavedra_array_bytes: tuple[int, ...]
    saavedra_max_stride_bytes: int
    wong_stride_bytes: int
    wong_array_bytes: SizeRange
    record_steps: int
    carveout_pct: int


def parse_params(section: dict, key: str) -> ClassicParams:
    w = section["wong"]
    p = ClassicParams(
        enabled=section["enabled"],
        path=section["path"],
        saavedra_array_bytes=tuple(section["saavedra"]["array_bytes"]),
        saavedra_max_stride_bytes=section["saavedra"]["max_stride_bytes"],
        wong_stride_bytes=w["stride_bytes"],
        wong_array_bytes=SizeRange(
            w["array_bytes"]["start"], w["array_bytes"]["stop"], w["array_bytes"]["step"]
        ),
        record_steps=section["record_steps"],
        carveout_pct=section["carveout_pct"],
    )
    check_stride_and_sizes(p.wong_array_bytes, p.wong_stride_bytes, f"{key}.wong")
    for n in p.saavedra_array_bytes:
        if n % 4:
            raise ConfigError(
                f"{key}.saavedra.array_bytes: {n} is not allowed; allowed: multiples of 4"
            )
    if p.path == "const" and max(max(p.saavedra_array_bytes), p.wong_array_bytes.stop) > 65536:
        raise ConfigError(f"{key}.path: const holds at most 65536 bytes; reduce the array sizes")
    return p


def plan(p: ClassicParams) -> list[tuple[str, int, int]]:
    """(method, array_bytes, stride_bytes) of every launch."""
    points = []
    for n in p.saavedra_array_bytes:
        s = 4
        while s <= min(p.saavedra_max_stride_bytes, n // 2):
            points.append(("saavedra", n, s))
            s *= 2
    points += [("wong", n, p.wong_stride_bytes) for n in p.wong_array_bytes.sizes()]
    return points


def run(
    backend: Backend,
    p: ClassicParams,
    *,
    device: DeviceEntry,
    inputs: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    if not backend.has_path(p.path):
        return empty_frame(SCHEMA)  # the analysis reports why nothing was measured
    carveout = p.carveout_pct if backend.supports_carveout else None
    frames = []
    points = plan(p)
    for i, (method, n, s) in enumerate(points):
        steps = chain_pass_steps(array_bytes=n, stride_bytes=s)
        work = ChaseWork(
            path=p.path,
            chain=stride_chain(array_bytes=n, stride_bytes=s),
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
                    "method": method,
                    "path": p.path,
                    "array_bytes": np.full(k, n, np.int64),
                    "stride_bytes": np.full(k, s, np.int64),
                    "step": np.arange(k, dtype=np.int32),
                    "index": r.indices,
                    "latency_cycles": r.latency_cycles,
                }
            )
        )
        if progress:
            progress(i + 1, len(points))
    return pd.concat(frames, ignore_index=True)
