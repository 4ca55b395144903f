"""The constant L1's sets and ways from the capacity of cyclic walks at every stride (the
fine-grained P-chase on the constant path, `kernels/pchase.cu` `pchase_const`).

A cyclic walk of N lines at a stride of k lines (k * `line_bytes` bytes) touches the sets its
lines map to; a set-associative cache of S sets and W ways whose set is the line number modulo
S (contiguous index bits where S is a power of two) holds such a walk while N is at most
W * S / gcd(k, S), whatever its replacement policy keeps beyond that. So the largest walk that
still hits, against k, gives S and W (`analysis.caches.constant_sets`), and a walk at a stride
of S lines or any multiple of it holds W lines. Constant memory is 64 KiB: a walk spans at most
that, so the strides go up to half of it.

In order (the trace's `kind`):
0. `calibrate`: one line read again and again (hits), and a walk over the whole 64 KiB at one
   line's stride (misses of the constant L1, unless it holds 64 KiB): the hit/miss threshold
   the sweep's stops and the analysis use (`analysis.caches.constant_sets.threshold`).
1. `stride`: per stride k (1..`max_stride_lines` lines, then every power of two up to 32 KiB),
   walks of N = 1, 2, ... lines, each launch warming the walk for `warm_passes` passes and
   timing `timed_passes` more, until `overflow_walks` walks in a row miss on most of their
   timed loads (`analysis.caches.constant_sets.walk_fits`, the sweep's one question), or the
   walk would leave constant memory, or N reaches `max_walk_lines`. Every timed load is a row.
2. `offset`: at a stride of K lines (the smallest power of two at least the stride-1 capacity,
   so a multiple of any power-of-two set count), the same walks from every start offset of
   0..K-1 lines: each offset's walk stays in one set, so its capacity is the ways of that set
   free for data. Lines the kernel keeps in the constant cache itself (its parameters and the
   driver's constants in bank 0, read by every iteration) take ways of some sets: the offsets
   show which, and the sum over the sets explains the size `cache_stage1` measures.

`line_bytes: auto` takes the constant L1's line from the `caches` result.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import pyarrow as pa

from ..config import AUTO, DeviceEntry
from ..contract.backend import Backend, ChaseWork
from ..exceptions import ConfigError
from . import empty_frame

log = logging.getLogger(__name__)

NAME = "constant_sets"
KERNELS = ("pchase",)
CONSTANT_BYTES = 65536  # constant memory a kernel can read (the chain's symbol)
CALIBRATE, STRIDE, OFFSET = 0, 1, 2  # the trace's `kind`
HIT_LOADS = 256  # timed loads of the calibration's one-line walk

SCHEMA = pa.schema(
    [
        pa.field("kind", pa.int8()),  # 0: calibration; 1: stride walk; 2: offset walk
        pa.field("detail", pa.int8()),  # calibration: 0 hits, 1 misses; walks: 0
        pa.field("offset_lines", pa.int32()),  # the walk's first line (offset walks)
        pa.field("line_bytes", pa.int32()),
        pa.field("stride_lines", pa.int32()),
        pa.field("walk_lines", pa.int32()),
        pa.field("step", pa.int32()),
        pa.field("index", pa.uint32()),
        pa.field("latency_cycles", pa.uint32()),
        pa.field("sm_clock_mhz", pa.float32()),
    ]
)


@dataclass(frozen=True)
class ConstantSetsParams:
    enabled: bool
    line_bytes: int | None  # None: `auto` (the caches result's constant L1 line)
    max_stride_lines: int
    max_walk_lines: int
    warm_passes: int
    timed_passes: int
    overflow_walks: int
    miss_share: float


def parse_params(section: dict, key: str) -> ConstantSetsParams:
    """Typed parameters with the checks the schema cannot express."""
    line = section["line_bytes"]
    p = ConstantSetsParams(
        enabled=section["enabled"],
        line_bytes=None if line == AUTO else int(line),
        max_stride_lines=section["max_stride_lines"],
        max_walk_lines=section["max_walk_lines"],
        warm_passes=section["warm_passes"],
        timed_passes=section["timed_passes"],
        overflow_walks=section["overflow_walks"],
        miss_share=section["miss_share"],
    )
    if p.line_bytes is not None and (p.line_bytes & (p.line_bytes - 1) or p.line_bytes < 4):
        raise ConfigError(
            f"{key}.line_bytes: {p.line_bytes} is not allowed; allowed: auto or a power of two "
            "of at least 4 bytes"
        )
    if p.line_bytes is not None and p.max_stride_lines * p.line_bytes * 2 > CONSTANT_BYTES:
        raise ConfigError(
            f"{key}.max_stride_lines: {p.max_stride_lines} lines of {p.line_bytes} B leave no "
            f"room for a walk of two lines in {CONSTANT_BYTES} bytes of constant memory; "
            f"allowed: at most {CONSTANT_BYTES // (2 * p.line_bytes)}"
        )
    return p


def strides(p: ConstantSetsParams, line_bytes: int) -> list[int]:
    """The strides in lines: 1..max_stride_lines, then powers of two while two lines fit."""
    limit = CONSTANT_BYTES // (2 * line_bytes)
    out = list(range(1, min(p.max_stride_lines, limit) + 1))
    k = 1
    while k <= limit:
        if k > out[-1]:
            out.append(k)
        k *= 2
    return out


def walk_work(
    *, line_bytes: int, stride_lines: int, lines: int, warm: int, timed: int, offset: int = 0
):
    """A cyclic walk of `lines` lines `stride_lines` apart from line `offset` of the chain: the
    dense chain (4-byte elements) and its ChaseWork, `warm` untimed and `timed` timed loads."""
    step = stride_lines * line_bytes // 4
    first = offset * line_bytes // 4
    positions = first + np.arange(lines, dtype=np.int64) * step
    chain = np.zeros(int(positions[-1]) + 1, dtype=np.uint32)
    chain[positions] = np.roll(positions, -1).astype(np.uint32)
    return ChaseWork(
        path="const",
        chain=chain,
        start_index=int(first),
        warmup_steps=warm,
        record_steps=timed,
        shared_buffer_bytes=8 * timed,
    )


def _line_from_caches(inputs: dict | None) -> int | None:
    source = (inputs or {}).get("caches")
    if not source:
        return None
    with open(source) as f:
        doc = json.load(f)
    value = ((doc.get("elements") or {}).get("constant_l1") or {}).get("line_bytes") or {}
    return int(value["value"]) if value.get("value") else None


class _Recorder:
    def __init__(self, backend: Backend, line_bytes: int):
        self.backend, self.line, self.frames = backend, line_bytes, []

    def walk(
        self, kind: int, detail: int, stride: int, lines: int, warm: int, timed: int, offset=0
    ):
        work = walk_work(
            line_bytes=self.line,
            stride_lines=stride,
            lines=lines,
            warm=warm,
            timed=timed,
            offset=offset,
        )
        r = self.backend.run_chase(work, carveout_pct=None, seed=len(self.frames))
        n = len(r.latency_cycles)
        self.frames.append(
            pd.DataFrame(
                {
                    "kind": np.full(n, kind, np.int8),
                    "detail": np.full(n, detail, np.int8),
                    "offset_lines": np.full(n, offset, np.int32),
                    "line_bytes": np.full(n, self.line, np.int32),
                    "stride_lines": np.full(n, stride, np.int32),
                    "walk_lines": np.full(n, lines, np.int32),
                    "step": np.arange(n, dtype=np.int32),
                    "index": r.indices,
                    "latency_cycles": r.latency_cycles,
                    "sm_clock_mhz": np.full(n, r.sm_clock_mhz, np.float32),
                }
            )
        )
        return r.latency_cycles

    def grow(self, kind: int, stride: int, offset: int, p: ConstantSetsParams, cut: float) -> int:
        """Walks of 1, 2, ... lines at `stride` from `offset` until `overflow_walks` in a row
        overflow (or constant memory or `max_walk_lines` ends them); the largest walk that
        fitted before the first overflow (the sweep's own view; the analysis decides again)."""
        from ..analysis.caches.constant_sets import walk_fits

        misses_in_row, n, largest = 0, 1, 0
        while (
            n <= p.max_walk_lines and (offset + (n - 1) * stride + 1) * self.line <= CONSTANT_BYTES
        ):
            timed = max(p.timed_passes * n, 32)
            lat = self.walk(kind, 0, stride, n, p.warm_passes * n, timed, offset)
            if walk_fits(lat, cut, p.miss_share):
                misses_in_row = 0
                largest = n if largest == n - 1 else largest
            else:
                misses_in_row += 1
                if misses_in_row >= p.overflow_walks:
                    break
            n += 1
        return largest


def run(
    backend: Backend,
    p: ConstantSetsParams,
    *,
    device: DeviceEntry | None,
    inputs: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """The calibration, then the stride walks; one row per timed load."""
    from ..analysis.caches.constant_sets import threshold

    if not p.enabled:
        return empty_frame(SCHEMA)
    line = p.line_bytes or _line_from_caches(inputs)
    if line is None:
        log.warning("constant_sets: no constant L1 line measured (caches); nothing to sweep")
        return empty_frame(SCHEMA)
    if p.line_bytes is None:
        p = replace(p, line_bytes=line)
    rec = _Recorder(backend, line)
    rec.walk(CALIBRATE, 0, 1, 1, 8, HIT_LOADS)
    everything = CONSTANT_BYTES // line
    rec.walk(CALIBRATE, 1, 1, everything, everything, everything)
    cut = threshold(pd.concat(rec.frames, ignore_index=True))
    if cut is None:
        log.warning("constant_sets: the 64 KiB walk reads as fast as one line: no miss to find")
        return pd.concat(rec.frames, ignore_index=True)
    todo = strides(p, line)
    first = None
    for i, k in enumerate(todo):
        fits = rec.grow(STRIDE, k, 0, p, cut)
        first = fits if first is None else first
        if progress:
            progress(i + 1, len(todo) + 1)
    k = 1 << max(first - 1, 0).bit_length()  # the smallest power of two >= the capacity
    for offset in range(k):
        if (offset + k) * line <= CONSTANT_BYTES:
            rec.grow(OFFSET, k, offset, p, cut)
    if progress:
        progress(len(todo) + 1, len(todo) + 1)
    return pd.concat(rec.frames, ignore_index=True)
