"""Sim handlers of the node family: the GPUs of a profile's `links:` block (sim/link.py).

A chase walks the same addresses the kernel's chain makes it load (the work's visited elements,
from which the chain a GPU walks is built) through the node model; a
stream and a copy take the model's elapsed times. The link facts are the profile's."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..contract.backend import handles
from ..contract.node import (
    ChaseRecords,
    NodeFacts,
    NodeQuery,
    PairLink,
    PeerAtomicWork,
    PeerChaseWork,
    PeerCopyWork,
    PeerStreamWork,
    Timings,
)
from ..exceptions import DeviceUnavailable
from .seeding import point_seed

if TYPE_CHECKING:
    from .sim import SimBackend


def _model(backend: SimBackend):
    """The node of the backend's profile, kept for the whole sweep (its caches and TLBs keep
    their state from launch to launch)."""
    from ..sim.link import NodeModel

    if backend.profile.links is None:
        raise DeviceUnavailable(
            f"{backend.profile_path}: the profile has no links block, so its GPU is no node; "
            "the node experiment needs one (config/README.md, device profiles: links)"
        )
    model = getattr(backend, "_node_model", None)
    if model is None:
        model = backend._node_model = NodeModel(backend.profile, seed=backend.seed)
    return model


def _walk_bytes(work: PeerChaseWork | PeerAtomicWork, steps: int) -> np.ndarray:
    """The byte addresses of the first `steps` loads: the visited elements, cycle after cycle."""
    visited = work.visited()
    return visited[np.arange(steps) % len(visited)] * 4


@handles("sim", NodeQuery)
def node_facts(backend: SimBackend, query: NodeQuery, **_: object) -> NodeFacts:
    spec = _model(backend).spec
    gpus = tuple(range(spec.gpus))
    links = tuple(
        PairLink(
            src=s,
            dst=d,
            peer_access=link.peer_access,
            link_kind=link.kind,
            nvlink_count=link.count,
            nvlink_version=link.version,
            common_ancestor=link.common_ancestor,
        )
        for (s, d), link in sorted(spec.links.items())
    )
    facts = backend.facts()
    return NodeFacts(
        gpus=gpus,
        names=tuple(f"gpu{k}" for k in gpus),
        links=links,
        l2_bytes=facts.l2_bytes,
        sm_count=facts.sm_count,
        free_memory_bytes=(facts.total_memory_bytes,) * len(gpus),
        identities=tuple(
            {"name": backend.profile.gpu, "profile": backend.profile.name, "gpu": k} for k in gpus
        ),
    )


@handles("sim", PeerChaseWork)
def peer_chase(backend: SimBackend, work: PeerChaseWork, *, seed: int = 0) -> ChaseRecords:
    steps = work.warmup_steps + work.record_steps
    addresses = _walk_bytes(work, steps)
    latency = _model(backend).chase(
        work.src, work.dst, work.path, addresses, seed=point_seed(backend.seed, seed)
    )
    return ChaseRecords(
        latency_cycles=latency[work.warmup_steps :].astype(np.uint32),
        sm_clock_mhz=float(backend.profile.clocks.sm_mhz),
    )


@handles("sim", PeerAtomicWork)
def peer_atomics(backend: SimBackend, work: PeerAtomicWork, *, seed: int = 0) -> ChaseRecords:
    steps = work.warmup_steps + work.record_steps
    addresses = _walk_bytes(work, steps)
    latency = _model(backend).atomics(
        work.src, work.dst, addresses, seed=point_seed(backend.seed, seed)
    )
    return ChaseRecords(
        latency_cycles=latency[work.warmup_steps :].astype(np.uint32),
        sm_clock_mhz=float(backend.profile.clocks.sm_mhz),
    )


@handles("sim", PeerStreamWork)
def peer_stream(backend: SimBackend, work: PeerStreamWork, *, seed: int = 0) -> Timings:
    ns = _model(backend).stream_ns(
        work.src,
        work.dst,
        direction=work.direction,
        sms=work.sms,
        access_bytes=work.access_bytes,
        bytes_total=work.bytes_total,
        repetitions=work.repetitions,
        seed=point_seed(backend.seed, seed),
    )
    return Timings(elapsed_ns=ns, sm_clock_mhz=float(backend.profile.clocks.sm_mhz))


@handles("sim", PeerCopyWork)
def peer_copy(backend: SimBackend, work: PeerCopyWork, *, seed: int = 0) -> Timings:
    ns = _model(backend).copy_ns(
        work.src,
        work.dst,
        bytes_total=work.bytes_total,
        repetitions=work.repetitions,
        seed=point_seed(backend.seed, seed),
    )
    return Timings(
        elapsed_ns=ns, sm_clock_mhz=float(backend.profile.clocks.sm_mhz), method="link model"
    )
