"""TLB reach under controlled mappings: whether a TLB entry's coverage depends on the physical
memory behind it (coalescing of contiguous pages) and how many translation levels there are.

The `tlbs` walks (Mei & Chu, TPDS Sec. 4.4) read a TLB level's reach through memory the driver
places, so they cannot tell an entry that covers a large page from one that coalesces
physically contiguous small pages. Here the experiment maps the walked range itself
(`mapped_chase`): chunks of `chunk_bytes` (the mapping granularity, 2 MiB on Hopper), either
`contiguous` (one physical allocation mapped in order) or `scattered` (one allocation per chunk,
mapped in a shuffled order: no two neighbouring chunks physically adjacent). A coalescing level
covers K chunks per entry only under the contiguous mapping, so its reach shrinks K-fold under
the scattered one; a level whose entry covers a virtual unit whatever lies behind it keeps its
reach.

Each `series` is one layout and one stride: cyclic walks of m elements, one per stride, from
m = 2 on a grid of `grid_steps_per_octave` steps per octave up to the series' array, then
rounds that split every onset bracket the walks show (the analysis's `series_brackets`) into
quarters, down to one element, so reaches come to one stride. Every walk: one untimed
traversal, then `traversals` timed ones (8-byte elements: the 64-bit chase of kernels/pchase.cu
over the range's virtual address).

The scattered layout maps only the chunks some scattered walk touches (a walk at stride s
touches one chunk per s), so a sparse walk over a range larger than the GPU's memory needs only
as many allocations as it has elements; the contiguous layout maps its whole range (the largest
contiguous series). The layouts are mapped one at a time and released at the end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ..config import DeviceEntry
from ..contract.backend import Backend
from ..contract.facts import DeviceFacts
from ..exceptions import ConfigError
from .mapped_chase import LAYOUTS, MappedChaseWork, PhysicalLayout, ReleaseMapping
from .sparse_chase import sequence_work

log = logging.getLogger(__name__)

NAME = "tlb_mappings"
KERNELS = ("pchase",)
ELEMENT_BYTES = 8
RECORD_BYTES = 8  # shared memory per timed access (latency + index)

SCHEMA = pa.schema(
    [
        pa.field("point", pa.int32()),
        pa.field("layout", pa.string()),  # contiguous | scattered
        pa.field("seed", pa.int32()),  # of the scattered order
        pa.field("chunk_bytes", pa.int64()),
        pa.field("stride_bytes", pa.int64()),
        pa.field("elements", pa.int32()),  # elements in the walk (one per stride)
        pa.field("array_bytes", pa.int64()),
        pa.field("step", pa.int32()),
        pa.field("position", pa.int64()),  # the address loaded / 4 (from the range start)
        pa.field("index", pa.uint32()),  # low 32 bits of the loaded next element's index
        pa.field("latency_cycles", pa.uint32()),
        pa.field("sm_clock_mhz", pa.float32()),
    ]
)
POSITION_BYTES = 4  # the trace's `position` unit, as in `tlbs`


@dataclass(frozen=True)
class Series:
    layout: str
    stride_bytes: int
    max_array_bytes: int
    # `max_array_bytes: {memory_share: x}`: x times the device memory, resolved at run time
    # (`resolve`) from the driver's facts; max_array_bytes is 0 until then
    memory_share: float | None = None

    def max_elements(self) -> int:
        return self.max_array_bytes // self.stride_bytes


@dataclass(frozen=True)
class MappingSweep:
    enabled: bool
    path: str
    chunk_bytes: int
    seed: int
    series: tuple[Series, ...]
    traversals: int
    grid_steps_per_octave: int
    max_record_steps: int
    max_refine_walks: int


def parse_params(section: dict, key: str) -> MappingSweep:
    chunk = section["chunk_bytes"]
    series = tuple(
        Series(s["layout"], s["stride_bytes"], s["max_array_bytes"])
        if isinstance(s["max_array_bytes"], int)
        else Series(s["layout"], s["stride_bytes"], 0, float(s["max_array_bytes"]["memory_share"]))
        for s in section["series"]
    )
    sweep = MappingSweep(
        enabled=section["enabled"],
        path=section["path"],
        chunk_bytes=chunk,
        seed=section["seed"],
        series=series,
        traversals=section["traversals"],
        grid_steps_per_octave=section["grid_steps_per_octave"],
        max_record_steps=section["max_record_steps"],
        max_refine_walks=section["max_refine_walks"],
    )
    if chunk & (chunk - 1):
        raise ConfigError(f"{key}.chunk_bytes: {chunk} is not a power of two")
    for i, s in enumerate(series):
        where = f"{key}.series[{i}]"
        if s.layout not in LAYOUTS:
            raise ConfigError(f"{where}.layout: {s.layout!r}; allowed: {list(LAYOUTS)}")
        if s.stride_bytes % chunk and chunk % s.stride_bytes:
            raise ConfigError(
                f"{where}.stride_bytes: {s.stride_bytes} is neither a multiple nor a divisor of "
                f"chunk_bytes ({chunk})"
            )
        if s.stride_bytes % ELEMENT_BYTES:
            raise ConfigError(f"{where}.stride_bytes: {s.stride_bytes} is not a multiple of 8")
        if s.memory_share is not None:
            continue  # checked when resolved (`resolve`)
        if s.max_elements() < 4:
            raise ConfigError(
                f"{where}.max_array_bytes: {s.max_array_bytes} holds fewer than 4 strides of "
                f"{s.stride_bytes}; allowed: >= {4 * s.stride_bytes}"
            )
        # a walk's records: `traversals` full traversals of its longest walk
        need = sweep.traversals * s.max_elements()
        if need > sweep.max_record_steps:
            raise ConfigError(
                f"{where}: the longest walk ({s.max_elements()} elements) needs {need} records "
                f"for {sweep.traversals} traversals, over {key}.max_record_steps "
                f"({sweep.max_record_steps}); allowed: max_array_bytes <= "
                f"{sweep.max_record_steps // sweep.traversals * s.stride_bytes}"
            )
    return sweep


def resolve(sweep: MappingSweep, facts: DeviceFacts, key: str = "tlb_mappings") -> MappingSweep:
    """Every `max_array_bytes: {memory_share: x}` as bytes: x times the memory the driver (or the
    profile) reports, a multiple of the stride, at most what the records hold (`traversals`
    traversals of the longest walk in `max_record_steps`) and at least 4 strides; and
    `max_record_steps` at most what the shared memory a block may opt into holds (a GPU with
    less than the configured records' bytes records fewer, and says so)."""
    optin = facts.shared_per_block_optin_bytes
    if optin and sweep.max_record_steps * RECORD_BYTES > optin:
        fits = optin // RECORD_BYTES // 64 * 64
        log.info(
            "%s.max_record_steps: %d records need %d B of shared memory, over the %d B a block "
            "may opt into here: %d records",
            key,
            sweep.max_record_steps,
            sweep.max_record_steps * RECORD_BYTES,
            optin,
            fits,
        )
        sweep = replace(sweep, max_record_steps=fits)
        for i, s in enumerate(sweep.series):
            need = sweep.traversals * s.max_elements()
            if s.memory_share is None and need > fits:
                raise ConfigError(
                    f"{key}.series[{i}].max_array_bytes: {s.max_array_bytes} needs {need} "
                    f"records, over the {fits} this GPU's {optin} B of opt-in shared memory "
                    f"hold; allowed: max_array_bytes <= {fits // sweep.traversals * s.stride_bytes}"
                    ", or {memory_share: x}"
                )
    if all(s.memory_share is None for s in sweep.series):
        return sweep
    if not facts.total_memory_bytes:
        raise ConfigError(
            f"{key}.series: max_array_bytes {{memory_share: ...}} needs the device memory size, "
            "which the driver (or the profile's dram.size_bytes) does not give; set "
            "max_array_bytes in bytes"
        )
    cap = sweep.max_record_steps // sweep.traversals
    series = []
    for s in sweep.series:
        if s.memory_share is not None:
            n = int(s.memory_share * facts.total_memory_bytes) // s.stride_bytes
            s = replace(s, max_array_bytes=max(4, min(n, cap)) * s.stride_bytes)
        series.append(s)
    return replace(sweep, series=tuple(series))


# --- layouts ----------------------------------------------------------------------------------
def walk_chunks(series: Series, chunk_bytes: int) -> np.ndarray:
    """The chunks every walk of `series` may touch (its longest walk holds them all)."""
    offsets = np.arange(series.max_elements(), dtype=np.int64) * series.stride_bytes
    return np.unique(offsets // chunk_bytes)


def layout_of(sweep: MappingSweep, kind: str) -> PhysicalLayout:
    """The mapping the series of layout `kind` walk: contiguous over the whole largest range;
    scattered over the chunks its walks touch."""
    mine = [s for s in sweep.series if s.layout == kind]
    span = max(s.max_elements() * s.stride_bytes for s in mine)
    chunks = -(-span // sweep.chunk_bytes)
    if kind == "contiguous":
        return PhysicalLayout(kind, chunks=chunks, chunk_bytes=sweep.chunk_bytes)
    touched = np.unique(np.concatenate([walk_chunks(s, sweep.chunk_bytes) for s in mine]))
    mapped = None if len(touched) == chunks else tuple(int(c) for c in touched)
    return PhysicalLayout(
        kind, chunks=chunks, chunk_bytes=sweep.chunk_bytes, seed=sweep.seed, mapped=mapped
    )


# --- walks ------------------------------------------------------------------------------------
def element_grid(max_elements: int, steps_per_octave: int) -> list[int]:
    """2, 3, 4, then steps of 2^(1/steps_per_octave), and the longest walk."""
    grid = [2, 3, 4]
    m = 4.0
    while True:
        m *= 2 ** (1 / steps_per_octave)
        if round(m) >= max_elements:
            break
        grid.append(round(m))
    return sorted({g for g in grid if g <= max_elements} | {max_elements})


# each refinement round walks the points that split every bracket into this many parts: the
# reading of all walks between rounds costs more than a walk, so fewer, wider rounds
SPLIT = 4


class _Walker:
    """The walks so far: each one's rows as arrays (one frame at the end), each series' walks
    as the onset readings keep them (`SeriesWalks`: each walk read once, not again every
    round), and the latency levels of all walks, read again only after new walks."""

    def __init__(self, backend: Backend, sweep: MappingSweep, progress) -> None:
        self.backend, self.sweep, self.progress = backend, sweep, progress
        self.rows: list[dict] = []  # per walk, its columns (the layout: one string)
        self.series: dict[tuple[str, int], Any] = {}  # SeriesWalks
        self._levels: tuple[int, tuple | None] = (0, None)

    def walks(self, layout: str, stride_bytes: int):
        """The walks of one layout and stride so far (`SeriesWalks`)."""
        from ..analysis.tlb.tlb_walks import SeriesWalks

        key = (layout, stride_bytes)
        if key not in self.series:
            self.series[key] = SeriesWalks(stride_bytes)
        return self.series[key]

    def levels(self) -> tuple:
        """`latency_levels` of every walk so far, in the order they were walked."""
        from ..analysis.tlb.tlb_mappings import levels_of

        if self._levels[0] != len(self.rows) or self._levels[1] is None:
            lat = [r["latency_cycles"] for r in self.rows]
            ref = [r["latency_cycles"] for r in self.rows if r["elements"] <= 3]
            self._levels = (
                len(self.rows),
                levels_of(
                    np.concatenate(lat).astype(np.float64),
                    np.concatenate(ref).astype(np.float64) if ref else np.empty(0),
                ),
            )
        return self._levels[1]

    def walk(self, series: Series, layout: PhysicalLayout, m: int) -> None:
        seq = np.arange(m, dtype=np.int64) * (series.stride_bytes // ELEMENT_BYTES)
        # the first record also times the start; a walk longer than `traversals` traversals of
        # the records (one `_reach_levels` extends) records what they hold, at least one whole
        # traversal (`extended_cap`)
        record = self.sweep.traversals * m + 1
        record = max(64, min(record, self.sweep.max_record_steps))
        chase = sequence_work(
            self.sweep.path, seq, warmup_steps=m, record_steps=record, element_bytes=ELEMENT_BYTES
        )
        point = len(self.rows)
        result = self.backend.run(MappedChaseWork(chase, layout), carveout_pct=None, seed=point)
        n = len(result.latency_cycles)
        positions = seq[(m + np.arange(n)) % m] * (ELEMENT_BYTES // POSITION_BYTES)
        self.rows.append(
            {
                "point": point,
                "layout": series.layout,
                "seed": layout.seed,
                "chunk_bytes": layout.chunk_bytes,
                "stride_bytes": series.stride_bytes,
                "elements": m,
                "array_bytes": m * series.stride_bytes,
                "n": n,
                "position": positions,
                "index": result.indices,
                "latency_cycles": result.latency_cycles,
                "sm_clock_mhz": result.sm_clock_mhz,
            }
        )
        self.walks(series.layout, series.stride_bytes).add(m, positions, result.latency_cycles)
        if self.progress:
            self.progress(len(self.rows), 0)

    def frame(self) -> pd.DataFrame:
        """Every walk's rows, in the order they were walked (SCHEMA's columns)."""
        n = np.array([r["n"] for r in self.rows], dtype=np.int64)

        def each(key: str, dtype) -> np.ndarray:
            return np.repeat(np.array([r[key] for r in self.rows], dtype=dtype), n)

        def joined(key: str) -> np.ndarray:
            return np.concatenate([np.asarray(r[key]) for r in self.rows])

        return pd.DataFrame(
            {
                "point": each("point", np.int32),
                "layout": each("layout", object),
                "seed": each("seed", np.int32),
                "chunk_bytes": each("chunk_bytes", np.int64),
                "stride_bytes": each("stride_bytes", np.int64),
                "elements": each("elements", np.int32),
                "array_bytes": each("array_bytes", np.int64),
                "step": np.concatenate([np.arange(k, dtype=np.int32) for k in n]),
                "position": joined("position"),
                "index": joined("index"),
                "latency_cycles": joined("latency_cycles"),
                "sm_clock_mhz": each("sm_clock_mhz", np.float32),
            }
        )


def _series_walks(walker: _Walker, series: Series, layout: PhysicalLayout) -> None:
    """The grid, then bisections of the onsets the walks show (`series_brackets`, with the
    latency levels of every walk up to the end of this series' grid: read once, as each round's
    reading of the series' own walks costs less than reading the levels of all again). Walks
    of this layout and stride made before (a series extended by `_reach_levels`) are kept."""
    from ..analysis.tlb.tlb_mappings import series_brackets

    done = walker.walks(series.layout, series.stride_bytes)
    for m in element_grid(series.max_elements(), walker.sweep.grid_steps_per_octave):
        if m not in done:
            walker.walk(series, layout, m)
    levels = walker.levels()
    budget = walker.sweep.max_refine_walks
    while budget > 0:  # one round quarters every bracket (one reading of the walks per round)
        brackets = series_brackets(done, levels)
        middles = sorted(
            {a + (b - a) * i // SPLIT for a, b in brackets for i in range(1, SPLIT)}
            - {a for a, _ in brackets}
            - set(done.lengths())
        )
        if not middles:
            return
        for m in middles[:budget]:
            walker.walk(series, layout, m)
        budget -= len(middles)
    log.info("tlb_mappings: %s stride %d: refinement stopped", layout.kind, series.stride_bytes)


def _onsets(walker: _Walker, layout: str, stride_bytes: int) -> int:
    from ..analysis.tlb.tlb_mappings import series_brackets

    return len(series_brackets(walker.walks(layout, stride_bytes), walker.levels()))


def extended_cap(sweep: MappingSweep) -> int:
    """The longest walk `_reach_levels` extends a contiguous series to by the records: one
    recorded traversal after the record that times the start."""
    return sweep.max_record_steps - 1


def _reach_levels(walker: _Walker, sweep: MappingSweep, layout: PhysicalLayout) -> None:
    """Contiguous series that show fewer onsets than the scattered series at their stride (a
    coalescing level whose contiguous reach lies past the series' end): doubled until they show
    as many, or until the longest walk the records hold or the mapped contiguous range ends
    them. What they measured decides; the memory bounds. An extended walk records `traversals`
    traversals where they fit, else what `max_record_steps` holds, at least one whole traversal
    (`_Walker.walk`): a coalescing level's contiguous reach is its scattered reach times
    the factor, past what three traversals of the records hold (an A100-like L2 TLB: 4096
    entries x 4 chunks of 2 MiB, 16384 elements at one chunk's stride)."""
    cap = extended_cap(sweep)
    strides = {s.stride_bytes for s in sweep.series if s.layout == "scattered"}
    for series in [s for s in sweep.series if s.layout == "contiguous"]:
        stride = series.stride_bytes
        if stride not in strides:
            continue
        limit = min(cap, layout.chunks * layout.chunk_bytes // stride)
        want = _onsets(walker, "scattered", stride)
        while series.max_elements() < limit and _onsets(walker, "contiguous", stride) < want:
            m = min(limit, 2 * series.max_elements())
            series = replace(series, max_array_bytes=m * stride)
            log.info("tlb_mappings: contiguous stride %d extended to %d elements", stride, m)
            _series_walks(walker, series, layout)


def run(
    backend: Backend,
    sweep: MappingSweep,
    *,
    device: DeviceEntry,
    inputs: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Every series, layout by layout (each mapped once, released at the end)."""
    sweep = resolve(sweep, backend.facts())
    walker = _Walker(backend, sweep, progress)
    try:
        for kind in LAYOUTS:
            mine = [s for s in sweep.series if s.layout == kind]
            if not mine:
                continue
            layout = layout_of(sweep, kind)
            log.info("tlb_mappings: %s", layout.describe())
            for series in mine:
                _series_walks(walker, series, layout)
        if any(s.layout == "contiguous" for s in sweep.series):
            _reach_levels(walker, sweep, layout_of(sweep, "contiguous"))
    finally:
        backend.run(ReleaseMapping())
    if not walker.rows:
        return pd.DataFrame({f.name: pd.Series(dtype=object) for f in SCHEMA})
    return walker.frame()
