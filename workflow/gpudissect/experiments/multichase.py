"""The multi-thread P-chase (Größler's thesis, Sec. 4.5 and 4.6): several threads of one block,
each walking its own chain on its own load path, in a scripted order.

One work description for both backends (`MultiChaseWork`); the backends register handlers for
it (`backends/multichase_sim.py`, `backends/multichase_cuda.py`, kernel `kernels/multichase.cu`).

Each walker is one thread (`thread`, its index in the block; its warp is `thread // 32`) that
walks `j = A[j]` from `start_index` on `path`. Chains of the global paths (ca, cg, nc, tex) live
in `array`, those of the const path in `const_array` (constant memory, at most 64 KiB); indices
are absolute in their array, so every walker's region is its own. The script runs step by step,
with a block-wide barrier between steps: in step k walker `walker` makes `steps` loads from
where it stopped, timed when `record` (every timed load gives a latency and the index it
returned, in script order).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GLOBAL_PATHS = ("ca", "cg", "nc", "tex")
CONST_PATH = "const"
CONST_ELEMENTS = 16384  # 64 KiB of constant memory
WARP_THREADS = 32
MAX_BLOCK_THREADS = 1024
# shared memory the kernel needs besides the records: the script and the walkers (3 words each)
WORDS_PER_ENTRY = 3


@dataclass(frozen=True)
class Walker:
    thread: int
    path: str
    start_index: int

    @property
    def warp(self) -> int:
        return self.thread // WARP_THREADS


@dataclass(frozen=True)
class Step:
    walker: int
    steps: int
    record: bool


@dataclass(frozen=True)
class MultiChaseWork:
    array: np.ndarray  # uint32: the chains of the walkers on global paths
    const_array: np.ndarray | None  # uint32: the chains of walkers on the const path
    walkers: tuple[Walker, ...]
    script: tuple[Step, ...]
    block_threads: int
    shared_buffer_bytes: int

    def __post_init__(self) -> None:
        if self.array.dtype != np.uint32 or (
            self.const_array is not None and self.const_array.dtype != np.uint32
        ):
            raise TypeError("array and const_array must be uint32")
        if not 0 < self.block_threads <= MAX_BLOCK_THREADS:
            raise ValueError(f"block_threads must be in 1..{MAX_BLOCK_THREADS}")
        threads = [w.thread for w in self.walkers]
        if len(set(threads)) != len(threads) or not all(
            0 <= t < self.block_threads for t in threads
        ):
            raise ValueError(f"walker threads {threads} must be distinct and < block_threads")
        for w in self.walkers:
            space = self.space(w)
            if space is None:
                raise ValueError(
                    f"walker on path {w.path!r}: paths are {', '.join(GLOBAL_PATHS)}, const "
                    "(const needs const_array)"
                )
            if not 0 <= w.start_index < len(space):
                raise ValueError(f"walker start {w.start_index} is outside its array")
        if self.const_array is not None and len(self.const_array) > CONST_ELEMENTS:
            raise ValueError(f"const_array holds at most {CONST_ELEMENTS} elements (64 KiB)")
        for s in self.script:
            if not 0 <= s.walker < len(self.walkers) or s.steps < 0:
                raise ValueError(f"script step {s} names no walker or a negative step count")
        if self.shared_bytes_needed > self.shared_buffer_bytes:
            raise ValueError(
                f"shared_buffer_bytes {self.shared_buffer_bytes} cannot hold {self.record_steps} "
                f"records and the script (needs {self.shared_bytes_needed})"
            )

    def space(self, walker: Walker) -> np.ndarray | None:
        """The array `walker` walks."""
        if walker.path == CONST_PATH:
            return self.const_array
        return self.array if walker.path in GLOBAL_PATHS else None

    @property
    def record_steps(self) -> int:
        return sum(s.steps for s in self.script if s.record)

    @property
    def shared_bytes_needed(self) -> int:
        words = 2 * self.record_steps + WORDS_PER_ENTRY * (len(self.script) + len(self.walkers))
        return 4 * words


@dataclass(frozen=True)
class MultiChaseResult:
    latency_cycles: np.ndarray  # uint32, one per timed load, in script order
    indices: np.ndarray  # uint32, the value each timed load returned
    sm_clock_mhz: float


def place_chain(array: np.ndarray, *, first_element: int, elements: int, stride_elements: int):
    """Write a cyclic stride chain of `elements` elements, `stride_elements` apart, starting at
    element `first_element` of `array` (absolute indices); returns the start index."""
    pos = first_element + stride_elements * np.arange(elements, dtype=np.int64)
    array[pos] = np.roll(pos, -1).astype(np.uint32)
    return int(pos[0])
