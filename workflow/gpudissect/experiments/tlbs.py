"""TLB sweep (Mei & Chu, TPDS Sec. 4.4, Fig. 10, Table V; NPC Sec. 4.2, Table 4): fine-grained
P-chases over sparse arrays of tens of MB to GB, on the `cg` path by default (L2 only: after the
warm-up pass every element is an L2 hit, so latency steps are translation effects; on Fermi the
`ca` path would lose L1 hits on L1-TLB misses, on Maxwell L1 hits skip translation).

Three stages, each one launch per point, every access recorded with its address:

1. `reach`: at each stride of `strides_bytes`, cyclic walks of m = 2, 3, ... elements
   (one warm-up pass, then timed passes). Gives the page size and the L1-TLB reach. With
   `strides_bytes: auto` the strides are searched from the 2 MiB allocation granule, a factor
   of 4 at a time, until the page shows and one stride is at or above it (`_reach_search`);
   the other `auto` values come from the driver's facts and the page found (`resolve`,
   `auto_ranges`).
2. `pages`: at stride = the page found in stage 1 (the analysis code reads stage 1's rows),
   walks of m pages: a few short ones (the base level), m around the L1-TLB entries, a coarse
   geometric grid up to `max_array_bytes` to find where the L2 TLB overflows, then one page at a
   time from there until every set has overflowed (TPDS Fig. 10).
3. `window`: `window_repetitions` cold walks (no warm-up, every access a page's first touch)
   over `window_probe_bytes`, one element every `window_stride_bytes` (or page), for the
   page-table window of TPDS Sec. 5.2(1).

The sweep is adaptive (stage 2 depends on stage 1), but the analysis needs only the trace: it
recomputes everything from the recorded latencies and addresses.

On a GPU, a cold walk needs cold TLBs and caches: `ColdChaseWork` puts the sparse array in
freshly allocated memory, writes its values from the host (through the copy engine, so no SM
translates its pages) and then flushes the L2 with a memset over `flush_bytes`. The simulator
starts every launch cold.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import pyarrow as pa

from ..config import AUTO, DeviceEntry
from ..contract.backend import Backend
from ..contract.facts import DeviceFacts
from ..exceptions import ConfigError
from . import auto_ranges
from .auto_ranges import walk_memory_bytes
from .sparse_chase import ColdChaseWork, sequence_work

log = logging.getLogger(__name__)

NAME = "tlbs"
KERNELS = ("pchase",)
POSITION_BYTES = 4  # the trace's `position` is the byte address / 4, whatever the element size

SCHEMA = pa.schema(
    [
        pa.field("point", pa.int32()),
        pa.field("stage", pa.string()),  # reach | pages | window
        pa.field("stride_bytes", pa.int64()),
        pa.field("elements", pa.int32()),  # elements in the walk (one per stride)
        pa.field("array_bytes", pa.int64()),
        pa.field("repetition", pa.int16()),
        pa.field("step", pa.int32()),
        pa.field("position", pa.int64()),  # the address loaded / 4 (from the array start)
        pa.field("element_bytes", pa.int8()),  # size of the chase's elements (4 or 8)
        # value the load returned: the next element's index in element_bytes units (its low
        # 32 bits)
        pa.field("index", pa.uint32()),
        pa.field("latency_cycles", pa.uint32()),
        pa.field("sm_clock_mhz", pa.float32()),
    ]
)


@dataclass(frozen=True)
class TlbSweep:
    enabled: bool
    path: str
    element_bytes: int | None
    strides_bytes: tuple[int, ...] | None  # None (here and below): `auto` (module docstring)
    dense_elements: int
    max_elements: int | None
    max_array_bytes: int | None  # `auto_ranges.walk_memory_bytes`
    record_steps: int
    max_record_steps: int | None
    max_dense_pages: int | None
    pages_traversals: int
    window_probe_bytes: int | None
    window_stride_bytes: int | None
    window_repetitions: int
    flush_bytes: int


def _given(value):
    return None if value == AUTO else value


def parse_params(section: dict, key: str) -> TlbSweep:
    strides = _given(section["strides_bytes"])
    sweep = TlbSweep(
        enabled=section["enabled"],
        path=section["path"],
        element_bytes=_given(section["element_bytes"]),
        strides_bytes=None if strides is None else tuple(sorted(strides)),
        dense_elements=section["dense_elements"],
        max_elements=_given(section["max_elements"]),
        max_array_bytes=_given(section["max_array_bytes"]),
        record_steps=section["record_steps"],
        max_record_steps=_given(section["max_record_steps"]),
        max_dense_pages=_given(section["max_dense_pages"]),
        pages_traversals=section["pages_traversals"],
        window_probe_bytes=_given(section["window_probe_bytes"]),
        window_stride_bytes=_given(section["window_stride_bytes"]),
        window_repetitions=section["window_repetitions"],
        flush_bytes=section["flush_bytes"],
    )
    check_sweep(sweep, key)
    return sweep


def check_sweep(sweep: TlbSweep, key: str) -> None:
    """Checks the schema cannot express (again once `auto` is resolved)."""
    if sweep.max_record_steps is not None and sweep.max_record_steps < sweep.record_steps:
        raise ConfigError(
            f"{key}.max_record_steps: {sweep.max_record_steps} is below {key}.record_steps "
            f"({sweep.record_steps}); allowed: >= record_steps"
        )
    largest = max(sweep.max_array_bytes or 0, sweep.window_probe_bytes or 0)
    if sweep.element_bytes == 4 and largest // 4 >= 2**32:
        raise ConfigError(
            f"{key}.max_array_bytes / window_probe_bytes: {largest} bytes need more than 2^32 "
            f"elements of 4 bytes (32-bit indices); allowed: below {2**34} bytes (set "
            f"{key}.element_bytes: 8 for 64-bit indices)"
        )
    element = sweep.element_bytes or 8  # `auto` may become 8
    strides = (*(sweep.strides_bytes or ()), sweep.window_stride_bytes or element)
    if min(strides) % element:
        raise ConfigError(
            f"{key}: stride {min(strides)} is not a multiple of element_bytes ({element})"
        )


def resolve(sweep: TlbSweep, facts: DeviceFacts, key: str = "tlbs") -> TlbSweep:
    """The sweep with every `auto` but the strides (chosen as the reach stage runs) and the
    page-dependent ones (window stride, dense pages) resolved from the driver's facts."""
    if sweep.max_array_bytes is None:
        align = max(sweep.strides_bytes or (auto_ranges.ALLOCATION_GRANULE_BYTES,))
        n = walk_memory_bytes(facts, align_bytes=align, key=f"{key}.max_array_bytes")
        sweep = replace(sweep, max_array_bytes=n)
    if sweep.max_record_steps is None:
        steps = max(auto_ranges.tlb_record_steps(facts), sweep.record_steps)
        sweep = replace(sweep, max_record_steps=steps)
    if sweep.max_elements is None:
        sweep = replace(sweep, max_elements=auto_ranges.tlb_max_elements(sweep.max_record_steps))
    if sweep.window_probe_bytes is None:  # every window up to a third of the walks' span shows
        sweep = replace(sweep, window_probe_bytes=sweep.max_array_bytes)
    if sweep.element_bytes is None:
        largest = max(sweep.max_array_bytes, sweep.window_probe_bytes)
        sweep = replace(sweep, element_bytes=auto_ranges.index_bytes(largest))
    check_sweep(sweep, key)
    return sweep


# --- work ------------------------------------------------------------------------------------
def element_grid(sweep: TlbSweep, stride_bytes: int) -> list[int]:
    """Walk lengths of the reach stage: every m up to `dense_elements`, then steps of 2^(1/4)."""
    cap = min(sweep.max_elements, sweep.max_array_bytes // stride_bytes)
    grid = list(range(2, min(sweep.dense_elements, cap) + 1))
    m = float(sweep.dense_elements)
    while True:
        m *= 2**0.25
        if round(m) > cap:
            break
        grid.append(round(m))
    return sorted(set(grid))


def record_steps_for(sweep: TlbSweep, elements: int, traversals: int = 3) -> int:
    """At least `traversals` full traversals when the buffer allows (misses per traversal are
    counted; their median ignores a traversal that a timing outlier touched)."""
    return int(min(max(sweep.record_steps, traversals * elements), sweep.max_record_steps))


class _Launcher:
    """Runs walks and collects one DataFrame per launch."""

    def __init__(self, backend: Backend, sweep: TlbSweep, progress) -> None:
        self.backend, self.sweep, self.progress = backend, sweep, progress
        self.frames: list[pd.DataFrame] = []
        self.last: dict[tuple[str, int], pd.DataFrame] = {}  # latest walk by (stage, length)

    def walk(
        self,
        stage: str,
        stride_bytes: int,
        elements: int,
        *,
        warmup: bool = True,
        record: int | None = None,
        repetition: int = 0,
    ) -> pd.DataFrame:
        eb = self.sweep.element_bytes
        seq = np.arange(elements, dtype=np.int64) * (stride_bytes // eb)
        warmup_steps = elements if warmup else 0
        record = record or record_steps_for(
            self.sweep, elements, traversals=self.sweep.pages_traversals if stage == "pages" else 3
        )
        work = sequence_work(
            self.sweep.path, seq, warmup_steps=warmup_steps, record_steps=record, element_bytes=eb
        )
        point = len(self.frames)
        if warmup:
            result = self.backend.run_chase(work, carveout_pct=None, seed=point)
        else:
            result = self.backend.run(
                ColdChaseWork(work, self.sweep.flush_bytes), carveout_pct=None, seed=point
            )
        n = len(result.latency_cycles)
        positions = seq[(warmup_steps + np.arange(n)) % elements] * (eb // POSITION_BYTES)
        frame = pd.DataFrame(
            {
                "point": np.full(n, point, np.int32),
                "stage": stage,
                "stride_bytes": np.full(n, stride_bytes, np.int64),
                "elements": np.full(n, elements, np.int32),
                "array_bytes": np.full(n, elements * stride_bytes, np.int64),
                "repetition": np.full(n, repetition, np.int16),
                "step": np.arange(n, dtype=np.int32),
                "position": positions,
                "element_bytes": np.full(n, eb, np.int8),
                "index": result.indices,
                "latency_cycles": result.latency_cycles,
                "sm_clock_mhz": np.full(n, result.sm_clock_mhz, np.float32),
            }
        )
        self.frames.append(frame)
        self.last[(stage, elements)] = frame
        if self.progress:
            self.progress(len(self.frames), 0)
        return frame

    def data(self, stage: str | None = None) -> pd.DataFrame:
        frames = [f for f in self.frames if stage is None or f["stage"].iloc[0] == stage]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _pages_stage(run: _Launcher, sweep: TlbSweep, reach) -> None:
    from ..analysis.tlb import tlb, tlb_sets

    page = reach.page_bytes
    max_pages = sweep.max_array_bytes // page
    fit, first = reach.l1_entries_estimate or (16, 17)
    # one page at a time around the reach stage's level (its entries and sets), coarse beyond;
    # a wide bracket (a level of thousands of entries) is first narrowed by bisection
    if first - fit > 16:
        fit, first = _bisect_onset(run, sweep, reach, page, fit, first)
    grid = sorted({2, 3, 4, *range(max(2, fit - 1), first + 4)})
    m = float(first + 4)
    while int(m) <= max_pages:
        grid.append(int(m))
        m *= 2**0.25
    grid = sorted({g for g in grid if g <= max_pages})
    for m in grid:
        if ("pages", m) not in run.last:
            run.walk("pages", page, m)
    walks = tlb.fit_pages(
        run.data("pages"),
        sigma=reach.sigma,
        base_value=reach.base.center,
        base_range=(reach.base.lo, reach.base.hi),
    )
    if walks is None or walks.l1_index is None:
        log.info("tlbs: no TLB miss level in walks of up to %d pages", grid[-1])
        return
    # one page at a time past the outermost level the walks show: the L2 TLB, or, where only
    # one level shows (an L1 TLB that hides in the data latencies: analysis.tlb.tlb_shift), that one
    top, column = (
        (walks.l2_index, "l2_misses")
        if walks.l2_index is not None
        else (walks.l1_index, "l1_misses")
    )
    # an overflowed set misses at least ways + 1 >= 2 times a traversal: one miss is a stray
    # timing outlier (an H100 walk of 1829 pages had one, 190 pages short of the reach)
    counts = walks.counts.set_index("elements")[column]
    missing = [m for m in counts.index if counts[m] >= 1.5] or [
        m for m in counts.index if counts[m] >= 0.5
    ]
    first = missing[0]
    start = max([m for m in counts.index if m < first], default=first - 1)
    levels = list(walks.levels)
    done = set(counts.index)
    previous, increments = None, []
    dense = sweep.max_dense_pages or auto_ranges.tlb_dense_pages(first)
    for m in range(start, min(max_pages, first + dense) + 1):
        frame = run.last[("pages", m)] if m in done else run.walk("pages", page, m)
        lat = frame.sort_values("step")["latency_cycles"].to_numpy(np.float64)
        slow = tlb.at_or_above(lat, levels, top)
        k = round(tlb.misses_per_traversal(slow, m)[0])
        if previous is not None and (k > 0 or previous > 0):
            increments.append(k - previous)
        previous = k
        if tlb_sets.overflows_end(increments, entries=start):
            break


def _bisect_onset(run: _Launcher, sweep: TlbSweep, reach, page: int, fit: int, first: int):
    """Narrow [fit, first) - the longest walk without and the shortest with misses of the
    reach stage's level - to one page, with walks at stride = page: a walk misses when some of
    its accesses lie above the base level of the reach stage (the reach stage's threshold)."""
    from ..analysis.tlb import tlb

    threshold = reach.base.hi
    while first - fit > 1:
        m = (fit + first) // 2
        frame = run.walk("pages", page, m)
        lat = frame.sort_values("step")["latency_cycles"].to_numpy(np.float64)
        misses = tlb.misses_per_traversal(lat >= threshold, m)[0]
        # two or more: an overflowed set misses ways + 1 >= 2 times a traversal, and a single
        # slow access is as likely a timing outlier
        fit, first = (fit, m) if misses >= 2 else (m, first)
    return fit, first


def _reach_walks(run: _Launcher, sweep: TlbSweep, stride: int) -> None:
    for m in element_grid(sweep, stride):
        run.walk("reach", stride, m)


def _reach_search(run: _Launcher, sweep: TlbSweep) -> None:
    """`strides_bytes: auto`: the reach walks from the allocation granule, a factor of 4 at a
    time: smaller while the misses lie one stride apart at the smallest stride (the page is not
    above it), larger while no walk misses; once the page shows, up to the first stride at or
    above it (which counts the L1 TLB's entries). The analysis decides through
    `analysis.tlb.tlb.page_verdict` alone."""
    from ..analysis.tlb import tlb

    first, smallest, largest = auto_ranges.tlb_stride_bounds(
        sweep.max_array_bytes, sweep.dense_elements
    )
    swept = [first]
    _reach_walks(run, sweep, first)
    while True:
        verdict, page = tlb.page_verdict(run.data("reach"))
        if verdict == "smaller" and min(swept) // 4 >= smallest:
            stride = min(swept) // 4
        elif verdict == "none" and max(swept) * 4 <= largest:
            stride = max(swept) * 4
        elif verdict == "page" and max(swept) < page and max(swept) * 4 <= largest:
            stride = max(swept) * 4
        else:
            log.info("tlbs: reach strides %s (%s)", sorted(swept), verdict)
            return
        swept.append(stride)
        _reach_walks(run, sweep, stride)


def run(
    backend: Backend,
    sweep: TlbSweep,
    *,
    device: DeviceEntry,
    inputs: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Run the three stages on `backend`; one row per recorded access."""
    from ..analysis.tlb import tlb

    sweep = resolve(sweep, backend.facts())
    launcher = _Launcher(backend, sweep, progress)
    # one allocation for the reach and pages stages: the paired-address reading compares each
    # address's latency across walks, which needs the same physical pages in every walk
    backend.reserve(sweep.max_array_bytes)
    if sweep.strides_bytes is None:
        _reach_search(launcher, sweep)
    else:
        for stride in sweep.strides_bytes:
            _reach_walks(launcher, sweep, stride)
    reach = tlb.fit_reach(launcher.data("reach"))
    if reach is None or reach.page_bytes is None:
        log.info(
            "tlbs: page size undetermined (%s); later stages skipped",
            reach.page_evidence if reach else "no data",
        )
        return launcher.data()
    log.info(
        "tlbs: page %d bytes, L1-TLB reach ~%s pages", reach.page_bytes, reach.l1_entries_estimate
    )
    _pages_stage(launcher, sweep, reach)
    stride = max(reach.page_bytes, sweep.window_stride_bytes or reach.page_bytes)
    # one record per touch, all in the shared buffer
    pages = min(sweep.window_probe_bytes // stride, sweep.max_record_steps)
    for rep in range(sweep.window_repetitions):
        launcher.walk("window", stride, pages, warmup=False, record=pages, repetition=rep)
    return launcher.data()
