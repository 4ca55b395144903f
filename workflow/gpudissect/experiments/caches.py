"""Stage 2 of the two-stage fine-grained P-chase (Mei & Chu, TPDS Sec. 4.2 steps 3-4, Fig. 6):
sets, ways per set, set-index bits and replacement policy of every cache stage 1 sized. The
sweep is parameterised by that device's `cache_stage1.json` (its size C and line b per cache);
every number still comes from this trace by the rules of `analysis.caches.cache_structure` and
`analysis.caches.replacement`.

Per cache (path and level), in order:

1. `reference`: the array of C bytes at stride b (every access hits).
2. `sets`: arrays of C + k b bytes at stride b, k = 1, 2, ... (TPDS step 3), each walked after
   `warmup_passes` passes for `set_passes` recorded passes (several launches where one cannot
   hold them; a k whose first launch shows every line missing on every pass or on none is
   deterministic and needs no more). The sweep stops two k after every line missed, or at
   `max_extra_lines`.
3. `policy_a`: the ways + 1 lines of the first set found, walked cyclically from a cold start
   (TPDS step 4: N = C + b, s = b restricted to the set that overflows), `policy_launches`
   times: periodic misses mean a deterministic policy, aperiodic ones are reconstructed way by
   way (TPDS Fig. 11).
4. `policy_b`: the same lines in a fixed pseudo-random order (several elements of each), so
   that LRU, FIFO and tree-PLRU predict different misses.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from ..analysis.caches import cache_structure as cs
from ..config import DeviceEntry
from ..contract.backend import Backend
from ..exceptions import TraceError
from ..patterns import stride_chain
from .cache_stage1 import PATHS
from .chase_recorder import ChaseRecorder, RecordedLaunch, backend_paths

log = logging.getLogger(__name__)

NAME = "caches"
KERNELS = ("pchase",)

SCHEMA = pa.schema(
    [
        pa.field("point", pa.int32()),
        pa.field("path", pa.string()),
        pa.field("level", pa.int8()),
        pa.field("element", pa.string()),
        pa.field("phase", pa.string()),  # reference | sets | policy_a | policy_b
        pa.field("extra_lines", pa.int32()),  # k of the sets phase (0: reference; -1: policy)
        pa.field("carveout_pct", pa.int16()),
        pa.field("shared_buffer_bytes", pa.int32()),
        pa.field("array_bytes", pa.int64()),
        pa.field("stride_bytes", pa.int32()),
        pa.field("step", pa.int32()),
        pa.field("address_bytes", pa.int64()),
        pa.field("index", pa.uint32()),
        pa.field("latency_cycles", pa.uint32()),
        pa.field("sm_clock_mhz", pa.float32()),
    ]
)


@dataclass(frozen=True)
class PathStage2:
    path: str
    enabled: bool
    max_extra_lines: int


@dataclass(frozen=True)
class CachesParams:
    enabled: bool
    warmup_passes: int
    set_passes: int
    max_launches_per_k: int
    policy_launches: int
    policy_b_cycles: int
    paths: tuple[PathStage2, ...]


def parse_params(section: dict, key: str) -> CachesParams:
    return CachesParams(
        enabled=section["enabled"],
        warmup_passes=section["warmup_passes"],
        set_passes=section["set_passes"],
        max_launches_per_k=section["max_launches_per_k"],
        policy_launches=section["policy_launches"],
        policy_b_cycles=section["policy_b_cycles"],
        paths=tuple(
            PathStage2(p, section["paths"][p]["enabled"], section["paths"][p]["max_extra_lines"])
            for p in PATHS
        ),
    )


def stage1_path(device: DeviceEntry) -> dict[str, str]:
    return {"cache_stage1": f"results/analysis/{device.name}/cache_stage1.json"}


@dataclass(frozen=True)
class Target:
    path: str
    level: int
    element: str
    size_bytes: int
    line_bytes: int
    fetch_granularity_bytes: int  # what one miss fills: the line where stage 1 found none


def targets(stage1: dict) -> list[Target]:
    """The caches stage 1 sized, with a line size (served-by-L2 paths excluded)."""
    out = []
    for path, entry in stage1.get("paths", {}).items():
        for lv in entry.get("levels", []):
            c, b = lv["size_bytes"].get("value"), lv["line_bytes"].get("value")
            g = (lv.get("fetch_granularity_bytes") or {}).get("value")
            if lv.get("served_by") or c is None or b is None:
                continue
            out.append(Target(path, int(lv["level"]), lv["element"], int(c), int(b), int(g or b)))
    return out


def cycle_chain(elements: list[int], *, array_elements: int) -> np.ndarray:
    """A chain that walks `elements` cyclically; every other element loops on itself."""
    chain = np.arange(array_elements, dtype=np.uint32)
    nxt = elements[1:] + elements[:1]
    chain[np.asarray(elements)] = np.asarray(nxt, dtype=np.uint32)
    return chain


def pattern_a(lines: list[int], line_bytes: int) -> list[int]:
    """Elements of the cyclic walk over one set's ways + 1 lines (first element of each)."""
    return [line * line_bytes // 4 for line in lines]


def pattern_b(lines: list[int], line_bytes: int, fetch_granularity_bytes: int) -> list[int]:
    """Elements of a walk over the same lines in a fixed pseudo-random order: up to 8 elements
    of each line, spread over the part of it that its first miss fills (a sectored line must
    not miss on another sector), shuffled with a fixed seed. Reuse distances vary, so LRU, FIFO
    and tree-PLRU predict different misses, and a random policy matches none."""
    per_line = max(1, min(8, fetch_granularity_bytes // 4))
    gap = fetch_granularity_bytes // per_line // 4
    elements = [line * line_bytes // 4 + e * gap for line in lines for e in range(per_line)]
    order = np.random.default_rng(20170101).permutation(len(elements))
    return [elements[i] for i in order]


def run(
    backend: Backend,
    params: CachesParams,
    *,
    device: DeviceEntry,
    inputs: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Stage 2 on every cache of stage 1 on an enabled path; one row per timed access."""
    source = (inputs or {}).get("cache_stage1")
    if not source:
        raise TraceError("caches needs the device's cache_stage1.json (input cache_stage1)")
    with open(source) as f:
        stage1 = json.load(f)
    buffer = int(stage1.get("shared_buffer_bytes") or 32768)
    carve = stage1.get("carveout_pct") or [0]
    rec = ChaseRecorder(backend, carveout_pct=int(carve[0]), shared_buffer_bytes=buffer)
    enabled = {p.path: p for p in params.paths if p.enabled}
    available = backend_paths(backend)
    todo = [
        t
        for t in targets(stage1)
        if t.path in enabled and (available is None or t.path in available)
    ]
    for i, t in enumerate(todo):
        _dissect(rec, params, t, enabled[t.path].max_extra_lines, buffer // 8)
        if progress:
            progress(i + 1, len(todo))
    if not rec.launches:
        return pd.DataFrame({f.name: pd.Series(dtype=f.type.to_pandas_dtype()) for f in SCHEMA})
    return rec.table()


def _line_misses(launches: list[RecordedLaunch], classifier, line_bytes: int) -> pd.DataFrame:
    """`cache_structure.line_miss_table` of the launches' rows, pooled in launch order (the
    table reads three columns: only those are put together)."""
    return cs.line_miss_counts(
        *(np.concatenate([x[c] for x in launches]) for c in cs.LINE_MISS_COLUMNS),
        classifier,
        line_bytes,
    )


def _columns(t: Target, phase: str, k: int, array_bytes: int, stride: int) -> dict:
    return {
        "path": t.path,
        "level": np.int8(t.level),
        "element": t.element,
        "phase": phase,
        "extra_lines": np.int32(k),
        "array_bytes": np.int64(array_bytes),
        "stride_bytes": np.int32(stride),
    }


def _dissect(rec: ChaseRecorder, params: CachesParams, t: Target, max_k: int, max_records: int):
    b = t.line_bytes

    def walk(k: int, phase: str, passes: int, *, launches: int = 1) -> list[RecordedLaunch]:
        n = t.size_bytes + k * b
        lines = n // b
        chain = stride_chain(array_bytes=n, stride_bytes=b)
        recorded = []
        for _ in range(launches):
            recorded.append(
                rec.chase(
                    path=t.path,
                    chain=chain,
                    warmup_steps=params.warmup_passes * lines,
                    record_steps=min(max_records, passes * lines),
                    columns=_columns(t, phase, k, n, b),
                )
            )
        return recorded

    reference = walk(0, "reference", 2)[0]
    classifier = cs.reference_classifier(reference["latency_cycles"])
    tables, streak = [], 0
    for k in range(1, max_k + 1):
        lines = t.size_bytes // b + k
        recorded = walk(k, "sets", params.set_passes)
        first = _line_misses(recorded[:1], classifier, b)
        if min(max_records // lines, params.set_passes) < 2 or not cs.deterministic(first):
            more = min(-(-params.set_passes * lines // max_records), params.max_launches_per_k) - 1
            if more > 0:
                recorded += walk(k, "sets", params.set_passes, launches=more)
        table = first if len(recorded) == 1 else _line_misses(recorded, classifier, b)
        tables.append(table)
        streak = streak + 1 if np.mean(table["missing"]) >= cs.COMPLETE else 0
        if streak >= 2:
            break
    structure = cs.find_sets(pd.concat(tables), base_lines=t.size_bytes // b)
    groups = [lines for _, lines in structure.bursts if len(lines) >= 3]
    if not groups:
        log.info("%s level %d: no set of two or more ways found; no policy test", t.path, t.level)
        return
    lines = list(groups[0])
    span = (max(lines) + 1) * b // 4
    a = pattern_a(lines, b)
    chain = cycle_chain(a, array_elements=span)
    for _ in range(params.policy_launches):
        rec.chase(
            path=t.path,
            chain=chain,
            warmup_steps=0,
            record_steps=max_records,
            columns=_columns(t, "policy_a", -1, span * 4, b),
            start_index=a[0],
        )
    pb = pattern_b(lines, b, t.fetch_granularity_bytes)
    rec.chase(
        path=t.path,
        chain=cycle_chain(pb, array_elements=span),
        warmup_steps=0,
        record_steps=min(max_records, params.policy_b_cycles * len(pb)),
        columns=_columns(t, "policy_b", -1, span * 4, b),
        start_index=pb[0],
    )
