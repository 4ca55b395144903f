"""The memory topology of a node of several GPUs: peer memory, its links and their caching.

For every ordered pair (a, b) of the node's GPUs with peer access, GPU a measures GPU b's memory:
- `chase`: the fine-grained P-chase (one thread, `kernels/pchase.cu`) from a over an array in
  b's memory on each load path (ca, cg, nc), at three footprints: inside the L1, inside the L2
  and beyond the L2; and the same over a's own memory (a == b: the local baseline). A peer
  latency equal to the local one at the same footprint says that a's own cache keeps b's lines;
- `stream`: SM-driven reads and writes of b's memory (`kernels/node.cu`), one block per SM,
  against the number of SMs and the access size (4, 8, 16 bytes a thread), timed with events;
- `copy`: copy-engine copies (cuMemcpyPeer, the nvbandwidth-style number) of several sizes;
- `atomic`: dependent atomics on b's memory, each timed (`kernels/node.cu`), and on a's own;
- `chase` with footprint `capacity`: the peer P-chase over footprints growing by a factor of
  sqrt(2) from the L1 footprint to twice the L2 (`capacity`): where the latency steps up is the
  capacity of the nearest cache that keeps the peer's lines;
- `chase` with footprint `tlb`: the P-chase at page stride over footprints that double from
  `tlb.start_bytes` to `tlb.stop_bytes`, one line a page, each page's line one `line_skew_bytes`
  further into its page than the last one's (the lines spread over the L2's sets instead of
  piling into one, so they stay in the L2 and a step is the TLB's), on the peer's memory and on
  a's own: the TLB reach on peer memory;
- `gpu`: one row per GPU, what identifies it (name, UUID, PCI bus id; JSON in `detail`);
- `link`: one row per ordered pair, what the driver and NVML say of it (peer access, NVLink
  count and version, the PCIe common ancestor).
Every measurement is bounded: none starts once `time_budget_s` has passed since the sweep
began, and none allocates more than `memory_fraction` of the free memory of its GPU; what is
left out gets a `skipped` row saying why. The sweep never uses NVLink multicast.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ..config import AUTO, DeviceEntry
from ..contract.backend import Backend
from ..contract.node import (
    DIRECTIONS,
    PATHS,
    NodeFacts,
    NodeQuery,
    PeerAtomicWork,
    PeerChaseWork,
    PeerCopyWork,
    PeerStreamWork,
)
from ..exceptions import ConfigError
from ..patterns import chain_pass_steps

log = logging.getLogger(__name__)

NAME = "node"
KERNELS = ("pchase", "node")
FOOTPRINTS = ("l1", "l2", "beyond")
# a chase row's detail where its loads did not return the chain's indices (the analysis leaves
# such a chase out and names it)
WALK_LEFT_CHAIN = "the walk left the chain"
ACCESS_BYTES = (4, 8, 16)

SCHEMA = pa.schema(
    [
        # gpu | link | chase | atomic | stream | copy | skipped
        pa.field("kind", pa.string()),
        pa.field("src_gpu", pa.int16()),
        pa.field("dst_gpu", pa.int16()),
        pa.field("src_name", pa.string()),
        pa.field("dst_name", pa.string()),
        pa.field("path", pa.string()),  # chase: ca | cg | nc, else ""
        pa.field("footprint", pa.string()),  # chase: l1 | l2 | beyond, else ""
        pa.field("footprint_bytes", pa.int64()),
        pa.field("stride_bytes", pa.int32()),
        pa.field("direction", pa.string()),  # stream: read | write, else ""
        pa.field("sms", pa.int32()),
        pa.field("access_bytes", pa.int16()),
        pa.field("bytes_moved", pa.int64()),
        pa.field("repetition", pa.int16()),
        pa.field("step", pa.int32()),
        pa.field("latency_cycles", pa.int64()),
        pa.field("elapsed_ns", pa.float64()),
        pa.field("sm_clock_mhz", pa.float32()),
        # link rows
        pa.field("peer_access", pa.bool_()),
        pa.field("link_kind", pa.string()),
        pa.field("nvlink_count", pa.int16()),
        pa.field("nvlink_version", pa.int16()),
        pa.field("common_ancestor", pa.string()),
        # skipped: what and why; copy: the driver call; chase: WALK_LEFT_CHAIN where it did;
        # gpu: the GPU's identity (JSON)
        pa.field("detail", pa.string()),
    ]
)

_DEFAULTS: dict[str, Any] = {
    "kind": "",
    "src_gpu": 0,
    "dst_gpu": 0,
    "src_name": "",
    "dst_name": "",
    "path": "",
    "footprint": "",
    "footprint_bytes": 0,
    "stride_bytes": 0,
    "direction": "",
    "sms": 0,
    "access_bytes": 0,
    "bytes_moved": 0,
    "repetition": 0,
    "step": 0,
    "latency_cycles": 0,
    "elapsed_ns": 0.0,
    "sm_clock_mhz": float("nan"),
    "peer_access": False,
    "link_kind": "",
    "nvlink_count": 0,
    "nvlink_version": 0,
    "common_ancestor": "",
    "detail": "",
}


@dataclass(frozen=True)
class NodeSweep:
    enabled: bool
    gpus: tuple[tuple[str, int], ...]  # (name, CUDA index) of the node's GPUs; () on the sim
    paths: tuple[str, ...]
    stride_bytes: int
    footprints_bytes: dict[str, int | None]  # None: `auto` (from the L2 size)
    record_steps: int
    sms: tuple[int, ...] | None  # None: `auto` (powers of two up to the SM count, and it)
    access_bytes: tuple[int, ...]
    directions: tuple[str, ...]
    threads_per_block: int
    stream_bytes: int | None  # None: `auto` (four times the L2)
    copy_bytes: tuple[int, ...]
    repetitions: int
    atomic_footprint_bytes: int
    atomic_record_steps: int
    capacity_paths: tuple[str, ...]  # (): no capacity series
    capacity_stop_bytes: int | None  # None: `auto` (twice the L2)
    capacity_record_steps: int
    tlb_path: str | None  # None: no TLB series
    tlb_stride_bytes: int
    tlb_skew_bytes: int
    tlb_footprints_bytes: tuple[int, ...]
    time_budget_s: float
    memory_fraction: float


def _check_multiple(value: int, of: int, key: str) -> None:
    if value % of:
        raise ConfigError(f"{key}: {value} is not a multiple of {of}; allowed: a multiple of {of}")


def parse_params(section: dict, key: str) -> NodeSweep:
    fp = section["footprints_bytes"]
    footprints = {k: None if fp[k] == AUTO else int(fp[k]) for k in FOOTPRINTS}
    sizes = [v for v in footprints.values() if v is not None]
    if sizes != sorted(sizes) or len(set(sizes)) != len(sizes):
        raise ConfigError(
            f"{key}.footprints_bytes: {fp} does not grow from l1 to l2 to beyond; allowed: "
            "l1 < l2 < beyond (each a size in bytes, or auto for l2 and beyond)"
        )
    for name, size in footprints.items():
        if size is not None and size < section["stride_bytes"]:
            raise ConfigError(
                f"{key}.footprints_bytes.{name}: {size} is below stride_bytes "
                f"{section['stride_bytes']}; allowed: at least one stride"
            )
    stream = section["stream"]
    if stream["launch_bytes"] != AUTO:
        _check_multiple(stream["launch_bytes"], 16, f"{key}.stream.launch_bytes")
    copies = section["copy"]["sizes_bytes"]
    for i, b in enumerate(copies):
        _check_multiple(b, 16, f"{key}.copy.sizes_bytes[{i}]")
    if len(set(copies)) < 2:
        raise ConfigError(
            f"{key}.copy.sizes_bytes: {copies} has fewer than two sizes; allowed: "
            "two or more sizes (the copy bandwidth is the slope of time against bytes)"
        )
    cap = section["capacity"]
    tlb = section["tlb"]
    if tlb["stop_bytes"] < tlb["start_bytes"] or tlb["start_bytes"] < tlb["stride_bytes"]:
        raise ConfigError(
            f"{key}.tlb: start_bytes {tlb['start_bytes']}, stop_bytes {tlb['stop_bytes']}, "
            f"stride_bytes {tlb['stride_bytes']}; allowed: stride_bytes <= start_bytes <= "
            "stop_bytes"
        )
    tlb_sizes = []
    size = tlb["start_bytes"] // tlb["stride_bytes"] * tlb["stride_bytes"]
    while size <= tlb["stop_bytes"]:
        tlb_sizes.append(size)
        size *= 2
    return NodeSweep(
        enabled=section.get("enabled", False),
        gpus=tuple((str(g["name"]), int(g["index"])) for g in section.get("gpus", [])),
        paths=tuple(section["paths"]),
        stride_bytes=section["stride_bytes"],
        footprints_bytes=footprints,
        record_steps=section["record_steps"],
        sms=None if stream["sms"] == AUTO else tuple(stream["sms"]),
        access_bytes=tuple(stream["access_bytes"]),
        directions=tuple(stream["directions"]),
        threads_per_block=stream["threads_per_block"],
        stream_bytes=None if stream["launch_bytes"] == AUTO else stream["launch_bytes"],
        copy_bytes=tuple(copies),
        repetitions=section["repetitions"],
        atomic_footprint_bytes=section["atomic"]["footprint_bytes"],
        atomic_record_steps=section["atomic"]["record_steps"],
        capacity_paths=tuple(cap["paths"]) if cap["enabled"] else (),
        capacity_stop_bytes=None if cap["stop_bytes"] == AUTO else int(cap["stop_bytes"]),
        capacity_record_steps=cap["record_steps"],
        tlb_path=tlb["path"] if tlb["enabled"] else None,
        tlb_stride_bytes=tlb["stride_bytes"],
        tlb_skew_bytes=tlb["line_skew_bytes"],
        tlb_footprints_bytes=tuple(tlb_sizes),
        time_budget_s=float(section["time_budget_s"]),
        memory_fraction=float(section["memory_fraction"]),
    )


def footprints(sweep: NodeSweep, l2_bytes: int | None) -> dict[str, int | None]:
    """The chase footprints: an `auto` one is a quarter of the L2 (inside it) or four times it
    (beyond it), rounded down to a whole stride; None where the L2 size is unknown."""
    out = dict(sweep.footprints_bytes)
    s = sweep.stride_bytes
    for name, factor in (("l2", 0.25), ("beyond", 4.0)):
        if out[name] is None and l2_bytes:
            out[name] = max(s, int(l2_bytes * factor) // s * s)
    return out


def sm_counts(sweep: NodeSweep, sm_count: int) -> tuple[int, ...]:
    if sweep.sms is not None:
        return tuple(n for n in sweep.sms if n <= sm_count)
    powers = [1 << k for k in range(sm_count.bit_length()) if (1 << k) <= sm_count]
    return tuple(sorted({*powers, sm_count}))


class _Rows:
    """The trace's rows, one frame per measurement, every column filled."""

    def __init__(self, facts: NodeFacts) -> None:
        self.frames: list[pd.DataFrame] = []
        self.names = dict(zip(facts.gpus, facts.names, strict=True))

    def add(self, n: int, src: int, dst: int, **columns: Any) -> None:
        base = {**_DEFAULTS, "src_gpu": src, "dst_gpu": dst}
        base["src_name"], base["dst_name"] = self.names[src], self.names[dst]
        data = {}
        for col, default in base.items():
            v = columns.get(col, default)
            data[col] = v if isinstance(v, np.ndarray) else [v] * n
        self.frames.append(pd.DataFrame(data))

    def frame(self) -> pd.DataFrame:
        empty = pd.DataFrame({f.name: pd.Series(dtype=f.type.to_pandas_dtype()) for f in SCHEMA})
        return pd.concat([empty, *self.frames], ignore_index=True)


class _Budget:
    """The time and memory bounds of the sweep."""

    def __init__(self, sweep: NodeSweep, facts: NodeFacts) -> None:
        self.deadline = time.monotonic() + sweep.time_budget_s
        self.sweep = sweep
        self.free = dict(zip(facts.gpus, facts.free_memory_bytes, strict=True))
        self.warned = False

    def why_not(self, gpu: int, nbytes: int) -> str | None:
        if time.monotonic() > self.deadline:
            if not self.warned:
                log.warning(
                    "time_budget_s %.0f s spent: the rest is skipped", self.sweep.time_budget_s
                )
                self.warned = True
            return f"time_budget_s {self.sweep.time_budget_s:g} s spent"
        free = self.free.get(gpu)
        if free is not None and nbytes > self.sweep.memory_fraction * free:
            return (
                f"{nbytes} bytes exceed memory_fraction {self.sweep.memory_fraction:g} of the "
                f"{free} bytes free on GPU {gpu}"
            )
        return None


def _chase_works(sweep: NodeSweep, src: int, dst: int, sizes: dict[str, int | None]):
    for path in sweep.paths:
        for name in FOOTPRINTS:
            size = sizes[name]
            if size is None:
                continue
            one_pass = chain_pass_steps(array_bytes=size, stride_bytes=sweep.stride_bytes)
            # inside a cache: one untimed pass first. Beyond the L2 (four times it), half a pass:
            # every array of the sweep starts at the same address of its GPU, so the lines the
            # chases before left in the caches are walked over and evicted (twice the L2) before
            # the timed loads, which reach lines none of them left there
            warmup = one_pass if name != "beyond" else one_pass // 2
            yield (
                name,
                PeerChaseWork(src, dst, path, size, sweep.stride_bytes, warmup, sweep.record_steps),
            )


TLB_MAX_RECORD_STEPS = 4096
CAPACITY_GROWTH = 2**0.5


def capacity_footprints(start: int, stop: int, stride: int) -> tuple[int, ...]:
    """Footprints from `start` to `stop` growing by sqrt(2), each a whole number of strides."""
    sizes: list[int] = []
    x = float(start)
    while x <= stop:
        size = max(stride, int(x) // stride * stride)
        if not sizes or size > sizes[-1]:
            sizes.append(size)
        x *= CAPACITY_GROWTH
    return tuple(sizes)


def _capacity_works(sweep: NodeSweep, src: int, dst: int, l2_bytes: int | None):
    start = sweep.footprints_bytes["l1"]
    stop = sweep.capacity_stop_bytes or (2 * l2_bytes if l2_bytes else None)
    if src == dst or not sweep.capacity_paths or start is None or stop is None:
        return
    for path in sweep.capacity_paths:
        for size in capacity_footprints(start, stop, sweep.stride_bytes):
            warmup = chain_pass_steps(array_bytes=size, stride_bytes=sweep.stride_bytes)
            yield PeerChaseWork(
                src, dst, path, size, sweep.stride_bytes, warmup, sweep.capacity_record_steps
            )


def _tlb_works(sweep: NodeSweep, src: int, dst: int):
    """The TLB series: one untimed pass over the pages, then one timed pass (at most
    TLB_MAX_RECORD_STEPS loads)."""
    if sweep.tlb_path is None:
        return
    for size in sweep.tlb_footprints_bytes:
        pages = chain_pass_steps(array_bytes=size, stride_bytes=sweep.tlb_stride_bytes)
        steps = max(16, min(pages, TLB_MAX_RECORD_STEPS))
        yield PeerChaseWork(
            src,
            dst,
            sweep.tlb_path,
            size,
            sweep.tlb_stride_bytes,
            pages,
            steps,
            skew_bytes=sweep.tlb_skew_bytes,
        )


def _pair_works(sweep: NodeSweep, facts: NodeFacts, src: int, dst: int, sizes: dict):
    """(label, work, bytes it allocates on dst) of one ordered pair (src == dst: baseline)."""
    for name, work in _chase_works(sweep, src, dst, sizes):
        yield name, work, work.footprint_bytes
    for work in _capacity_works(sweep, src, dst, facts.l2_bytes):
        yield "capacity", work, work.footprint_bytes
    for work in _tlb_works(sweep, src, dst):
        yield "tlb", work, work.footprint_bytes
    fp = sweep.atomic_footprint_bytes
    steps = chain_pass_steps(array_bytes=fp, stride_bytes=sweep.stride_bytes)
    yield "", PeerAtomicWork(src, dst, fp, sweep.stride_bytes, steps, sweep.atomic_record_steps), fp
    if src == dst:
        return
    nbytes = sweep.stream_bytes or max(16, 4 * (facts.l2_bytes or 1 << 24) // 16 * 16)
    for direction in sweep.directions:
        for access in sweep.access_bytes:
            for sms in sm_counts(sweep, facts.sm_count):
                yield (
                    "",
                    PeerStreamWork(
                        src,
                        dst,
                        direction,
                        sms,
                        access,
                        sweep.threads_per_block,
                        nbytes,
                        sweep.repetitions,
                    ),
                    nbytes,
                )
    for b in sweep.copy_bytes:
        yield "", PeerCopyWork(src, dst, b, sweep.repetitions), b


def _record(rows: _Rows, label: str, work: Any, result: Any) -> None:
    s, d = work.src, work.dst
    if isinstance(work, PeerChaseWork | PeerAtomicWork):
        lat = np.asarray(result.latency_cycles, dtype=np.int64)
        rows.add(
            len(lat),
            s,
            d,
            kind="chase" if isinstance(work, PeerChaseWork) else "atomic",
            path=getattr(work, "path", ""),
            footprint=label,
            footprint_bytes=work.footprint_bytes,
            stride_bytes=work.stride_bytes,
            step=np.arange(len(lat), dtype=np.int32),
            latency_cycles=lat,
            sm_clock_mhz=result.sm_clock_mhz,
            detail=WALK_LEFT_CHAIN if getattr(result, "walk_ok", None) is False else "",
        )
        return
    ns = np.asarray(result.elapsed_ns, dtype=np.float64)
    stream = isinstance(work, PeerStreamWork)
    rows.add(
        len(ns),
        s,
        d,
        kind="stream" if stream else "copy",
        direction=work.direction if stream else "",
        sms=work.sms if stream else 0,
        access_bytes=work.access_bytes if stream else 0,
        bytes_moved=work.bytes_total,
        repetition=np.arange(len(ns), dtype=np.int16),
        elapsed_ns=ns,
        sm_clock_mhz=result.sm_clock_mhz,
        detail=getattr(result, "method", ""),
    )


def _describe(work: Any, label: str) -> str:
    kind = type(work).__name__.removeprefix("Peer").removesuffix("Work").lower()
    parts = [kind, getattr(work, "path", ""), label, getattr(work, "direction", "")]
    if isinstance(work, PeerStreamWork):
        parts += [f"{work.sms} SMs", f"{work.access_bytes} B"]
    if isinstance(work, PeerCopyWork):
        parts.append(f"{work.bytes_total} B")
    return " ".join(p for p in parts if p)


def run(
    backend: Backend,
    sweep: NodeSweep,
    *,
    device: DeviceEntry,
    inputs: dict | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Run the node sweep from `device` (the node's first GPU on a GPU host)."""
    facts: NodeFacts = backend.run(
        NodeQuery(gpus=tuple(i for _, i in sweep.gpus), names=tuple(n for n, _ in sweep.gpus))
    )
    rows = _Rows(facts)
    budget = _Budget(sweep, facts)
    for gpu, identity in zip(facts.gpus, facts.identities, strict=False):
        rows.add(1, gpu, gpu, kind="gpu", detail=json.dumps(identity, sort_keys=True))
    for link in facts.links:
        rows.add(
            1,
            link.src,
            link.dst,
            kind="link",
            peer_access=link.peer_access,
            link_kind=link.link_kind,
            nvlink_count=link.nvlink_count,
            nvlink_version=link.nvlink_version,
            common_ancestor=link.common_ancestor,
        )
    access = {(k.src, k.dst) for k in facts.links if k.peer_access}
    sizes = footprints(sweep, facts.l2_bytes)
    pairs = [(s, d) for s in facts.gpus for d in facts.gpus if s == d or (s, d) in access]
    works = [
        (label, w, n) for s, d in pairs for label, w, n in _pair_works(sweep, facts, s, d, sizes)
    ]
    for i, (label, work, nbytes) in enumerate(works):
        reason = budget.why_not(work.dst, nbytes)
        if reason is None:
            _record(rows, label, work, backend.run(work, seed=i))
        else:
            rows.add(
                1,
                work.src,
                work.dst,
                kind="skipped",
                path=getattr(work, "path", ""),
                footprint=label,
                direction=getattr(work, "direction", ""),
                detail=f"{_describe(work, label)}: {reason}",
            )
        if progress:
            progress(i + 1, len(works))
    return rows.frame()


__all__ = ["DIRECTIONS", "NAME", "PATHS", "SCHEMA", "NodeSweep", "parse_params", "run"]
