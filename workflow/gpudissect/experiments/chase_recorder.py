"""One thread's P-chase launches recorded as trace rows (shared by `cache_stage1` and
`caches`): each launch is numbered, its timed loads placed on the chain (the element each read)
and kept as its columns; the sweep's table is made of them once, at the end."""

from __future__ import annotations

from typing import Any

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


# the columns every launch holds one value per timed load of (the rest: one value per launch)
ROW_COLUMNS = ("step", "address_bytes", "index", "latency_cycles")


class RecordedLaunch:
    """One launch's trace rows, kept as its per-launch values and its per-load arrays: a
    launch's rows are read (`launch["latency_cycles"]`) far more often than they are needed as
    a DataFrame (`frame`), and the sweep's table is made once, from all of them
    (`ChaseRecorder.table`)."""

    def __init__(self, values: dict) -> None:
        self.values = values  # column -> per-launch scalar or per-load array, in column order
        self.rows = len(values["step"])
        self._frame: pd.DataFrame | None = None

    def __len__(self) -> int:
        return self.rows

    def __getitem__(self, name: str) -> np.ndarray:
        """Column `name` as an array, one value per timed load (as the frame holds it)."""
        v = self.values[name]
        if name in ROW_COLUMNS:
            return v
        return np.full(self.rows, v, dtype=object if isinstance(v, str) else None)

    @property
    def frame(self) -> pd.DataFrame:
        """The launch's rows as one DataFrame."""
        if self._frame is None:
            n = self.rows
            self._frame = pd.DataFrame(
                {
                    # strings as scalars the frame repeats (np.full of a str, converted to the
                    # frame's string type, cost more than the rest of a launch's row building)
                    k: v if isinstance(v, str) or k in ROW_COLUMNS else np.full(n, v)
                    for k, v in self.values.items()
                }
            )
        return self._frame


class ChaseRecorder:
    """Runs chase launches, numbers them, and keeps every launch's rows (`RecordedLaunch`)."""

    def __init__(self, backend: Backend, *, carveout_pct: int, shared_buffer_bytes: int):
        self.backend = backend
        self.carveout = carveout_pct if backend.supports_carveout else NO_CARVEOUT
        self.buffer = shared_buffer_bytes
        self.launches: list[RecordedLaunch] = []
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
    ) -> RecordedLaunch:
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
        launch = RecordedLaunch(
            {
                "point": np.int32(self.point),
                **columns,
                "carveout_pct": np.int16(self.carveout),
                "shared_buffer_bytes": np.int32(self.buffer),
                "step": np.arange(n, dtype=np.int32),
                "address_bytes": elements * work.element_bytes,
                "index": result.indices,
                "latency_cycles": result.latency_cycles,
                "sm_clock_mhz": np.float32(result.sm_clock_mhz),
            }
        )
        self.launches.append(launch)
        self.point += 1
        return launch

    def table(self) -> pd.DataFrame:
        """Every launch's rows in launch order: what `pd.concat` of their frames makes (with
        `ignore_index`), put together column by column."""
        launches = self.launches
        names = list(launches[0].values)
        sizes = np.array([len(x) for x in launches], np.int64)
        if any(list(x.values) != names for x in launches) or not sizes.all():
            return pd.concat([x.frame for x in launches], ignore_index=True)
        cols: dict[str, Any] = {}
        for name in names:
            got = [x.values[name] for x in launches]
            if name in ROW_COLUMNS:
                dtypes = {v.dtype for v in got}
                cols[name] = np.concatenate(got) if len(dtypes) == 1 else None
            elif all(isinstance(v, str) for v in got):
                cols[name] = _repeated_strings(got, sizes)
            else:
                dtypes = {np.asarray(v).dtype for v in got}
                one = dtypes.pop() if len(dtypes) == 1 else np.dtype(object)
                cols[name] = None if one.kind == "O" else np.repeat(np.array(got, one), sizes)
            if cols[name] is None:  # mixed types: let pandas decide what they make together
                return pd.concat([x.frame for x in launches], ignore_index=True)
        return pd.DataFrame(cols)


def _repeated_strings(values: list[str], sizes: np.ndarray) -> pd.Series:
    """Each of `values` repeated `sizes` times, as the string column a frame makes of a str
    (pandas's own string type: taken from one arrow array of the distinct values)."""
    dtype = pd.Series(values[:1]).dtype
    distinct, codes = np.unique(np.array(values, dtype=object), return_inverse=True)
    codes = np.repeat(codes, sizes)
    if isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow":
        import pyarrow as pa

        strings = pa.array(distinct.tolist(), pa.large_string()).take(pa.array(codes))
        return pd.Series(pd.array(strings, dtype=dtype))
    return pd.Series(distinct[codes], dtype=dtype)
