"""Caches per SM (Größler's thesis, Sec. 4.6): how many copies of the L1 data, texture,
read-only and constant L1 cache one SM has.

For every configured path that stage 1 found a cache on, the base thread (warp 0) fills its
cache, a test thread in warp w (w = 1 .. warps - 1) walks an array near the same cache's size
on the same path, and the base thread re-walks timed (`experiments.disturbance`); plus one
baseline per path. A warp that reaches another copy leaves the base thread's lines alone. The
rules are in `analysis.caches.cache_instances`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from ..config import DeviceEntry
from ..contract.backend import Backend
from ..exceptions import ConfigError
from .cache_sharing import check_common
from .cache_stage1 import backend_paths
from .disturbance import KERNELS, SCHEMA, DisturbanceRecorder, stage1_targets
from .multichase import MAX_BLOCK_THREADS, WARP_THREADS

__all__ = ["KERNELS", "SCHEMA", "InstancesParams", "parse_params", "run"]

NAME = "cache_instances"
PATHS = ("ca", "tex", "nc", "const")


@dataclass(frozen=True)
class InstancesParams:
    enabled: bool
    paths: tuple[str, ...]
    warps: int
    fill_fraction: float
    repetitions: int
    alpha: float
    min_excess_miss_fraction: float


def parse_params(section: dict, key: str) -> InstancesParams:
    check_common(section, key)
    most = MAX_BLOCK_THREADS // WARP_THREADS
    if not 2 <= section["warps"] <= most:
        raise ConfigError(
            f"{key}.warps: {section['warps']}; allowed: 2 to {most} (warps of one block)"
        )
    return InstancesParams(
        enabled=section["enabled"],
        paths=tuple(section["paths"]),
        warps=section["warps"],
        fill_fraction=section["fill_fraction"],
        repetitions=section["repetitions"],
        alpha=section["alpha"],
        min_excess_miss_fraction=section["min_excess_miss_fraction"],
    )


def run(
    backend: Backend,
    params: InstancesParams,
    *,
    device: DeviceEntry,
    inputs: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Per path: a baseline, then the base thread against a test thread in each other warp."""
    available = backend_paths(backend)
    paths = [p for p in params.paths if available is None or p in available]
    targets, _, settings = stage1_targets((inputs or {}).get("cache_stage1"), paths)
    rec = DisturbanceRecorder(backend, settings=settings, fill_fraction=params.fill_fraction)
    total = params.repetitions * len(targets) * params.warps
    for _ in range(params.repetitions):
        for path in (p for p in paths if p in targets):
            rec.launch(targets[path], None)
            for warp in range(1, params.warps):
                rec.launch(targets[path], targets[path], warp_b=warp)
            if progress:
                progress(len(rec.frames), total)
    return rec.data()
