"""The backend interface: both backends run the same work and return the same arrays."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .facts import DeviceFacts
from .profile import SweepProfile, profiled_call


@dataclass(frozen=True)
class ChaseWork:
    """One launch of the fine-grained P-chase: exactly what runs, on either backend.

    One thread of one block walks `j = A[j]` from `start_index`: `warmup_steps` untimed loads,
    then `record_steps` timed ones, through load path `path`. The launch has
    `shared_buffer_bytes` of dynamic shared memory (holds the records).

    The array A is either dense (`chain`, uint32, A itself) or sparse, for arrays of hundreds of
    MB of which the walk visits few elements: `array_elements` elements of which only
    `sparse_positions[i]` (int64) hold a value, `sparse_next[i]` (uint32); the rest is never read.
    A sparse array may have 8-byte elements (`element_bytes=8`, `sparse_next` uint64): the
    kernel then follows 64-bit indices, for arrays past the 16 GiB of 2^32 4-byte elements.
    """

    path: str
    chain: np.ndarray | None  # uint32 element indices (the device array's contents)
    start_index: int
    warmup_steps: int
    record_steps: int
    shared_buffer_bytes: int
    element_bytes: int = 4
    array_elements: int | None = None
    sparse_positions: np.ndarray | None = None
    sparse_next: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.element_bytes not in (4, 8):
            raise ValueError(f"element_bytes must be 4 or 8, got {self.element_bytes}")
        if self.element_bytes == 8 and self.chain is not None:
            raise ValueError("8-byte elements need a sparse chain (sparse_positions, sparse_next)")
        if self.chain is not None:
            if self.chain.dtype != np.uint32:
                raise TypeError(f"chain must be uint32, got {self.chain.dtype}")
            if self.sparse_positions is not None:
                raise ValueError("give either a dense chain or sparse positions, not both")
        else:
            if self.sparse_positions is None or self.sparse_next is None:
                raise ValueError("a chase needs a dense chain or sparse positions and next")
            dtype = np.uint32 if self.element_bytes == 4 else np.uint64
            if self.sparse_next.dtype != dtype or len(self.sparse_next) != len(
                self.sparse_positions
            ):
                raise TypeError(
                    f"sparse_next must be {np.dtype(dtype).name} ({self.element_bytes}-byte "
                    "elements), one per sparse position"
                )
            if not self.array_elements or int(self.sparse_positions.max()) >= self.array_elements:
                raise ValueError("array_elements must cover every sparse position")
        if 8 * self.record_steps > self.shared_buffer_bytes:
            raise ValueError(
                f"shared_buffer_bytes {self.shared_buffer_bytes} cannot hold "
                f"{self.record_steps} records of 8 bytes"
            )

    @property
    def elements(self) -> int:
        """Elements of the array A (its bytes: elements * element_bytes)."""
        return len(self.chain) if self.chain is not None else int(self.array_elements)

    def walk(self, steps: int) -> np.ndarray:
        """Element positions of the first `steps` loads (what the kernel reads, in order)."""
        out = np.empty(steps, dtype=np.int64)
        if self.chain is not None:
            nxt = self.chain
            j = self.start_index
            for k in range(steps):
                out[k] = j
                j = int(nxt[j])
            return out
        order = np.argsort(self.sparse_positions)
        pos = self.sparse_positions[order].astype(np.int64)
        nxt = self.sparse_next[order].astype(np.int64)
        if steps <= 0:
            return out
        # each stored element's successor as an index into `pos`, found once for all of them
        # (-1 where the successor holds no value); the walk then follows plain integers
        succ = np.minimum(np.searchsorted(pos, nxt), len(pos) - 1)
        succ = np.where(pos[succ] == nxt, succ, -1).tolist()
        i = int(np.searchsorted(pos, self.start_index))
        if i >= len(pos) or pos[i] != self.start_index:
            raise ValueError(
                f"the sparse chain reaches element {self.start_index}, which holds no value"
            )
        visited = [0] * steps
        for k in range(steps - 1):
            visited[k] = i
            i = succ[i]
            if i < 0:
                bad = int(nxt[visited[k]])
                raise ValueError(f"the sparse chain reaches element {bad}, which holds no value")
        visited[steps - 1] = i
        out[:] = pos[visited]
        return out


@dataclass(frozen=True)
class ChaseResult:
    latency_cycles: np.ndarray  # uint32, one per recorded load
    indices: np.ndarray  # uint32, the value each recorded load returned
    sm_clock_mhz: float  # SM clock while it ran (NVML on a GPU; the profile's on the simulator)


# (backend kind, work type) -> handler(backend, work, **kwargs). Handler modules register with
# @handles; a backend imports its own (`Backend.load_handlers`) the first time it meets a work
# type it has no handler for, so experiments build work without importing any backend.
_HANDLERS: dict[tuple[str, type], Callable[..., Any]] = {}


def handles(kind: str, work_type: type) -> Callable:
    """Register `fn(backend, work, **kwargs)` as the way backend `kind` runs `work_type`."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        _HANDLERS[(kind, work_type)] = fn
        return fn

    return register


class Backend(ABC):
    """Runs experiment work on one device. Use as a context manager."""

    kind: str
    # the GPU's measurement lock while the backend holds it (gpu_lock.GpuLock; a GPU opened
    # exclusively), else None
    lock: Any = None
    # whether each backend call is itself one launch (the simulator: no driver to count them)
    calls_are_launches = False

    @property
    def sweep_profile(self) -> SweepProfile:
        """Where this backend's wall time went since it opened (`contract.profile`)."""
        profile = self.__dict__.get("_sweep_profile")
        if profile is None:
            profile = self.__dict__["_sweep_profile"] = SweepProfile()
        return profile

    @profiled_call
    def run(self, work: Any, **kwargs: Any) -> Any:
        """Run any registered work type (see `handles`)."""
        fn = _HANDLERS.get((self.kind, type(work)))
        if fn is None:
            self.load_handlers()
            fn = _HANDLERS.get((self.kind, type(work)))
        if fn is None:
            from ..exceptions import DeviceUnavailable

            raise DeviceUnavailable(
                f"the {self.kind} backend has no handler for {type(work).__name__}; "
                f"registered: {sorted(w.__name__ for k, w in _HANDLERS if k == self.kind)}"
            )
        return fn(self, work, **kwargs)

    def load_handlers(self) -> None:  # noqa: B027 - optional hook
        """Import this backend's handler modules (each registers itself with `handles`)."""

    @abstractmethod
    def device_info(self) -> dict[str, Any]:
        """Provenance facts of the device (name, UUID, capability, clocks...) or profile."""

    @abstractmethod
    def facts(self) -> DeviceFacts:
        """The driver's facts of the device (sizes, counts, clocks): automatic sweep ranges
        start from them (`contract.facts`)."""

    @property
    @abstractmethod
    def supports_carveout(self) -> bool:
        """Whether the L1/shared carveout can be set per kernel."""

    @abstractmethod
    def run_chase(self, work: ChaseWork, *, carveout_pct: int | None, seed: int = 0) -> ChaseResult:
        """Execute one P-chase launch (`seed` feeds the simulator's noise; a GPU ignores it)."""

    def reserve(self, nbytes: int) -> None:  # noqa: B027 - optional hook
        """Hold device memory for chase arrays of up to `nbytes` from now on, so that the
        launches that follow place their arrays in the same memory (the same physical pages:
        a GPU's per-address latencies then repeat from launch to launch)."""

    def free_memory_bytes(self) -> int | None:
        """The device memory free now (None where the backend has no such limit)."""
        return None

    def has_path(self, path: str) -> bool:
        """Whether the device has load path `path` (a GPU has them all; a profile may not)."""
        return True

    @abstractmethod
    def clocks(self) -> dict[str, float]:
        """Current SM and memory clocks in MHz (`sm_clock_mhz`, `memory_clock_mhz`)."""

    def clock_record(self) -> dict[str, Any]:
        """What a sweep records of the clocks before and after it: the clocks, and on a GPU
        NVML's clock event (throttle) reasons as `clock_event_reasons` (a bitmask, None when
        NVML does not tell). The simulator's clocks never change: it records them alone."""
        return dict(self.clocks())

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the device."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
