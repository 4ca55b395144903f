"""The GPUs of a node and the links between them: peer loads, streams, copies and atomics.

A profile's ``links:`` block makes its GPU a node of ``gpus`` identical GPUs. Every ordered pair
(src, dst) has a link: ``default`` and, per pair, the keys a ``pairs`` entry overrides. A link is

- **a latency**: ``latency_cycles`` (SM cycles of src) added to every load src sends to dst's
  memory, the round trip over the link;
- **a cache policy for peer lines**: ``peer_caches`` names the caches of src that keep lines
  of dst's memory; a load on a path walks those of the path's caches (nearest first, their own
  sets and replacement, cache.py); a load that misses them all crosses the link and is served
  by dst's memory-side caches (the caches of dst's ``cg`` path: its L2), else by dst's DRAM.
  The caches keep their lines from launch to launch except those off the memory side (the
  L1s), which each launch finds empty (``NodeModel``);
- **a bandwidth**: ``bandwidth_gbps`` of raw link per direction, moved in packets of at most
  ``packet_payload_bytes`` (SM traffic) or ``copy_packet_bytes`` (copy engines) that each carry
  ``header_bytes`` more; SM traffic is a closed queueing network (sim/throughput.py's
  mean-value analysis): every SM keeps ``requests_per_sm`` warp-wide accesses in flight, a read
  waits the link's round trip, a posted write half of it; a copy costs ``copy_setup_ns`` and
  then its bytes at the copy packets' rate;
- **atomics**: performed at dst's L2 (the memory-side cache), ``atomic_cycles`` beyond an L2
  access, plus the link's round trip for a peer;
- NVML-like facts: ``kind`` (nvlink or pcie), ``count`` and ``version`` of the links, and the
  ``common_ancestor`` of the pair in the PCIe topology; ``peer_access: false`` says the pair has
  none (nothing is measured on it).

- **translation**: a load (or atomic) is translated by src's TLB levels (the profile's `tlbs`,
  sim/tlb.py) whatever memory it reaches, as unified addressing does, unless it hits a cache
  before the first translated one of its path (hierarchy.py's rule); every level that missed
  adds its miss penalty.

What is not modelled: contention of several pairs at once (each measurement runs alone, as the
experiment runs them), and a peer translation costing more than a local one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from ..exceptions import ProfileError
from .cache import Cache
from .noise import Noise, Rng
from .throughput import mva_throughput
from .tlb import Tlb

WARP_THREADS = 32
TIMING_JITTER = 0.004  # relative standard deviation of a simulated launch's elapsed time


@dataclass(frozen=True)
class LinkSpec:
    """One directed link (src's view of dst's memory)."""

    kind: str = "nvlink"
    count: int = 1
    version: int = 0
    common_ancestor: str = ""
    peer_access: bool = True
    latency_cycles: int = 600
    bandwidth_gbps: float = 50.0
    header_bytes: int = 16
    packet_payload_bytes: int = 128
    copy_packet_bytes: int = 256
    requests_per_sm: int = 32
    copy_setup_ns: float = 5000.0
    atomic_cycles: int = 60
    peer_caches: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("latency_cycles", "header_bytes", "atomic_cycles"):
            if getattr(self, name) < 0:
                raise ProfileError(f"{name}: {getattr(self, name)} is negative; allowed: >= 0")
        for name in ("bandwidth_gbps", "packet_payload_bytes", "copy_packet_bytes"):
            if getattr(self, name) <= 0:
                raise ProfileError(f"{name}: {getattr(self, name)} must be positive")
        if self.requests_per_sm < 1:
            raise ProfileError(f"requests_per_sm: {self.requests_per_sm}; allowed: >= 1")


@dataclass(frozen=True)
class NodeSpec:
    gpus: int
    links: Mapping[tuple[int, int], LinkSpec]  # every ordered pair of different GPUs
    default: LinkSpec = LinkSpec()

    def link(self, src: int, dst: int) -> LinkSpec:
        return self.links[(src, dst)]


_LINK_KEYS = {f.name for f in fields(LinkSpec)}


def _link(base: LinkSpec, d: Mapping[str, Any], where: str, caches: Mapping[str, Any]) -> LinkSpec:
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items() if k in _LINK_KEYS}
    try:
        link = replace(base, **values)
    except ProfileError as exc:
        raise ProfileError(f"{where}.{exc}") from None
    unknown = [c for c in link.peer_caches if c not in caches]
    if unknown:
        raise ProfileError(
            f"{where}.peer_caches: {unknown} are not caches of this profile; allowed: "
            f"{', '.join(caches)}"
        )
    return link


def node_spec(d: Mapping[str, Any] | None, caches: Mapping[str, Any]) -> NodeSpec | None:
    """The typed ``links:`` block (None: the profile is one GPU alone). Raises ProfileError
    with the field's path (`links.pairs[2].dst`) for what the schema cannot check."""
    if d is None:
        return None
    gpus = int(d["gpus"])
    default = _link(LinkSpec(), d.get("default", {}), "links.default", caches)
    links = {(s, t): default for s in range(gpus) for t in range(gpus) if s != t}
    for i, pair in enumerate(d.get("pairs", [])):
        where = f"links.pairs[{i}]"
        src, dst = int(pair["src"]), int(pair["dst"])
        for key, gpu in (("src", src), ("dst", dst)):
            if not 0 <= gpu < gpus:
                raise ProfileError(
                    f"{where}.{key}: {gpu} is not a GPU of the node; allowed: 0..{gpus - 1}"
                )
        if src == dst:
            raise ProfileError(f"{where}: src and dst are both {src}; allowed: two different GPUs")
        links[(src, dst)] = _link(links[(src, dst)], pair, where, caches)
    return NodeSpec(gpus=gpus, links=links, default=default)


OWNER_SHIFT = 48  # a line of GPU g's memory is cached under (g << OWNER_SHIFT) + its address


class NodeModel:
    """The node of a profile with a ``links:`` block, one launch after another. Every GPU has
    its own copy of each cache and TLB level of the profile, which keeps its lines from launch
    to launch, as a GPU's L2 and TLBs do; the caches a launch finds invalidated are the ones
    off the memory side (not on the ``cg`` path: the L1s), which a GPU invalidates for global
    data at a kernel's start. A cache holds lines of several GPUs' memories, each memory an
    address space of its own (unified addressing)."""

    def __init__(self, profile: Any, *, seed: int) -> None:
        if profile.links is None:
            raise ProfileError(f"{profile.source}: the profile has no links block (not a node)")
        self.profile = profile
        self.spec: NodeSpec = profile.links
        self.seed = seed
        self.rng = Rng(seed=seed)  # one replacement stream for every structure of the node
        self.memory_side = tuple(profile.paths.get("cg", ()))
        self._caches: dict[tuple[int, str], Cache] = {}
        self._tlbs: dict[int, Tlb | None] = {}

    # ---- latencies -----------------------------------------------------------------------
    def cache(self, gpu: int, name: str) -> Cache:
        key = (gpu, name)
        if key not in self._caches:
            self._caches[key] = Cache(self.profile.caches[name], rng=self.rng)
        return self._caches[key]

    def tlb(self, gpu: int) -> Tlb | None:
        if gpu not in self._tlbs:
            tlbs = self.profile.tlbs
            self._tlbs[gpu] = Tlb(tlbs, rng=self.rng) if tlbs is not None else None
        return self._tlbs[gpu]

    def launch(self, gpu: int) -> None:
        """A kernel starts on `gpu`: its caches off the memory side start empty."""
        for (g, name), cache in self._caches.items():
            if g == gpu and name not in self.memory_side:
                cache.reset()

    def _walk(self, gpu: int, names) -> list[tuple[Any, Cache]]:
        return [(self.profile.caches[n], self.cache(gpu, n)) for n in names]

    def chase(
        self, src: int, dst: int, path: str, addresses_bytes: np.ndarray, *, seed: int
    ) -> np.ndarray:
        """Latency in cycles of each load of a walk (one launch) by src over dst's memory."""
        p = self.profile
        if path not in p.paths:
            raise ProfileError(f"{p.source}: the profile has no load path {path!r}")
        self.launch(src)
        noise = Noise(p.noise, seed=seed)
        on_path = p.paths[path]
        if src == dst:
            near, far, link_cycles = self._walk(src, on_path), [], 0
        else:
            link = self.spec.link(src, dst)
            near = self._walk(src, [c for c in on_path if c in link.peer_caches])
            far, link_cycles = self._walk(dst, self.memory_side), link.latency_cycles
        tlb, owner = self.tlb(src), dst << OWNER_SHIFT
        out = np.empty(len(addresses_bytes), dtype=np.int64)
        for i, a in enumerate(addresses_bytes.tolist()):
            out[i] = self._load(near, far, path, owner + a, link_cycles, tlb) + noise.draw()
        return np.maximum(out, 0)

    def _load(self, near, far, path: str, address: int, link_cycles: int, tlb) -> int:
        penalty = None  # None: not yet translated
        for spec, cache in near:
            if penalty is None and spec.translated and tlb is not None:
                penalty = tlb.translate(address).penalty_cycles
            if cache.access(address).hit:
                return spec.hit_latency_on(path) + (penalty or 0)
        if penalty is None:
            penalty = tlb.translate(address).penalty_cycles if tlb is not None else 0
        for spec, cache in far:
            if cache.access(address).hit:
                return link_cycles + spec.hit_latency_on("cg") + penalty
        return link_cycles + self.profile.dram.latency_cycles + penalty

    def atomics(self, src: int, dst: int, addresses_bytes: np.ndarray, *, seed: int) -> np.ndarray:
        """Latency of each atomic of a walk (one launch) by src over dst's memory: at dst's
        L2 (its memory-side caches)."""
        self.launch(src)
        noise = Noise(self.profile.noise, seed=seed)
        l2 = self._walk(dst, self.memory_side)
        link = None if src == dst else self.spec.link(src, dst)
        link_cycles = 0 if link is None else link.latency_cycles
        extra = (link or self.spec.default).atomic_cycles
        tlb, owner = self.tlb(src), dst << OWNER_SHIFT
        out = np.empty(len(addresses_bytes), dtype=np.int64)
        for i, a in enumerate(addresses_bytes.tolist()):
            out[i] = self._load((), l2, "cg", owner + a, link_cycles, tlb) + extra + noise.draw()
        return np.maximum(out, 0)

    # ---- bandwidths ----------------------------------------------------------------------
    def _jitter(self, n: int, seed: int) -> np.ndarray:
        return 1.0 + TIMING_JITTER * np.random.default_rng(seed).standard_normal(n)

    def stream_ns(
        self,
        src: int,
        dst: int,
        *,
        direction: str,
        sms: int,
        access_bytes: int,
        bytes_total: int,
        repetitions: int,
        seed: int,
    ) -> np.ndarray:
        """Elapsed ns of `repetitions` SM-driven reads (or writes) of dst's memory by src."""
        link = self.spec.link(src, dst)
        warp_bytes = WARP_THREADS * access_bytes
        packets = math.ceil(warp_bytes / link.packet_payload_bytes)
        demand_ns = (warp_bytes + packets * link.header_bytes) / link.bandwidth_gbps
        round_trip_ns = link.latency_cycles * 1e3 / self.profile.clocks.sm_mhz
        delay_ns = round_trip_ns if direction == "read" else round_trip_ns / 2
        accesses_per_ns = mva_throughput(sms * link.requests_per_sm, demand_ns, delay_ns)
        gbps = accesses_per_ns * warp_bytes
        return bytes_total / gbps * self._jitter(repetitions, seed)

    def copy_ns(self, src: int, dst: int, *, bytes_total: int, repetitions: int, seed: int):
        """Elapsed ns of `repetitions` copy-engine copies of `bytes_total` from src to dst."""
        link = self.spec.link(src, dst)
        payload = link.copy_packet_bytes
        gbps = link.bandwidth_gbps * payload / (payload + link.header_bytes)
        return (link.copy_setup_ns + bytes_total / gbps) * self._jitter(repetitions, seed)
