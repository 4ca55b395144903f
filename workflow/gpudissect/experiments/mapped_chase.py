"""P-chases over a virtual range whose physical backing the experiment chooses (`tlb_mappings`).

The range is `chunks` chunks of `chunk_bytes` (the driver's minimum mapping granularity: 2 MiB
on Hopper). Its `PhysicalLayout` says which physical memory lies behind each virtual chunk:

- `contiguous`: one physical allocation of the whole range, mapped in order;
- `scattered`: one physical allocation per mapped chunk, allocated in order and mapped in a
  shuffled order (seeded) in which no mapped chunk is followed by the allocation made right
  after or right before its own, so no two neighbouring virtual chunks are backed by
  neighbouring physical allocations and no aligned block of chunks is physically contiguous.
  A scattered layout may map only some chunks (`mapped`): a sparse walk over a range larger
  than the GPU's memory needs only the chunks it touches.

On a GPU the range is reserved, allocated and mapped through the CUDA virtual-memory API
(`backends.mapping_cuda`); the simulator places virtual chunk v in physical chunk
`chunk_order()[v]` (`backends.mapping_sim`, `sim.tlb.PageMap`). Both backends keep the last
mapping across launches (the walks of growing length reuse it) until `ReleaseMapping`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..contract.backend import ChaseWork
from ..patterns import distinct

LAYOUTS = ("contiguous", "scattered")


def scattered_order(chunks: int, seed: int) -> np.ndarray:
    """A seeded order of `chunks` physical chunks in which no two neighbouring entries differ
    by one (for chunks >= 4; fewer cannot avoid it)."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(chunks).astype(np.int64)
    if chunks < 4:
        return order
    for _ in range(1000):
        bad = np.flatnonzero(np.abs(np.diff(order)) == 1)
        if bad.size == 0:
            break
        for i in bad:
            j = int(rng.integers(chunks))
            order[i + 1], order[j] = order[j], order[i + 1]
    return order


@dataclass(frozen=True)
class PhysicalLayout:
    kind: str  # one of LAYOUTS
    chunks: int  # virtual chunks of the range
    chunk_bytes: int
    seed: int = 0  # of the scattered order
    mapped: tuple[int, ...] | None = None  # the chunks mapped, ascending (None: all)

    def __post_init__(self) -> None:
        if self.kind not in LAYOUTS:
            raise ValueError(f"layout {self.kind!r} is unknown; allowed: {list(LAYOUTS)}")
        if self.chunks < 1 or self.chunk_bytes < 1:
            raise ValueError("a layout needs at least one chunk of at least one byte")
        if self.mapped is not None:
            if self.kind == "contiguous":
                raise ValueError("a contiguous layout maps its whole range")
            m = np.asarray(self.mapped)
            if m.size == 0 or (np.diff(m) <= 0).any() or m[0] < 0 or m[-1] >= self.chunks:
                raise ValueError("mapped lists distinct chunks of the range, ascending")

    def mapped_chunks(self) -> np.ndarray:
        """The virtual chunks that are mapped, ascending."""
        if self.mapped is None:
            return np.arange(self.chunks, dtype=np.int64)
        return np.asarray(self.mapped, dtype=np.int64)

    def maps(self, chunks: np.ndarray) -> bool:
        """Whether every one of `chunks` is mapped (asked of every launch of a sweep: the
        tuple of mapped chunks, tens of thousands long, becomes an array once)."""
        if self.mapped is None:
            return bool(np.all((chunks >= 0) & (chunks < self.chunks)))
        m = self._mapped_sorted
        at = np.minimum(np.searchsorted(m, chunks), len(m) - 1)
        return bool(np.all(m[at] == chunks))

    @cached_property
    def _mapped_sorted(self) -> np.ndarray:
        m = np.asarray(self.mapped, dtype=np.int64)
        m.setflags(write=False)
        return m

    def allocation_order(self) -> np.ndarray:
        """For each mapped chunk (ascending), the physical allocation behind it (allocations
        made one per mapped chunk, numbered in the order they are made)."""
        n = len(self.mapped_chunks())
        if self.kind == "contiguous":
            return np.arange(n, dtype=np.int64)
        return scattered_order(n, self.seed)

    @property
    def size_bytes(self) -> int:
        return self.chunks * self.chunk_bytes

    def chunk_order(self) -> np.ndarray:
        """The physical chunk behind each virtual chunk, physical chunks numbered in allocation
        order from 0; the unmapped chunks get the numbers after them, in order (nothing reads
        them)."""
        if self.kind == "contiguous":
            return np.arange(self.chunks, dtype=np.int64)
        mapped = self.mapped_chunks()
        frames = np.empty(self.chunks, dtype=np.int64)
        free = np.ones(self.chunks, dtype=bool)
        free[mapped] = False
        frames[mapped] = self.allocation_order()
        frames[free] = len(mapped) + np.arange(int(free.sum()), dtype=np.int64)
        return frames

    def describe(self) -> str:
        n = len(self.mapped_chunks())
        size = f"{n} of {self.chunks} chunks of {self.chunk_bytes / 2**20:g} MiB mapped"
        if self.kind == "contiguous":
            return f"contiguous ({size}, one allocation mapped in order)"
        return f"scattered ({size}, one allocation each, shuffled with seed {self.seed})"


@dataclass(frozen=True)
class MappedChaseWork:
    """A sparse P-chase (`ChaseWork` of 8-byte elements) over the range `layout` maps; element
    positions count from the start of the range."""

    chase: ChaseWork
    layout: PhysicalLayout

    def __post_init__(self) -> None:
        if self.chase.element_bytes != 8 or self.chase.chain is not None:
            raise ValueError("a mapped chase is sparse, with 8-byte elements")
        if self.chase.elements * 8 > self.layout.size_bytes:
            raise ValueError(
                f"the chase spans {self.chase.elements * 8} bytes, more than the mapped "
                f"{self.layout.size_bytes}"
            )
        touched = distinct(self.chase.sparse_positions * 8 // self.layout.chunk_bytes)
        if not self.layout.maps(touched):
            raise ValueError("the chase touches chunks its layout leaves unmapped")


@dataclass(frozen=True)
class ReleaseMapping:
    """Unmap and free the mapping the backend holds (if any)."""
