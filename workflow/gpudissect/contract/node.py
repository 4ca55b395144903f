"""The work of a peer-memory measurement across the GPUs of one node, and what it returns.

GPUs are named by their ordinal in the node (`src`, `dst`: the CUDA device index on a GPU
host, the profile's GPU number on the simulator). The GPU `src` runs the kernel; the memory it
reads, writes or updates lies on GPU `dst` (`src == dst`: its own memory, the local baseline).
Both backends run the same work types (experiments.node builds them) and return the same
results.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..patterns import stride_chain

PATHS = ("ca", "cg", "nc")
DIRECTIONS = ("read", "write")


@dataclass(frozen=True)
class NodeQuery:
    """What the node is: its GPUs and, for every ordered pair, whether `src` can access
    `dst`'s memory and what the link is (NVML's view on a GPU host). `gpus` and `names`: the
    CUDA indices of the node's GPUs and their names in the config (empty on the simulator: the
    profile's links block says how many GPUs there are)."""

    gpus: tuple[int, ...] = ()
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class PairLink:
    src: int
    dst: int
    peer_access: bool
    link_kind: str  # nvlink, nvswitch, pcie or unknown
    nvlink_count: int  # links joining the pair (0: none, or NVML does not tell)
    nvlink_version: int  # 0 where unknown
    common_ancestor: str  # NVML topology level (nvmlDeviceGetTopologyCommonAncestor), or ""


@dataclass(frozen=True)
class NodeFacts:
    gpus: tuple[int, ...]
    names: tuple[str, ...]  # one per GPU, the same order
    links: tuple[PairLink, ...]  # every ordered pair of different GPUs
    l2_bytes: int | None  # of GPU gpus[0] (footprints around the L2 start from it)
    sm_count: int
    free_memory_bytes: tuple[int | None, ...]  # per GPU, now


@dataclass(frozen=True)
class PeerChaseWork:
    """One thread of one block of GPU `src` walks `j = A[j]` (uint32 element indices, a chain
    of `footprint_bytes` at `stride_bytes`) in GPU `dst`'s memory through load path `path`:
    `warmup_steps` untimed loads, then `record_steps` timed ones."""

    src: int
    dst: int
    path: str
    footprint_bytes: int
    stride_bytes: int
    warmup_steps: int
    record_steps: int

    def __post_init__(self) -> None:
        if self.path not in PATHS:
            raise ValueError(f"path must be one of {PATHS}, got {self.path!r}")
        if self.stride_bytes % 4 or self.footprint_bytes < self.stride_bytes:
            raise ValueError("stride_bytes must be a multiple of 4 and fit in footprint_bytes")

    @property
    def elements(self) -> int:
        return self.footprint_bytes // 4

    def chain(self) -> np.ndarray:
        return stride_chain(array_bytes=self.footprint_bytes, stride_bytes=self.stride_bytes)


@dataclass(frozen=True)
class ChaseRecords:
    latency_cycles: np.ndarray  # one per recorded load
    sm_clock_mhz: float


@dataclass(frozen=True)
class PeerStreamWork:
    """SM-driven traffic: `sms` blocks (one per SM) of `threads_per_block` threads of GPU `src`
    read (or write) `bytes_total` of GPU `dst`'s memory in accesses of `access_bytes` (4, 8 or
    16 bytes a thread), in a grid-stride loop; timed `repetitions` times after one untimed
    launch."""

    src: int
    dst: int
    direction: str
    sms: int
    access_bytes: int
    threads_per_block: int
    bytes_total: int
    repetitions: int

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {self.direction!r}")
        if self.access_bytes not in (4, 8, 16):
            raise ValueError(f"access_bytes must be 4, 8 or 16, got {self.access_bytes}")
        if self.bytes_total % 16:
            raise ValueError("bytes_total must be a multiple of 16")


@dataclass(frozen=True)
class PeerCopyWork:
    """A copy-engine copy (cuMemcpyPeer) of `bytes_total` from GPU `src`'s memory to GPU
    `dst`'s, timed `repetitions` times after one untimed copy."""

    src: int
    dst: int
    bytes_total: int
    repetitions: int


@dataclass(frozen=True)
class Timings:
    elapsed_ns: np.ndarray  # one per timed repetition
    sm_clock_mhz: float


@dataclass(frozen=True)
class PeerAtomicWork:
    """One thread of GPU `src` walks the chain of `footprint_bytes` at `stride_bytes` in GPU
    `dst`'s memory with atomics, `j = atomicAdd(&A[j], 0)` (each one waits for the last one's
    old value), timing each one: `warmup_steps` untimed, then `record_steps` timed. Returns
    ChaseRecords."""

    src: int
    dst: int
    footprint_bytes: int
    stride_bytes: int
    warmup_steps: int
    record_steps: int

    def chain(self) -> np.ndarray:
        return stride_chain(array_bytes=self.footprint_bytes, stride_bytes=self.stride_bytes)
