"""Cache sharing (Größler's thesis, Sec. 4.5): whether the caches of the L1-level load paths
(ca: L1 data, tex: texture, nc: read-only, const: constant L1) are one physical cache.

For every ordered pair of the configured paths that stage 1 found a cache on (both directions),
thread A (thread 0) fills its cache, thread B (thread 1, the same warp, so the same copy of a
cache with several per SM) walks an array near its own cache's size on the other path, and A
re-walks timed (`experiments.disturbance`); plus one baseline per path without B. The rules
are in `analysis.caches.cache_sharing`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from ..config import DeviceEntry
from ..contract.backend import Backend
from ..exceptions import ConfigError
from .cache_stage1 import backend_paths
from .disturbance import KERNELS, SCHEMA, DisturbanceRecorder, stage1_targets

__all__ = ["KERNELS", "SCHEMA", "SharingParams", "parse_params", "run"]

NAME = "cache_sharing"
PATHS = ("ca", "tex", "nc", "const")


@dataclass(frozen=True)
class SharingParams:
    enabled: bool
    paths: tuple[str, ...]
    fill_fraction: float
    repetitions: int
    alpha: float
    min_excess_miss_fraction: float


def check_common(section: dict, key: str) -> None:
    """Checks both disturbance families share."""
    paths = section["paths"]
    if len(set(paths)) != len(paths):
        raise ConfigError(f"{key}.paths: {paths} repeats a path; allowed: each of {PATHS} once")
    if not 0 < section["fill_fraction"] < 1:
        raise ConfigError(
            f"{key}.fill_fraction: {section['fill_fraction']}; allowed: between 0 and 1 "
            "(an array that fills its cache without overflowing it)"
        )


def parse_params(section: dict, key: str) -> SharingParams:
    check_common(section, key)
    if len(section["paths"]) < 2:
        raise ConfigError(f"{key}.paths: {section['paths']}; allowed: at least two paths")
    return SharingParams(
        enabled=section["enabled"],
        paths=tuple(section["paths"]),
        fill_fraction=section["fill_fraction"],
        repetitions=section["repetitions"],
        alpha=section["alpha"],
        min_excess_miss_fraction=section["min_excess_miss_fraction"],
    )


def run(
    backend: Backend,
    params: SharingParams,
    *,
    device: DeviceEntry,
    inputs: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Baselines and both directions of every pair of paths with a cache of their own."""
    available = backend_paths(backend)
    paths = [p for p in params.paths if available is None or p in available]
    targets, _, settings = stage1_targets((inputs or {}).get("cache_stage1"), paths)
    rec = DisturbanceRecorder(backend, settings=settings, fill_fraction=params.fill_fraction)
    pairs = list(itertools.permutations([p for p in paths if p in targets], 2))
    total = params.repetitions * (len(targets) + len(pairs))
    for _ in range(params.repetitions):
        for a in (p for p in paths if p in targets):
            rec.launch(targets[a], None)
        for a, b in pairs:
            rec.launch(targets[a], targets[b], warp_b=0)
            if progress:
                progress(len(rec.frames), total)
    return rec.data()
