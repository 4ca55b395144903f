"""The L1/shared carveout: one SM's unified data array split per kernel between the L1 and
shared memory, in the steps the architecture supports (CUDA Programming Guide, "Shared Memory"
of compute capabilities 7.x-10.x: e.g. 0, 8, 16, 32, 64, 100, 132, 164, 196 or 228 KB on 9.0).

A kernel's preference (`cudaFuncAttributePreferredSharedMemoryCarveout`, a percentage of the
largest step) is a hint: the shared partition is the smallest step that is at least the
preference and at least what the kernel's block needs (its shared memory plus the driver's
per-block reserve); the L1 holds what the array keeps beside it. With no preference the
partition is the smallest step the block fits in (the L1 as large as the kernel allows).

The rule is the model: the H100's measured L1 sizes at four carveouts and two shared buffers
(results/reference/FINDINGS.md, the hand-set reference) all follow it with one constant
`data_plus_shared_bytes` (tests/sim/test_carveout.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class CarveoutSpec:
    """The profile's ``carveout:`` block (minus ``cite``)."""

    cache: str  # the cache whose data array the shared memory takes from (l1d)
    shared_steps_bytes: tuple[int, ...]  # the partitions the architecture supports, ascending
    data_plus_shared_bytes: int  # the L1's data bytes plus the shared partition, at every step
    block_reserved_bytes: int = 0  # shared memory the driver keeps per block (1 KB from 8.0)

    def __post_init__(self) -> None:
        steps = tuple(int(s) for s in self.shared_steps_bytes)
        object.__setattr__(self, "shared_steps_bytes", steps)
        if not steps or list(steps) != sorted(set(steps)) or steps[0] < 0:
            raise ValueError(
                f"shared_steps_bytes: {list(steps)} must be distinct non-negative byte counts "
                "in ascending order"
            )
        if self.data_plus_shared_bytes <= steps[-1]:
            raise ValueError(
                f"data_plus_shared_bytes: {self.data_plus_shared_bytes} leaves no L1 beside the "
                f"largest shared step ({steps[-1]} B); allowed: more than {steps[-1]}"
            )
        if not 0 <= self.block_reserved_bytes < max(steps[-1], 1):
            raise ValueError(
                f"block_reserved_bytes: {self.block_reserved_bytes}; allowed: 0 to "
                f"{steps[-1] - 1} (below the largest shared step)"
            )

    @property
    def max_shared_bytes(self) -> int:
        """Shared memory per SM, as the driver reports it (the largest step)."""
        return self.shared_steps_bytes[-1]

    @property
    def max_shared_per_block_bytes(self) -> int:
        """The most a block may opt into (the largest step less the per-block reserve)."""
        return self.shared_steps_bytes[-1] - self.block_reserved_bytes

    def shared_partition_bytes(self, carveout_pct: int | None, block_shared_bytes: int) -> int:
        """The shared partition a kernel gets: the smallest step at least its preference and
        at least what its block needs."""
        need = block_shared_bytes + self.block_reserved_bytes if block_shared_bytes > 0 else 0
        if carveout_pct is not None:
            if not 0 <= carveout_pct <= 100:
                raise ValueError(f"carveout_pct: {carveout_pct}; allowed: 0 to 100")
            need = max(need, math.ceil(carveout_pct * self.max_shared_bytes / 100))
        for step in self.shared_steps_bytes:
            if step >= need:
                return step
        raise ValueError(
            f"a block of {block_shared_bytes} B of shared memory does not fit: at most "
            f"{self.max_shared_per_block_bytes} B per block"
        )

    def l1_data_bytes(self, carveout_pct: int | None, block_shared_bytes: int) -> int:
        """The bytes the L1 holds beside the kernel's shared partition."""
        return self.data_plus_shared_bytes - self.shared_partition_bytes(
            carveout_pct, block_shared_bytes
        )
