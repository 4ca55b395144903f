"""The fill / disturb / re-walk test of Größler's thesis (Sec. 4.5 and 4.6), shared by the
`cache_sharing` and `cache_instances` families.

Thread A (thread 0, warp 0) walks one pass over an array of `fill_fraction` of its cache's
size at the cache's line (untimed: it fills its cache); thread B walks one pass over its own
array of `fill_fraction` of its cache's size, on its path (untimed); thread A walks its array
again, timed. A baseline launch leaves B out. When A and B reach one physical cache (copy),
B's lines evict A's and A's timed walk misses beyond the baseline; when they do not, it does
not. The sizes and lines come from the device's `cache_stage1` result (a sweep input); every
launch is in the trace with its arrays, so the analysis reads only the trace.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from ..contract.backend import Backend
from ..exceptions import TraceError
from .multichase import (
    CONST_ELEMENTS,
    CONST_PATH,
    WARP_THREADS,
    MultiChaseWork,
    Step,
    Walker,
    place_chain,
)

KERNELS = ("multichase",)
NO_CARVEOUT = -1
ELEMENT_BYTES = 4
REGION_ALIGN_BYTES = 4096
OVERHEAD_BYTES = 256  # room for the script and walkers in the shared buffer

SCHEMA = pa.schema(
    [
        pa.field("point", pa.int32()),
        pa.field("test", pa.string()),  # baseline | disturbed
        pa.field("path_a", pa.string()),
        pa.field("path_b", pa.string()),  # "" in a baseline
        pa.field("warp_b", pa.int16()),  # B's warp (-1 in a baseline)
        pa.field("array_a_bytes", pa.int64()),
        pa.field("stride_a_bytes", pa.int32()),
        pa.field("array_b_bytes", pa.int64()),  # 0 in a baseline
        pa.field("stride_b_bytes", pa.int32()),
        pa.field("carveout_pct", pa.int16()),  # -1: the backend has no carveout
        pa.field("step", pa.int32()),  # position in A's timed walk
        pa.field("address_bytes", pa.int64()),  # byte offset in A's array space
        pa.field("index", pa.uint32()),
        pa.field("latency_cycles", pa.uint32()),
        pa.field("sm_clock_mhz", pa.float32()),
    ]
)


@dataclass(frozen=True)
class CacheTarget:
    path: str
    size_bytes: int
    stride_bytes: int  # the cache's line (its sector, or stage 1's search stride, if none)


def stage1_targets(source: str | None, paths: Iterable[str]) -> tuple[dict, dict, dict]:
    """(targets by path, reasons by path for the paths left out, stage-1 launch settings)
    from the device's `cache_stage1` result."""
    if not source:
        raise TraceError("this family needs the device's cache_stage1.json (input cache_stage1)")
    with open(source) as f:
        stage1 = json.load(f)
    targets, reasons = {}, {}
    for path in paths:
        entry = stage1.get("paths", {}).get(path, {})
        levels = entry.get("levels") or []
        if not levels:
            reasons[path] = entry.get("reason", "stage 1 did not measure this path")
            continue
        lv = levels[0]
        size = (lv.get("size_bytes") or {}).get("value")
        stride = next(
            (
                (lv.get(k) or {}).get("value")
                for k in ("line_bytes", "fetch_granularity_bytes")
                if (lv.get(k) or {}).get("value")
            ),
            lv.get("size_search_stride_bytes"),
        )
        if lv.get("served_by"):
            reasons[path] = f"stage 1: the {path} path is served by the {lv['served_by']}"
        elif size is None or not stride:
            reasons[path] = "stage 1 found no size (or no line) for the first cache of this path"
        else:
            targets[path] = CacheTarget(path, int(size), int(stride))
    carve = stage1.get("carveout_pct") or [NO_CARVEOUT]
    settings = {
        "shared_buffer_bytes": int(stage1.get("shared_buffer_bytes") or 16384),
        "carveout_pct": int(carve[0]),
    }
    return targets, reasons, settings


def _elements(target: CacheTarget, fill_fraction: float) -> int:
    return max(1, int(fill_fraction * target.size_bytes) // target.stride_bytes)


def build_work(
    a: CacheTarget,
    b: CacheTarget | None,
    *,
    warp_b: int,
    fill_fraction: float,
    shared_buffer_bytes: int,
) -> MultiChaseWork:
    """A fills, B (if any) walks, A re-walks timed (at most as many loads as the buffer holds).
    Each walker's chain has its own region of its address space (global or constant)."""
    records = min(_elements(a, fill_fraction), (shared_buffer_bytes - OVERHEAD_BYTES) // 8)
    if records < 1:
        raise TraceError(f"shared_buffer_bytes {shared_buffer_bytes} holds no timed load")
    walkers = [(0, a)] + ([(_thread_b(warp_b), b)] if b is not None else [])
    regions, free = [], {"global": 0, CONST_PATH: 0}  # next free byte of each space
    for _, t in walkers:
        space = CONST_PATH if t.path == CONST_PATH else "global"
        regions.append((space, free[space]))
        end = free[space] + _elements(t, fill_fraction) * t.stride_bytes
        free[space] = -(-end // REGION_ALIGN_BYTES) * REGION_ALIGN_BYTES
    if free[CONST_PATH] > CONST_ELEMENTS * ELEMENT_BYTES:
        raise TraceError(
            f"the const arrays need {free[CONST_PATH]} bytes; constant memory has 65536"
        )
    arrays = {
        "global": np.zeros(max(free["global"], ELEMENT_BYTES) // ELEMENT_BYTES, dtype=np.uint32),
        CONST_PATH: np.zeros(free[CONST_PATH] // ELEMENT_BYTES, dtype=np.uint32),
    }
    out = []
    for (thread, t), (space, first) in zip(walkers, regions, strict=True):
        start = place_chain(
            arrays[space],
            first_element=first // ELEMENT_BYTES,
            elements=_elements(t, fill_fraction),
            stride_elements=t.stride_bytes // ELEMENT_BYTES,
        )
        out.append(Walker(thread=thread, path=t.path, start_index=start))
    script = [Step(0, _elements(a, fill_fraction), False)]
    if b is not None:
        script.append(Step(1, _elements(b, fill_fraction), False))
    script.append(Step(0, records, True))
    return MultiChaseWork(
        array=arrays["global"],
        const_array=arrays[CONST_PATH] if free[CONST_PATH] else None,
        walkers=tuple(out),
        script=tuple(script),
        block_threads=WARP_THREADS * (max(warp_b, 0) + 1),
        shared_buffer_bytes=shared_buffer_bytes,
    )


def _thread_b(warp_b: int) -> int:
    """B's thread: lane 1 of warp 0 (the thesis's thread 1), else lane 0 of its warp."""
    return 1 if warp_b <= 0 else WARP_THREADS * warp_b


class DisturbanceRecorder:
    """Runs the launches, numbers them, keeps one DataFrame per launch (A's timed walk)."""

    def __init__(self, backend: Backend, *, settings: dict, fill_fraction: float):
        self.backend = backend
        self.carveout = settings["carveout_pct"] if backend.supports_carveout else NO_CARVEOUT
        self.buffer = settings["shared_buffer_bytes"]
        self.fill_fraction = fill_fraction
        self.frames: list[pd.DataFrame] = []

    def launch(self, a: CacheTarget, b: CacheTarget | None, *, warp_b: int = 0) -> None:
        work = build_work(
            a, b, warp_b=warp_b, fill_fraction=self.fill_fraction, shared_buffer_bytes=self.buffer
        )
        point = len(self.frames)
        result = self.backend.run(
            work, carveout_pct=None if self.carveout < 0 else self.carveout, seed=point
        )
        n = len(result.latency_cycles)
        space = work.space(work.walkers[0])
        start = work.walkers[0].start_index
        elements = np.concatenate([[start], result.indices[:-1].astype(np.int64)])
        if not np.array_equal(space[elements], result.indices):
            raise TraceError("thread A's timed loads did not follow its chain")
        na = _elements(a, self.fill_fraction)
        self.frames.append(
            pd.DataFrame(
                {
                    "point": np.full(n, point, np.int32),
                    "test": "baseline" if b is None else "disturbed",
                    "path_a": a.path,
                    "path_b": "" if b is None else b.path,
                    "warp_b": np.full(n, -1 if b is None else warp_b, np.int16),
                    "array_a_bytes": np.full(n, na * a.stride_bytes, np.int64),
                    "stride_a_bytes": np.full(n, a.stride_bytes, np.int32),
                    "array_b_bytes": np.full(
                        n,
                        0 if b is None else _elements(b, self.fill_fraction) * b.stride_bytes,
                        np.int64,
                    ),  # fmt: skip
                    "stride_b_bytes": np.full(n, 0 if b is None else b.stride_bytes, np.int32),
                    "carveout_pct": np.full(n, self.carveout, np.int16),
                    "step": np.arange(n, dtype=np.int32),
                    "address_bytes": elements * ELEMENT_BYTES,
                    "index": result.indices,
                    "latency_cycles": result.latency_cycles,
                    "sm_clock_mhz": np.full(n, result.sm_clock_mhz, np.float32),
                }
            )
        )

    def data(self) -> pd.DataFrame:
        if not self.frames:
            return pd.DataFrame({f.name: pd.Series(dtype=f.type.to_pandas_dtype()) for f in SCHEMA})
        return pd.concat(self.frames, ignore_index=True)
