"""Global-memory latency patterns P1-P6 (Mei & Chu, TPDS Sec. 5.2, Figs. 13-14; NPC Table 3):
one non-uniform-stride fine-grained P-chase per launch whose chain walks through phases built so
that each pattern occurs many times, every access timed from a cold start (no warm-up).

The chain (element positions of a sparse array; pages and reaches from this device's
`tlbs.json`, else the `fallback_*` values; where the L1 and L2 TLBs translate units of different
sizes, the chain's page is the larger, so that every page is a unit of both; at most
`max_array_bytes` of pages, 8-byte elements past 16 GiB):

1. cold: first touches of K = E2 + max(8, E2/4) pages (one 32-byte sector each): data miss,
   TLB miss, page-walk miss (P5). When a page-table window W is known, the second half
   alternates between pages W bytes further and the first region: every first touch then
   switches the window (P6).
2. revisit all: `revisit_all_rounds` rounds over the K pages, each round another element of the
   same sector: data hits; K pages overflow the L2 TLB (P3).
3. revisit some: `revisit_some_rounds` rounds over Q pages, E1 < Q < E2: data hits, L1-TLB
   misses, L2-TLB hits (P2; the first round still misses the L2 TLB).
4. fresh lines: `fresh_line_rounds` rounds over H <= 4 pages, a new line each time: data
   misses with L1-TLB hits (P4; the first round misses the L1 TLB).
5. hits: a terminal cycle of `same_line_accesses` loads (P1): over the elements of one sector
   where `hit_lines` is 1 (TPDS), else over one more element of each of the last `hit_lines`
   fresh lines, so that P1 is read over as many lines (and L2 slices) as the other patterns.

Every launch prefers the L1/shared carveout `carveout_pct` (GPU only; null: the driver's choice).

The analysis does not use this plan: it classifies every access from the recorded addresses
(first touches, page and sector reuse, windows) with the capacities measured by `tlbs`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from ..config import AUTO, DeviceEntry
from ..contract.backend import Backend, ChaseWork
from ..exceptions import ConfigError
from . import empty_frame
from .auto_ranges import index_bytes, walk_memory_bytes
from .sparse_chase import ColdChaseWork

log = logging.getLogger(__name__)

NAME = "latency_patterns"
KERNELS = ("pchase",)
POSITION_BYTES = 4  # the trace's `position` is the byte address / 4, whatever the element size
SECTOR_BYTES = 32  # the smallest line of the papers' GPUs (TPDS Table V): 8 elements of 4 bytes

SCHEMA = pa.schema(
    [
        pa.field("point", pa.int32()),
        pa.field("path", pa.string()),
        pa.field("repetition", pa.int16()),
        pa.field("step", pa.int32()),
        pa.field("position", pa.int64()),  # the address loaded / 4 (from the array start)
        pa.field("phase", pa.string()),  # the plan's phase (for figures; not for the analysis)
        pa.field("index", pa.uint32()),
        pa.field("latency_cycles", pa.uint32()),
        pa.field("sm_clock_mhz", pa.float32()),
    ]
)


@dataclass(frozen=True)
class LatencyPatternsSweep:
    enabled: bool
    paths: tuple[str, ...]
    element_bytes: int | None  # None: `auto` (`auto_ranges.index_bytes`)
    max_array_bytes: int | None  # None: `auto` (`auto_ranges.walk_memory_bytes`)
    repetitions: int
    revisit_all_rounds: int
    revisit_some_rounds: int
    fresh_line_rounds: int
    same_line_accesses: int
    hit_lines: int
    carveout_pct: int | None
    fallback_page_bytes: int
    fallback_l1_tlb_entries: int
    fallback_l2_tlb_entries: int
    flush_bytes: int


def parse_params(section: dict, key: str) -> LatencyPatternsSweep:
    sweep = LatencyPatternsSweep(
        enabled=section["enabled"],
        paths=tuple(section["paths"]),
        element_bytes=None if section["element_bytes"] == AUTO else section["element_bytes"],
        max_array_bytes=None if section["max_array_bytes"] == AUTO else section["max_array_bytes"],
        repetitions=section["repetitions"],
        revisit_all_rounds=section["revisit_all_rounds"],
        revisit_some_rounds=section["revisit_some_rounds"],
        fresh_line_rounds=section["fresh_line_rounds"],
        same_line_accesses=section["same_line_accesses"],
        hit_lines=section["hit_lines"],
        carveout_pct=section["carveout_pct"],
        fallback_page_bytes=section["fallback_page_bytes"],
        fallback_l1_tlb_entries=section["fallback_l1_tlb_entries"],
        fallback_l2_tlb_entries=section["fallback_l2_tlb_entries"],
        flush_bytes=section["flush_bytes"],
    )
    check_sweep(sweep, key)
    return sweep


def check_sweep(sweep: LatencyPatternsSweep, key: str) -> None:
    """Checks the schema cannot express (again once `auto` is resolved)."""
    # `auto` may become 8 bytes: the rounds must fit a sector of four
    per_sector = SECTOR_BYTES // (sweep.element_bytes or 8)
    if 1 + sweep.revisit_all_rounds + sweep.revisit_some_rounds > per_sector:
        raise ConfigError(
            f"{key}: revisit_all_rounds + revisit_some_rounds = "
            f"{sweep.revisit_all_rounds + sweep.revisit_some_rounds}; allowed: at most "
            f"{per_sector - 1} with element_bytes {sweep.element_bytes or 'auto'} (each round "
            "reads another element of a 32-byte sector)"
        )
    if sweep.hit_lines > 1 and sweep.hit_lines > sweep.fresh_line_rounds:
        raise ConfigError(
            f"{key}.hit_lines: {sweep.hit_lines}; allowed: 1 (one sector) or at most "
            f"fresh_line_rounds ({sweep.fresh_line_rounds}): the cycle re-reads fresh lines"
        )
    if sweep.element_bytes == 4 and (sweep.max_array_bytes or 0) // 4 >= 2**32:
        raise ConfigError(
            f"{key}.max_array_bytes: {sweep.max_array_bytes} needs more than 2^32 elements of "
            f"4 bytes (32-bit indices); allowed: below {2**34} (set {key}.element_bytes: 8 "
            "for 64-bit indices)"
        )
    if sweep.fallback_l2_tlb_entries <= sweep.fallback_l1_tlb_entries + 2:
        raise ConfigError(
            f"{key}.fallback_l2_tlb_entries must exceed fallback_l1_tlb_entries by more than 2"
        )


@dataclass(frozen=True)
class Translation:
    """What the chain is built around: page (the larger of the two TLB levels' units), TLB
    entries, window (None: no window)."""

    page_bytes: int
    l1_entries: int
    l2_entries: int
    window_bytes: int | None
    source: str


def _value(doc: dict, *keys: str):
    node = doc
    for k in keys:
        node = node.get(k) if isinstance(node, dict) else None
    return node.get("value") if isinstance(node, dict) else None


def translation_from(inputs: dict | None, sweep: LatencyPatternsSweep) -> Translation:
    """The measured values of `tlbs.json` where determined, else the fallbacks."""
    doc = {}
    path = (inputs or {}).get("tlbs")
    if path and Path(path).is_file():
        doc = json.loads(Path(path).read_text())
    pages = [_value(doc, "elements", e, "page_bytes") for e in ("l1_tlb", "l2_tlb")]
    page = max((p for p in pages if p), default=None)
    l1 = _value(doc, "elements", "l1_tlb", "entries")
    l2 = _value(doc, "elements", "l2_tlb", "entries")
    window = _value(doc, "page_table", "page_table_window_bytes")
    used = {
        "page_bytes": page or sweep.fallback_page_bytes,
        "l1": l1 or sweep.fallback_l1_tlb_entries,
        "l2": l2 or sweep.fallback_l2_tlb_entries,
    }
    if used["l2"] <= used["l1"] + 2:
        used["l2"] = used["l1"] * 4
    source = ", ".join(
        f"{k} {'measured' if v else 'fallback'}"
        for k, v in (("page", page), ("l1", l1), ("l2", l2))
    )
    return Translation(used["page_bytes"], used["l1"], used["l2"], window, source)


@dataclass(frozen=True)
class Plan:
    positions: np.ndarray  # element positions of one pass; the last leads back into the cycle
    phases: tuple[str, ...]
    cycle_length: int  # the last `cycle_length` positions form the terminal cycle
    element_bytes: int = 4

    def visit(self, steps: int) -> tuple[np.ndarray, list[str]]:
        """Positions and phases of the first `steps` loads."""
        n, c = len(self.positions), self.cycle_length
        t = np.arange(steps)
        k = np.where(t < n, t, n - c + (t - n) % c)
        return self.positions[k], [self.phases[i] for i in k]


def design(t: Translation, sweep: LatencyPatternsSweep) -> Plan:
    """The chain of the module docstring for translation parameters `t`."""
    page, e1, e2 = t.page_bytes, t.l1_entries, t.l2_entries
    eb = sweep.element_bytes
    lines = max(page // 128, 8)  # 128-byte lines per page
    half = lines // 2
    k = min(e2 + max(8, e2 // 4), max(2, sweep.max_array_bytes // page))
    if k <= e2:
        log.info(
            "latency_patterns: %d pages of %d bytes fit max_array_bytes, not more than the %d "
            "L2-TLB entries: no access can miss the L2 TLB (P3)",
            k,
            page,
            e2,
        )
    q = max(e1 + max(2, e1 // 4), min((e1 + e2) // 2, e2 - max(2, e2 // 5)))
    if q > k:  # the revisits stay in the array (a fallback L2 TLB larger than the memory)
        log.info("latency_patterns: revisiting %d of %d pages, not %d", k, k, q)
        q = k
    h = max(1, min(4, e1 // 4))
    seq: list[int] = []
    phases: list[str] = []

    def add(byte_address: int, phase: str) -> None:
        seq.append(byte_address // eb)
        phases.append(phase)

    def sector(page_base: int, line: int) -> int:  # the first 32 bytes of a 128-byte line
        return page_base + (line % half) * 128

    region1 = t.window_bytes if t.window_bytes and t.window_bytes > k * page else None
    first = k // 2
    for i in range(first):
        add(sector(i * page, i), "cold")
    for j in range(k - first):
        if region1:  # alternate windows: every first touch switches
            add(sector(region1 + j * page, k + j), "cold_switch")
        add(sector((first + j) * page, first + j), "cold")
    for r in range(1, 1 + sweep.revisit_all_rounds):
        for i in range(k):
            add(sector(i * page, i) + r * eb, "revisit_all")
    r0 = 1 + sweep.revisit_all_rounds
    for r in range(r0, r0 + sweep.revisit_some_rounds):
        for i in range(q):
            add(sector(i * page, i) + r * eb, "revisit_some")
    for r in range(sweep.fresh_line_rounds):
        for i in range(h):
            add(i * page + (half + r % half) * 128, "fresh_lines")
    fresh = [seq[i] * eb for i, ph in enumerate(phases) if ph == "fresh_lines"]
    if sweep.hit_lines > 1 and len(fresh) >= sweep.hit_lines:
        # one more element of each of the last fresh lines: data hits in L1-TLB-resident pages
        for a in fresh[-sweep.hit_lines :]:
            add(a + eb, "same_line")
        cycle = sweep.hit_lines
    else:
        same = (half + sweep.fresh_line_rounds % half) * 128  # a line no other phase reads
        for e in range(SECTOR_BYTES // eb):
            add(same + e * eb, "same_line")
        cycle = SECTOR_BYTES // eb
    positions = np.asarray(seq, dtype=np.int64)
    if len(np.unique(positions)) != len(positions):
        raise ConfigError(
            f"the latency-pattern chain revisits an element (page {page} bytes too small for "
            "the rounds configured); use fewer fresh_line_rounds"
        )
    return Plan(positions, tuple(phases), cycle, eb)


def chase_work(path: str, plan: Plan, record_steps: int) -> ChaseWork:
    pos = plan.positions
    nxt = np.empty(len(pos), dtype=np.uint32 if plan.element_bytes == 4 else np.uint64)
    nxt[:-1] = pos[1:]
    nxt[-1] = pos[len(pos) - plan.cycle_length]
    return ChaseWork(
        path=path,
        chain=None,
        start_index=int(pos[0]),
        warmup_steps=0,
        record_steps=record_steps,
        shared_buffer_bytes=max(1024, -(-8 * record_steps // 1024) * 1024),
        element_bytes=plan.element_bytes,
        array_elements=int(pos.max()) + 1,
        sparse_positions=pos,
        sparse_next=nxt,
    )


def run(
    backend: Backend,
    sweep: LatencyPatternsSweep,
    *,
    device: DeviceEntry,
    inputs: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """`repetitions` cold launches of the designed chain on each path the device has."""
    if sweep.max_array_bytes is None:
        key = "latency_patterns.max_array_bytes"
        n = walk_memory_bytes(
            backend.facts(),
            align_bytes=sweep.fallback_page_bytes,
            key=key,
            free_bytes=backend.free_memory_bytes(),
        )
        sweep = replace(sweep, max_array_bytes=n)
    if sweep.element_bytes is None:
        sweep = replace(sweep, element_bytes=index_bytes(sweep.max_array_bytes))
    check_sweep(sweep, "latency_patterns")
    t = translation_from(inputs, sweep)
    plan = design(t, sweep)
    steps = len(plan.positions) - plan.cycle_length + sweep.same_line_accesses
    positions, phases = plan.visit(steps)
    log.info(
        "latency_patterns: page %d, L1 TLB %d, L2 TLB %d, window %s (%s); %d accesses",
        t.page_bytes,
        t.l1_entries,
        t.l2_entries,
        t.window_bytes,
        t.source,
        steps,
    )
    frames, total = [], len(sweep.paths) * sweep.repetitions
    for path in sweep.paths:
        if not backend.has_path(path):
            log.info("latency_patterns: the device has no %s path; skipped", path)
            continue
        work = chase_work(path, plan, steps)
        for rep in range(sweep.repetitions):
            point = len(frames)
            result = backend.run(
                ColdChaseWork(work, sweep.flush_bytes), carveout_pct=sweep.carveout_pct, seed=point
            )
            n = len(result.latency_cycles)
            frames.append(
                pd.DataFrame(
                    {
                        "point": np.full(n, point, np.int32),
                        "path": path,
                        "repetition": np.full(n, rep, np.int16),
                        "step": np.arange(n, dtype=np.int32),
                        "position": positions[:n] * (plan.element_bytes // POSITION_BYTES),
                        "phase": phases[:n],
                        "index": result.indices,
                        "latency_cycles": result.latency_cycles,
                        "sm_clock_mhz": np.full(n, result.sm_clock_mhz, np.float32),
                    }
                )
            )
            if progress:
                progress(len(frames), total)
    if not frames:  # no path the device has: the analysis reports each as not applicable
        return empty_frame(SCHEMA)
    return pd.concat(frames, ignore_index=True)
