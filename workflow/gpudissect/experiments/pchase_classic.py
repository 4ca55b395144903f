"""The classic P-chase both ways (TPDS Sec. 3.1, Fig. 5): Saavedra1992 varies the stride at a few
fixed array sizes; Wong2010 varies the array size at a fixed stride. Both read the average
latency per access; here every access is timed and kept, the averages are taken downstream.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import pyarrow as pa

from ..config import AUTO, DeviceEntry, SizeRange, check_stride_and_sizes
from ..contract.backend import Backend, ChaseWork
from ..exceptions import ConfigError
from ..patterns import chain_pass_steps, stride_chain
from . import empty_frame
from .auto_ranges import FALLBACK_SHARED_BYTES, classic_sizes

log = logging.getLogger(__name__)

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
    saavedra_array_bytes: tuple[int, ...] | None  # None: `auto` (`auto_ranges.classic_sizes`)
    saavedra_max_stride_bytes: int
    wong_stride_bytes: int
    wong_array_bytes: SizeRange | None  # None: `auto`
    record_steps: int
    carveout_pct: int


def parse_params(section: dict, key: str) -> ClassicParams:
    w, sv = section["wong"], section["saavedra"]["array_bytes"]
    r = w["array_bytes"]
    p = ClassicParams(
        enabled=section["enabled"],
        path=section["path"],
        saavedra_array_bytes=None if sv == AUTO else tuple(sv),
        saavedra_max_stride_bytes=section["saavedra"]["max_stride_bytes"],
        wong_stride_bytes=w["stride_bytes"],
        wong_array_bytes=None if r == AUTO else SizeRange(r["start"], r["stop"], r["step"]),
        record_steps=section["record_steps"],
        carveout_pct=section["carveout_pct"],
    )
    check_sizes(p, key)
    return p


def check_sizes(p: ClassicParams, key: str) -> None:
    """Checks of the array sizes (explicit ones, or those derived from earlier results)."""
    if p.wong_array_bytes is not None:
        check_stride_and_sizes(p.wong_array_bytes, p.wong_stride_bytes, f"{key}.wong")
    for n in p.saavedra_array_bytes or ():
        if n % 4:
            raise ConfigError(
                f"{key}.saavedra.array_bytes: {n} is not allowed; allowed: multiples of 4"
            )
    largest = max(
        max(p.saavedra_array_bytes or (0,)), p.wong_array_bytes.stop if p.wong_array_bytes else 0
    )
    if p.path == "const" and largest > 65536:
        raise ConfigError(f"{key}.path: const holds at most 65536 bytes; reduce the array sizes")


def resolve_auto(p: ClassicParams, backend: Backend, inputs: dict | None) -> ClassicParams:
    """The sizes of `auto`: around the size stage 1 measured on this path (its analysis, a
    sweep input), or where stage 1 did not run or found none, the driver's shared memory per
    SM (the whole L1/shared array: an upper bound)."""
    if p.saavedra_array_bytes is not None and p.wong_array_bytes is not None:
        return p
    size = stage1_size(inputs, p.path)
    if size is None:
        size = backend.facts().shared_per_sm_bytes or FALLBACK_SHARED_BYTES
        log.info("pchase_classic: no stage-1 size on %s; sizes around %d bytes", p.path, size)
    saavedra, wong = classic_sizes(size, stride_bytes=p.wong_stride_bytes)
    if p.path == "const":
        saavedra = tuple(n for n in saavedra if n <= 65536) or (65536,)
    q = replace(
        p,
        saavedra_array_bytes=p.saavedra_array_bytes or saavedra,
        wong_array_bytes=p.wong_array_bytes or wong,
    )
    check_sizes(q, f"pchase_classic (auto, around {size} bytes)")
    return q


def stage1_size(inputs: dict | None, path: str) -> int | None:
    """The first level's size on `path` in the stage-1 result, or None."""
    source = (inputs or {}).get("cache_stage1")
    if not source:
        return None
    with open(source) as f:
        doc = json.load(f)
    levels = doc.get("paths", {}).get(path, {}).get("levels", [])
    value = levels[0].get("size_bytes", {}).get("value") if levels else None
    return int(value) if value else None


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
    p = resolve_auto(p, backend, inputs)
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
