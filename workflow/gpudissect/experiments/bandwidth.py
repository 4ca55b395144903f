"""Streaming read and write bandwidth of each memory level (kernels/bandwidth.cu).

Each CTA streams one slice of one buffer, over and over (reads: ``ld.global.ca`` for the L1
footprints, ``ld.global.cg`` for the others; writes: ``st.global``), chosen per level from the
device facts and the cache sizes measured earlier in the run:

- ``l1``: per SM ``l1_fraction`` of the L1 size that ``cache_stage1`` measured (its largest
  reading), one slice per SM that the SM's CTAs share (``bw_read_ca_sm`` picks it by
  ``%smid``: the footprint of an SM is one slice wherever the scheduler puts the CTAs). Reads
  only: stores write through to the L2. Without a measured L1 size the level is not run, and
  the analysis says so.
- ``l1_capacity``: the same per-SM stream over ``l1_capacity.points`` footprints from
  ``start_fraction`` of that L1 size to ``stop_fraction`` (``auto``: past the shared
  partition stage 1 kept beside it, `partition_bound_bytes`), one CTA of ``threads_per_cta``
  (default one warp) per SM, so that the stream is bound by latency and a few misses slow it:
  the largest footprint the L1 streams at its own bandwidth is the L1 a kernel without shared
  memory gets (the P-chase keeps its records in shared memory, so the driver keeps a shared
  partition beside the L1 it measures).
- ``l2``: ``l2_fraction`` of the L2 size (the ``l2`` footprint sweep's, else the driver's:
  on a partitioned L2 cache_stage1's first miss on the L2 path is the near partition) over the
  whole grid, each CTA its own slice; reads and writes. Above the near partition's size it
  spans both partitions.
- ``l2_near``: ``l2_near_fraction`` of the near partition's size (the ``l2`` sweep's
  ``near_size_bytes``, else cache_stage1's L2 reading where it is below 3/4 of the L2 size) the
  same way: a footprint that every SM's partition holds (a line read from the far partition is
  copied into the near one), so its reads are near hits; reads and writes. Not run where no
  near size is known.
- ``dram``: ``dram_l2_multiple`` times the L2 size, the same way; reads and writes.

Every level is swept over ``ctas_per_sm`` (the grid is SMs x that, one wave while it fits) at
``threads_per_cta``; a launch runs as many passes over its footprint as make at least
``min_bytes_per_launch`` bytes. One untimed launch (it also fills the level), then
``repetitions`` launches timed with CUDA events; every sample is kept, with the clocks.
Throughput = bytes read or written / elapsed. The DRAM ceiling is the theoretical bandwidth
(memory clock x bus width x DDR factor, as ``global_throughput`` records it).

The near/far split of the L2 (a footprint in the SM's own partition against one spanning
both) is not swept: the partition function of ``l2_slices`` is solved inside one 2 MiB page,
up to a constant the bits above the page may change, so a near-only footprint of many pages
would need each page's constant first. The analysis reports the split undetermined.
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
from ..contract.backend import Backend
from ..exceptions import ConfigError
from .shared_throughput import ThroughputFactsQuery

log = logging.getLogger(__name__)

NAME = "bandwidth"
KERNELS = ("bandwidth",)
VECTOR_BYTES = 16
WARP_ACCESS_BYTES = 32 * VECTOR_BYTES  # slices are whole warp accesses
LEVELS = ("l1", "l2_near", "l2", "dram")
BOTH = ("read", "write")
DIRECTIONS = {"l1": ("read",), "l2_near": BOTH, "l2": BOTH, "dram": BOTH}
PATHS = {"l1": "ca", "l2_near": "cg", "l2": "cg", "dram": "cg"}  # each level's load path
NEAR_SHARE = 0.75  # a stage-1 L2 reading below this share of the L2 is the near partition
CAPACITY = "l1_capacity"  # the series of per-SM footprints around the L1 size

SCHEMA = pa.schema(
    [
        pa.field("point", pa.int32()),
        # l1 | l2 | dram: the level the footprint was sized for; l1_capacity: the series of
        # per-SM footprints around the L1 size
        pa.field("level", pa.string()),
        pa.field("direction", pa.string()),  # read | write
        pa.field("path", pa.string()),  # ca | cg (reads); st (writes)
        pa.field("ctas", pa.int32()),
        pa.field("ctas_per_sm", pa.int32()),
        pa.field("threads_per_cta", pa.int32()),
        pa.field("slice_bytes", pa.int64()),
        pa.field("footprint_bytes", pa.int64()),  # the whole grid's
        pa.field("footprint_bytes_per_sm", pa.int64()),
        pa.field("iterations", pa.int32()),
        pa.field("repetition", pa.int16()),
        pa.field("bytes_moved", pa.int64()),  # read or written by the launch
        pa.field("elapsed_ns", pa.float64()),
        pa.field("sm_clock_mhz", pa.float32()),
        pa.field("memory_clock_mhz", pa.float32()),
        pa.field("carveout_pct", pa.int16()),  # -1: the backend sets no carveout
        # device facts and sizes the footprints came from
        pa.field("theoretical_gbps", pa.float64()),  # DRAM: clock x bus width x DDR factor
        pa.field("l1_bytes", pa.int64()),  # 0: no L1 size measured
        pa.field("l2_bytes", pa.int64()),
        pa.field("l2_bytes_source", pa.string()),  # l2 | driver | cache_stage1
        pa.field("l2_near_bytes", pa.int64()),  # 0: no near partition size known
        pa.field("sms", pa.int32()),
    ]
)


@dataclass(frozen=True)
class StreamWork:
    """One launch configuration of kernels/bandwidth.cu."""

    direction: str  # read | write
    path: str  # ca | cg for reads (ignored for writes)
    ctas: int
    threads_per_cta: int
    slice_bytes: int
    iterations: int
    repetitions: int
    carveout_pct: int | None
    by_sm: bool = False  # each CTA streams its SM's slice (%smid), not its own
    slices: int = 0  # distinct slices: the CTAs, or (by_sm) the SMs; 0: the CTAs

    def __post_init__(self) -> None:
        if self.by_sm and (self.direction != "read" or self.path != "ca" or self.slices < 1):
            raise ValueError("by_sm streams are ca reads over slices >= 1 (one per SM)")
        if self.direction not in ("read", "write"):
            raise ValueError(f"direction must be read or write, got {self.direction!r}")
        if self.path not in ("ca", "cg"):
            raise ValueError(f"path must be ca or cg, got {self.path!r}")
        if self.slice_bytes <= 0 or self.slice_bytes % VECTOR_BYTES:
            raise ValueError(
                f"slice_bytes must be a positive multiple of 16, got {self.slice_bytes}"
            )

    @property
    def footprint_bytes(self) -> int:
        return (self.slices or self.ctas) * self.slice_bytes

    @property
    def bytes_moved(self) -> int:
        return self.ctas * self.slice_bytes * self.iterations  # every CTA reads its whole slice


@dataclass(frozen=True)
class BandwidthSweep:
    enabled: bool
    ctas_per_sm: tuple[int, ...]
    threads_per_cta: int
    l1_fraction: float
    l2_fraction: float
    l2_near_fraction: float
    dram_l2_multiple: float
    levels: tuple[str, ...]
    min_bytes_per_launch: int
    repetitions: int
    carveout_pct: int
    l1_capacity_points: int = 0
    l1_capacity_fractions: tuple[float, float | None] = (0.875, None)  # None: auto
    l1_capacity_threads: int = 32


def parse_params(section: dict, key: str) -> BandwidthSweep:
    levels = tuple(section["levels"])
    for level in levels:
        if level not in LEVELS:
            raise ConfigError(
                f"{key}.levels: {level!r} is not a level; allowed: {', '.join(LEVELS)}"
            )
    for name in ("l1_fraction", "l2_fraction", "l2_near_fraction"):
        if not 0 < section[name] < 1:
            raise ConfigError(
                f"{key}.{name}: {section[name]} is not inside (0, 1); allowed: a share of the "
                "cache size below 1, so that the footprint stays in the cache"
            )
    start, stop = (section["l1_capacity"][k] for k in ("start_fraction", "stop_fraction"))
    if stop != AUTO and not 0 < start < stop:
        raise ConfigError(
            f"{key}.l1_capacity: start_fraction {start} and stop_fraction {stop}; allowed: "
            "0 < start_fraction < stop_fraction (shares of the measured L1 size), or "
            "stop_fraction auto"
        )
    if section["dram_l2_multiple"] < 2:
        raise ConfigError(
            f"{key}.dram_l2_multiple: {section['dram_l2_multiple']} is below 2; allowed: at "
            "least 2 L2 sizes, so that the DRAM footprint cannot stay in the L2"
        )
    return BandwidthSweep(
        enabled=section["enabled"],
        ctas_per_sm=tuple(section["ctas_per_sm"]),
        threads_per_cta=section["threads_per_cta"],
        l1_fraction=float(section["l1_fraction"]),
        l2_fraction=float(section["l2_fraction"]),
        l2_near_fraction=float(section["l2_near_fraction"]),
        dram_l2_multiple=float(section["dram_l2_multiple"]),
        levels=levels,
        min_bytes_per_launch=section["min_bytes_per_launch"],
        repetitions=section["repetitions"],
        carveout_pct=section["carveout_pct"],
        l1_capacity_points=section["l1_capacity"]["points"],
        l1_capacity_fractions=(float(start), None if stop == AUTO else float(stop)),
        l1_capacity_threads=section["l1_capacity"]["threads_per_cta"],
    )


def measured_sizes(inputs: dict | None) -> dict[str, int]:
    """The sizes earlier analyses measured, those they determined: ``l1d`` (cache_stage1's
    largest L1 reading) and its ``shared_buffer_bytes`` where it ran at carveout 0,
    ``l2_stage1`` (cache_stage1's first miss on the L2 path), and from the ``l2`` footprint
    sweep ``l2`` and ``l2_near``."""
    out: dict[str, int] = {}
    doc = _read(inputs, "cache_stage1")
    if doc:
        for element, key in (("l1d", "l1d"), ("l2", "l2_stage1")):
            values = [(doc.get("elements", {}).get(element) or {}).get("size_bytes") or {}]
            values += [
                (s.get(element) or {}).get("size_bytes") or {}
                for s in doc.get("series", [])
                if isinstance(s, dict)
            ]
            sizes = [v.get("value") for v in values if isinstance(v.get("value"), int | float)]
            if sizes:
                out[key] = int(max(sizes))
        buffer, carveouts = doc.get("shared_buffer_bytes"), doc.get("carveout_pct")
        if isinstance(buffer, int) and carveouts in ([0], 0):  # the partition beside its L1
            out["shared_buffer_bytes"] = buffer
    l2 = ((_read(inputs, "l2") or {}).get("elements") or {}).get("l2") or {}
    for quantity, key in (("size_bytes", "l2"), ("near_size_bytes", "l2_near")):
        value = (l2.get(quantity) or {}).get("value")
        if isinstance(value, int | float):
            out[key] = int(value)
    return out


def _read(inputs: dict | None, name: str) -> dict | None:
    path = (inputs or {}).get(name)
    if not path or not Path(path).is_file():
        return None
    return json.loads(Path(path).read_text())


def l2_sizes(sizes: dict[str, int], driver_l2_bytes: int) -> tuple[int, str, int | None]:
    """(L2 size, its source, near partition size or None) the footprints are sized from."""
    if "l2" in sizes:
        l2, source = sizes["l2"], "l2"
    elif driver_l2_bytes:
        l2, source = driver_l2_bytes, "driver"
    else:
        l2, source = sizes.get("l2_stage1", 0), "cache_stage1"
    near = sizes.get("l2_near")
    stage1 = sizes.get("l2_stage1")
    if near is None and stage1 and l2 and stage1 < NEAR_SHARE * l2:
        near = stage1  # a partitioned L2: the L2 path's first miss is the near partition's
    return l2, source, near


def partition_bound_bytes(sizes: dict[str, int], *, reserved_bytes: int, shared_per_sm: int):
    """At most the shared partition beside stage 1's L1, so that the L1 without one is at
    most the L1 plus this. At carveout 0 the driver grants the smallest step that holds the
    block's buffer and reserve, and every step of compute capabilities 7.0-10.x up to 228 KB
    is at most twice the one below it or 8 KB: 2 x (buffer + reserve) + 8 KiB bounds it.
    Otherwise (another carveout, or none recorded) the driver's shared memory per SM."""
    if "shared_buffer_bytes" in sizes:
        return 2 * (sizes["shared_buffer_bytes"] + reserved_bytes) + 8192
    return shared_per_sm


def _round_slice(nbytes: float) -> int:
    return max(WARP_ACCESS_BYTES, int(nbytes) // WARP_ACCESS_BYTES * WARP_ACCESS_BYTES)


@dataclass(frozen=True)
class LevelPlan:
    level: str
    direction: str
    work: StreamWork
    ctas_per_sm: int


def plan(
    sweep: BandwidthSweep,
    *,
    sms: int,
    max_threads_per_sm: int,
    l1_bytes: int | None,
    l2_bytes: int,
    carveout_pct: int | None,
    l1_partition_bound_bytes: int | None = None,
    l2_near_bytes: int | None = None,
) -> list[LevelPlan]:
    """The launches, level by level (a level whose size is unknown is left out)."""
    if sweep.threads_per_cta > min(1024, max_threads_per_sm):
        raise ConfigError(
            f"bandwidth.threads_per_cta: {sweep.threads_per_cta} exceeds the device's "
            f"{min(1024, max_threads_per_sm)} threads per CTA; allowed: a multiple of 32 up to it"
        )
    out = []
    for level in sweep.levels:
        if level == "l1" and not l1_bytes:
            log.warning("no L1 size measured (cache_stage1): the L1 footprint is not run")
            continue
        if level != "l1" and not l2_bytes:
            log.warning("no L2 size known: the %s footprint is not run", level)
            continue
        if level == "l2_near" and not l2_near_bytes:
            log.warning("no near L2 partition size known: the l2_near footprint is not run")
            continue
        for per_sm in sweep.ctas_per_sm:
            ctas = per_sm * sms
            if level == "l1":  # one slice per SM, which the SM's CTAs share
                slice_bytes, slices = _round_slice(sweep.l1_fraction * l1_bytes), sms
            elif level == "l2":
                slice_bytes, slices = _round_slice(sweep.l2_fraction * l2_bytes / ctas), 0
            elif level == "l2_near":
                share = sweep.l2_near_fraction * l2_near_bytes
                slice_bytes, slices = _round_slice(share / ctas), 0
            else:
                slice_bytes = _round_slice(sweep.dram_l2_multiple * l2_bytes / ctas)
                slices = 0
            for direction in DIRECTIONS[level]:
                out.append(
                    LevelPlan(
                        level,
                        direction,
                        _work(sweep, direction, level, ctas, slice_bytes, slices, carveout_pct),
                        per_sm,
                    )
                )
    if "l1" in sweep.levels and l1_bytes and sweep.l1_capacity_points:
        stop = sweep.l1_capacity_fractions[1]
        stop_bytes = l1_bytes * stop if stop else l1_bytes + (l1_partition_bound_bytes or 0)
        if stop_bytes <= l1_bytes:
            stop_bytes = 1.25 * l1_bytes  # no bound known: a quarter past stage 1's L1
        out += _capacity_plan(sweep, sms, l1_bytes, stop_bytes, carveout_pct)
    return out


def _work(sweep, direction, level, ctas, slice_bytes, slices, carveout_pct) -> StreamWork:
    per_launch = ctas * slice_bytes
    return StreamWork(
        direction=direction,
        path=PATHS[level],
        ctas=ctas,
        threads_per_cta=sweep.threads_per_cta,
        slice_bytes=slice_bytes,
        iterations=int(max(1, -(-sweep.min_bytes_per_launch // per_launch))),
        repetitions=sweep.repetitions,
        carveout_pct=carveout_pct,
        by_sm=bool(slices),
        slices=slices,
    )


def _capacity_plan(sweep, sms, l1_bytes, stop_bytes, carveout_pct) -> list[LevelPlan]:
    """Per-SM footprints from the start fraction of the measured L1 to `stop_bytes`, one CTA
    of `l1_capacity_threads` per SM: a stream bound by latency, so that a few accesses missing
    the L1 slow it (a saturated one hides misses the L2 can absorb beside the L1's rate)."""
    per_sm = 1
    sweep = replace(sweep, threads_per_cta=sweep.l1_capacity_threads)
    low, n = l1_bytes * sweep.l1_capacity_fractions[0], sweep.l1_capacity_points
    sizes = sorted({_round_slice(low + (stop_bytes - low) * k / max(n - 1, 1)) for k in range(n)})
    return [
        LevelPlan(
            CAPACITY, "read", _work(sweep, "read", "l1", per_sm * sms, b, sms, carveout_pct), per_sm
        )
        for b in sizes
    ]


def run(
    backend: Backend,
    sweep: BandwidthSweep,
    *,
    device: DeviceEntry,
    inputs: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Run the sweep; one row per timed launch."""
    facts = backend.run(ThroughputFactsQuery())
    frames = [pd.DataFrame({f.name: pd.Series(dtype=f.type.to_pandas_dtype()) for f in SCHEMA})]
    if facts.dram_theoretical_gbps is None:  # a simulated device without a throughput block
        log.info("the device has no throughput description; nothing to run")
        return pd.concat(frames, ignore_index=True)
    sizes = measured_sizes(inputs)
    l2_bytes, l2_source, l2_near = l2_sizes(sizes, facts.l2_bytes)
    carveout = sweep.carveout_pct if backend.supports_carveout else None
    plans = plan(
        sweep,
        sms=facts.sms,
        max_threads_per_sm=facts.max_threads_per_sm,
        l1_bytes=sizes.get("l1d"),
        l2_bytes=l2_bytes,
        carveout_pct=carveout,
        l2_near_bytes=l2_near,
        l1_partition_bound_bytes=partition_bound_bytes(
            sizes,
            reserved_bytes=facts.shared_reserved_bytes_per_cta or 0,
            shared_per_sm=facts.shared_bytes_per_sm or 0,
        ),
    )
    theoretical = facts.dram_theoretical_gbps
    for i, p in enumerate(plans):
        w = p.work
        t = backend.run(w, seed=i)
        n = len(t.elapsed_ns)

        def col(value, dtype, n=n):
            return np.full(n, value, dtype)

        frames.append(
            pd.DataFrame(
                {
                    "point": col(i, np.int32),
                    "level": [p.level] * n,
                    "direction": [p.direction] * n,
                    "path": [w.path if p.direction == "read" else "st"] * n,
                    "ctas": col(w.ctas, np.int32),
                    "ctas_per_sm": col(p.ctas_per_sm, np.int32),
                    "threads_per_cta": col(w.threads_per_cta, np.int32),
                    "slice_bytes": col(w.slice_bytes, np.int64),
                    "footprint_bytes": col(w.footprint_bytes, np.int64),
                    "footprint_bytes_per_sm": col(
                        w.slice_bytes * (1 if w.by_sm else p.ctas_per_sm), np.int64
                    ),
                    "iterations": col(w.iterations, np.int32),
                    "repetition": np.arange(n, dtype=np.int16),
                    "bytes_moved": col(w.bytes_moved, np.int64),
                    "elapsed_ns": t.elapsed_ns.astype(np.float64),
                    "sm_clock_mhz": col(t.sm_clock_mhz, np.float32),
                    "memory_clock_mhz": col(t.memory_clock_mhz, np.float32),
                    "carveout_pct": col(-1 if carveout is None else carveout, np.int16),
                    "theoretical_gbps": col(theoretical, np.float64),
                    "l1_bytes": col(sizes.get("l1d", 0), np.int64),
                    "l2_bytes": col(l2_bytes or 0, np.int64),
                    "l2_bytes_source": [l2_source] * n,
                    "l2_near_bytes": col(l2_near or 0, np.int64),
                    "sms": col(facts.sms, np.int32),
                }
            )
        )
        if progress:
            progress(i + 1, len(plans))
    return pd.concat(frames, ignore_index=True)
