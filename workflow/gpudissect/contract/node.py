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
    # per GPU, what identifies it (the driver's name, UUID and PCI bus id on a GPU host; the
    # profile on the simulator): recorded in the trace beside the sweep's own device's info
    identities: tuple[dict, ...] = ()


@dataclass(frozen=True)
class PeerChaseWork:
    """One thread of one block of GPU `src` walks `j = A[j]` (uint32 element indices) over an
    array of `footprint_bytes` in GPU `dst`'s memory through load path `path`: `warmup_steps`
    untimed loads, then `record_steps` timed ones. The walk visits one element every
    `stride_bytes`, the k-th moved `(k x skew_bytes) mod stride_bytes` into its stride (0: the
    plain stride walk; a line size: consecutive strides in consecutive cache sets, so that a
    page-stride walk does not pile its lines into one set), and wraps to the first."""

    src: int
    dst: int
    path: str
    footprint_bytes: int
    stride_bytes: int
    warmup_steps: int
    record_steps: int
    skew_bytes: int = 0

    def __post_init__(self) -> None:
        if self.footprint_bytes // 4 > 2**32:
            raise ValueError("footprint_bytes must hold at most 2^32 4-byte elements")
        if self.path not in PATHS:
            raise ValueError(f"path must be one of {PATHS}, got {self.path!r}")
        if self.stride_bytes % 4 or self.skew_bytes % 4 or self.footprint_bytes < self.stride_bytes:
            raise ValueError(
                "stride_bytes and skew_bytes must be multiples of 4, the stride inside the "
                "footprint"
            )

    def visited(self) -> np.ndarray:
        return visited_elements(self.footprint_bytes, self.stride_bytes, self.skew_bytes)

    def chase_work(self):
        return chase_launch(self, self.path)


def visited_elements(footprint_bytes: int, stride_bytes: int, skew_bytes: int = 0) -> np.ndarray:
    """The element indices one cycle of the walk visits, in order (int64)."""
    step, skew = stride_bytes // 4, skew_bytes // 4
    k = np.arange(footprint_bytes // stride_bytes, dtype=np.int64)
    return k * step + (k * skew) % step


DENSE_MAX_BYTES = 1 << 26  # a chase array up to 64 MiB is written whole, a larger one sparse


def chase_launch(work: PeerChaseWork | PeerAtomicWork, path: str):
    """The P-chase launch of `work` (`contract.backend.ChaseWork`, whose array a GPU writes on
    dst): every visited element holds the next one's index, the last the first's; the array is
    written whole up to DENSE_MAX_BYTES, beyond it only at the visited elements (the rest is
    never read)."""
    from .backend import ChaseWork

    common = dict(
        path=path,
        start_index=0,
        warmup_steps=work.warmup_steps,
        record_steps=work.record_steps,
        shared_buffer_bytes=max(8 * work.record_steps, 1024),
    )
    visited = work.visited()
    following = np.roll(visited, -1).astype(np.uint32)
    if work.footprint_bytes <= DENSE_MAX_BYTES:
        chain = np.zeros(work.footprint_bytes // 4, dtype=np.uint32)
        chain[visited] = following
        return ChaseWork(chain=chain, **common)
    return ChaseWork(
        chain=None,
        array_elements=work.footprint_bytes // 4,
        sparse_positions=visited,
        sparse_next=following,
        **common,
    )


@dataclass(frozen=True)
class ChaseRecords:
    latency_cycles: np.ndarray  # one per recorded load
    sm_clock_mhz: float
    # whether the loads returned the chain's indices, where the backend checks (None: not
    # checked); a walk that left the chain read lines that no longer hold the array
    walk_ok: bool | None = None


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
    method: str = ""  # the driver call a copy used (cuMemcpyPeerAsync, ...); "" for a launch


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

    def visited(self) -> np.ndarray:
        return visited_elements(self.footprint_bytes, self.stride_bytes)

    def chase_work(self):
        return chase_launch(self, "cg")  # the kernel reads the launch's chain, not its path
