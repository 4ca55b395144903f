"""experiments.chase_recorder: a launch's columns read from its arrays are its frame's columns,
and the sweep's table made column by column is the concatenation of its launches' frames (as
the recorder made the table before, one DataFrame per launch), also where launches disagree
in their columns or types."""

import numpy as np
import pandas as pd
import pytest

from gpudissect.contract.backend import Backend, ChaseResult, ChaseWork
from gpudissect.experiments.chase_recorder import ChaseRecorder
from gpudissect.patterns import stride_chain


class _Walker(Backend):
    """Follows the chain as a GPU would, with seeded latencies and a clock per launch."""

    kind = "walker"

    def __init__(self, carveout: bool) -> None:
        self.carveout = carveout

    def device_info(self):
        return {}

    def facts(self):
        raise NotImplementedError

    @property
    def supports_carveout(self):
        return self.carveout

    def clocks(self):
        return {}

    def run_chase(self, work, *, carveout_pct, seed=0):
        i = work.start_index
        for _ in range(work.warmup_steps):
            i = int(work.chain[i])
        indices = []
        for _ in range(work.record_steps):
            i = int(work.chain[i])
            indices.append(i)
        rng = np.random.default_rng(seed)
        return ChaseResult(
            latency_cycles=rng.integers(30, 900, work.record_steps).astype(np.uint32),
            indices=np.array(indices, np.uint32),
            sm_clock_mhz=1500.0 + 0.3 * seed,
        )


def frame_before(rec, launch_point, columns, elements, result, element_bytes=4):
    """One launch's frame, as the recorder built it for every launch before."""
    n = len(result.latency_cycles)
    return pd.DataFrame(
        {
            "point": np.full(n, launch_point, np.int32),
            **{k: v if isinstance(v, str) else np.full(n, v) for k, v in columns.items()},
            "carveout_pct": np.full(n, rec.carveout, np.int16),
            "shared_buffer_bytes": np.full(n, rec.buffer, np.int32),
            "step": np.arange(n, dtype=np.int32),
            "address_bytes": elements * element_bytes,
            "index": result.indices,
            "latency_cycles": result.latency_cycles,
            "sm_clock_mhz": np.full(n, result.sm_clock_mhz, np.float32),
        }
    )


def _columns(i: int, mixed: bool) -> dict:
    cols = {
        "path": ("ca", "cg", "tex")[i % 3],
        "level": np.int8(1 + i % 2),
        "phase": "sets" if i % 4 else "reference",
        "extra_lines": np.int32(i),
        "array_bytes": np.int64(4096 + 128 * i),
    }
    if mixed and i == 3:
        cols["extra_lines"] = i  # a Python int: int64 where the others are int32
    if mixed and i == 5:
        del cols["phase"]  # a launch without a column: NaN there once concatenated
    return cols


@pytest.mark.parametrize("mixed", [False, True])
@pytest.mark.parametrize("carveout", [False, True])
def test_table_is_the_concatenation_of_the_launches_frames(mixed, carveout):
    backend = _Walker(carveout)
    rec = ChaseRecorder(backend, carveout_pct=25, shared_buffer_bytes=8192)
    before = []
    for i in range(9):
        cols = _columns(i, mixed)
        chain = stride_chain(array_bytes=int(cols["array_bytes"]), stride_bytes=128)
        warm = 0 if i % 2 else len(chain) // 32
        launch = rec.chase(
            path="ca", chain=chain, warmup_steps=warm, record_steps=40 + 7 * i, columns=cols
        )
        # the same launch again (the same seed): the element each load read is the one the
        # walk stood on, the start after the warm-up steps, then each load's value
        work = ChaseWork(path="ca", chain=chain, start_index=0, warmup_steps=warm,
                         record_steps=40 + 7 * i, shared_buffer_bytes=8192)  # fmt: skip
        result = backend.run_chase(work, carveout_pct=None, seed=i)
        start = 0
        for _ in range(warm):
            start = int(chain[start])
        elements = np.r_[start, result.indices[:-1]].astype(np.int64)
        want = frame_before(rec, i, cols, elements, result)
        pd.testing.assert_frame_equal(launch.frame, want, check_exact=True)
        for name in want.columns:
            assert np.array_equal(launch[name], want[name].to_numpy()), name
            assert launch[name].dtype == want[name].to_numpy().dtype, name
        before.append(want)
    got = rec.table()
    pd.testing.assert_frame_equal(got, pd.concat(before, ignore_index=True), check_exact=True)
    assert list(got.dtypes) == list(pd.concat(before, ignore_index=True).dtypes)
