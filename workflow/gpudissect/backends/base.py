"""The backend interface: both backends run the same work and return the same arrays."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ChaseWork:
    """One launch of the fine-grained P-chase: exactly what runs, on either backend.

    One thread of one block walks `j = chain[j]` from `start_index`: `warmup_steps` untimed
    loads, then `record_steps` timed ones, through load path `path`. The launch has
    `shared_buffer_bytes` of dynamic shared memory (holds the records).
    """

    path: str
    chain: np.ndarray  # uint32 element indices (the device array's contents)
    start_index: int
    warmup_steps: int
    record_steps: int
    shared_buffer_bytes: int
    element_bytes: int = 4

    def __post_init__(self) -> None:
        if self.chain.dtype != np.uint32:
            raise TypeError(f"chain must be uint32, got {self.chain.dtype}")
        if 8 * self.record_steps > self.shared_buffer_bytes:
            raise ValueError(
                f"shared_buffer_bytes {self.shared_buffer_bytes} cannot hold "
                f"{self.record_steps} records of 8 bytes"
            )


@dataclass(frozen=True)
class ChaseResult:
    latency_cycles: np.ndarray  # uint32, one per recorded load
    indices: np.ndarray  # uint32, the value each recorded load returned
    sm_clock_mhz: float  # SM clock while it ran (NVML on a GPU; the profile's on the simulator)


# (backend kind, work type) -> handler(backend, work, **kwargs). Experiment families register
# handlers for their own work types with @handles; the family module imports its handler modules,
# so a family's work can run as soon as the family is loaded.
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

    def run(self, work: Any, **kwargs: Any) -> Any:
        """Run any registered work type (see `handles`)."""
        fn = _HANDLERS.get((self.kind, type(work)))
        if fn is None:
            from ..exceptions import DeviceUnavailable

            raise DeviceUnavailable(
                f"the {self.kind} backend has no handler for {type(work).__name__}; "
                f"registered: {sorted(w.__name__ for k, w in _HANDLERS if k == self.kind)}"
            )
        return fn(self, work, **kwargs)

    @abstractmethod
    def device_info(self) -> dict[str, Any]:
        """Provenance facts of the device (name, UUID, capability, clocks...) or profile."""

    @property
    @abstractmethod
    def supports_carveout(self) -> bool:
        """Whether the L1/shared carveout can be set per kernel."""

    @abstractmethod
    def run_chase(self, work: ChaseWork, *, carveout_pct: int | None, seed: int = 0) -> ChaseResult:
        """Execute one P-chase launch (`seed` feeds the simulator's noise; a GPU ignores it)."""

    @abstractmethod
    def clocks(self) -> dict[str, float]:
        """Current SM and memory clocks in MHz (`sm_clock_mhz`, `memory_clock_mhz`)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the device."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
