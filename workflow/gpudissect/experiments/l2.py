"""L2 footprint sweep (TPDS Sec. 4.6; Hopper's partitioned L2): one thread walks arrays of
growing footprint on the L2-only path (`ld.global.cg`), every access timed. Shows the footprints
where latency steps up (L2 capacity, partition or TLB effects) and, in the per-access latencies
of footprints that fit, whether lines sit at different distances (near and far L2 partitions).

Where the L2 hashes physical addresses onto its sets and slices, which footprints fit depends on
the physical pages behind the walk: on an H100, walks over memory from the driver's allocator
read the L2 size anywhere from 46 to 50 MiB from run to run, while walks over one physically
contiguous allocation step up between 50.0 and 50.5 MiB in every run
(`results/reference/FINDINGS.md`, `h100/l2_placement`). `placement: contiguous` therefore walks
one range mapped from a single physical allocation (`experiments.mapped_chase`, the CUDA
virtual-memory API; the simulator's identity page map), as a sparse chase of 8-byte elements;
`allocator` walks the backend's chase buffer as before. A backend without the virtual-memory
API falls back to `allocator`, and the trace's `placement` column says which ran.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from ..config import AUTO, DeviceEntry
from ..contract.backend import Backend, ChaseWork
from ..exceptions import ConfigError, DeviceUnavailable
from ..patterns import chain_pass_steps, stride_chain
from ..sizesearch import refine_steps
from . import empty_frame
from .auto_ranges import l2_grid
from .mapped_chase import MappedChaseWork, PhysicalLayout, ReleaseMapping
from .sparse_chase import sequence_work

log = logging.getLogger(__name__)

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
        pa.field("placement", pa.string()),
    ]
)
PLACEMENTS = ("contiguous", "allocator")
# a whole number of the mapping granularity of every NVIDIA GPU with the virtual-memory API
MAPPING_ALIGN_BYTES = 2 << 20


@dataclass(frozen=True)
class L2Params:
    enabled: bool
    path: str
    stride_bytes: int
    array_bytes: tuple[int, ...] | None  # None: `auto` (`auto_ranges.l2_grid`, then refined)
    record_steps: int
    placement: str = "contiguous"


def parse_params(section: dict, key: str) -> L2Params:
    if section["placement"] == "contiguous" and section["stride_bytes"] % 8:
        raise ConfigError(
            f"{key}.stride_bytes: {section['stride_bytes']} with placement contiguous (a chase "
            "of 8-byte elements); allowed: a multiple of 8, or placement allocator"
        )
    if section["array_bytes"] == AUTO:
        return L2Params(
            enabled=section["enabled"],
            path=section["path"],
            stride_bytes=section["stride_bytes"],
            array_bytes=None,
            record_steps=section["record_steps"],
            placement=section["placement"],
        )
    sizes = tuple(sorted(section["array_bytes"]))
    p = L2Params(
        enabled=section["enabled"],
        path=section["path"],
        stride_bytes=section["stride_bytes"],
        array_bytes=sizes,
        record_steps=section["record_steps"],
        placement=section["placement"],
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
    if p.array_bytes is not None:
        grid, resolution = list(p.array_bytes), None
    else:
        grid, resolution = l2_grid(backend.facts(), stride_bytes=p.stride_bytes)
    chunks = -(-max(grid) // MAPPING_ALIGN_BYTES)
    layout = PhysicalLayout("contiguous", chunks=chunks, chunk_bytes=MAPPING_ALIGN_BYTES)
    placement = [p.placement]

    def chase(n: int, seed: int):
        steps = chain_pass_steps(array_bytes=n, stride_bytes=p.stride_bytes)
        if placement[0] == "contiguous":
            seq = np.arange(steps, dtype=np.int64) * (p.stride_bytes // 8)
            work = sequence_work(p.path, seq, warmup_steps=steps, record_steps=p.record_steps,
                                 element_bytes=8)  # fmt: skip
            try:
                return backend.run(MappedChaseWork(work, layout), carveout_pct=carveout, seed=seed)
            except DeviceUnavailable as exc:
                log.warning("l2: %s; walking the allocator's memory instead", exc)
                placement[0] = "allocator"
        work = ChaseWork(
            path=p.path,
            chain=stride_chain(array_bytes=n, stride_bytes=p.stride_bytes),
            start_index=0,
            warmup_steps=steps,
            record_steps=p.record_steps,
            shared_buffer_bytes=8 * p.record_steps,
        )
        return backend.run_chase(work, carveout_pct=carveout, seed=seed)

    def measure(n: int) -> np.ndarray:
        i = len(frames)
        r = chase(n, i)
        k = len(r.latency_cycles)
        frames.append(
            pd.DataFrame(
                {
                    "point": np.full(k, i, np.int32),
                    "path": p.path,
                    "array_bytes": np.full(k, n, np.int64),
                    "stride_bytes": np.full(k, p.stride_bytes, np.int64),
                    "step": np.arange(k, dtype=np.int32),
                    "index": np.asarray(r.indices, np.uint32),
                    "latency_cycles": r.latency_cycles,
                    "placement": placement[0],
                }
            )
        )
        if progress:
            progress(i + 1, len(p.array_bytes or ()) or i + 1)
        return r.latency_cycles

    try:
        if p.array_bytes is not None:
            for n in p.array_bytes:
                measure(n)
        else:
            # the step rule needs scipy.stats: imported only where the sweep refines
            from ..analysis.l2.l2 import step_brackets

            refine_steps(measure, step_brackets, grid_bytes=grid, resolution_bytes=resolution,
                         align_bytes=p.stride_bytes)  # fmt: skip
    finally:
        if placement[0] == "contiguous":
            backend.run(ReleaseMapping())
    return pd.concat(frames, ignore_index=True)
