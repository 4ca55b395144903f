"""One thread's P-chase launches recorded as trace rows (shared by `cache_stage1` and
`caches`): each launch is numbered, its timed loads placed on the chain (the element each read)
and kept as one DataFrame."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..contract.backend import Backend, ChaseWork
from ..exceptions import TraceError

NO_CARVEOUT = -1  # carveout_pct where the backend has no L1/shared carveout


def backend_paths(backend: Backend) -> tuple[str, ...] | None:
    """Load paths the backend can run (None: it does not say; try all)."""
    profile = getattr(backend, "profile", None)
    if profile is not None:
        return tuple(profile.paths)
    return getattr(backend, "paths", None)


def accessed_elements(
    chain: np.ndarray, indices: np.ndarray, *, first_element: int | None = None
) -> np.ndarray:
    """The element each recorded load read: the previous load's value; the first one's
    predecessor in the chain (unique on a permutation or on a cycle among self-loops), or
    `first_element` when the caller knows it (no warm-up: the start)."""
    if first_element is not None:
        first = np.array([first_element])
    else:
        first = np.flatnonzero(chain == indices[0])
    if first.size > 1:
        first = first[chain[first] != first]
    if first.size != 1:
        raise TraceError(
            f"cannot place the first recorded load: {first.size} elements point to "
            f"{int(indices[0])}; the chain must be a permutation or a cycle among self-loops"
        )
    elements = np.concatenate([first, indices[:-1]]).astype(np.int64)
    if not np.array_equal(chain[elements], indices):
        bad = int(np.flatnonzero(chain[elements] != indices)[0])
        raise TraceError(
            f"the kernel returned index {int(indices[bad])} at step {bad}, but the chain holds "
            f"{int(chain[elements[bad]])} there: the loads did not follow the chain"
        )
    return elements


class ChaseRecorder:
    """Runs chase launches, numbers them, and keeps one DataFrame per launch."""

    def __init__(self, backend: Backend, *, carveout_pct: int, shared_buffer_bytes: int):
        self.backend = backend
        self.carveout = carveout_pct if backend.supports_carveout else NO_CARVEOUT
        self.buffer = shared_buffer_bytes
        self.frames: list[pd.DataFrame] = []
        self.point = 0

    def chase(
        self,
        *,
        path: str,
        chain: np.ndarray,
        warmup_steps: int,
        record_steps: int,
        columns: dict,
        start_index: int = 0,
    ) -> pd.DataFrame:
        work = ChaseWork(
            path=path,
            chain=chain,
            start_index=start_index,
            warmup_steps=warmup_steps,
            record_steps=record_steps,
            shared_buffer_bytes=self.buffer,
        )
        result = self.backend.run_chase(
            work,
            carveout_pct=None if self.carveout < 0 else self.carveout,
            seed=self.point,
        )
        elements = accessed_elements(
            chain, result.indices, first_element=start_index if warmup_steps == 0 else None
        )
        n = len(result.latency_cycles)
        frame = pd.DataFrame(
            {
                "point": np.full(n, self.point, np.int32),
                # strings as scalars the frame repeats (np.full of a str, converted to the
                # frame's string type, cost more than the rest of a launch's row building)
                **{k: v if isinstance(v, str) else np.full(n, v) for k, v in columns.items()},
                "carveout_pct": np.full(n, self.carveout, np.int16),
                "shared_buffer_bytes": np.full(n, self.buffer, np.int32),
                "step": np.arange(n, dtype=np.int32),
                "address_bytes": elements * work.element_bytes,
                "index": result.indices,
                "latency_cycles": result.latency_cycles,
                "sm_clock_mhz": np.full(n, result.sm_clock_mhz, np.float32),
            }
        )
        self.frames.append(frame)
        self.point += 1
        return frame
