"""Properties of the analysis functions over generated inputs (hypothesis):

- any finite input gives a result or the documented error (AnalysisError), nothing else;
- NaN and empty inputs are refused (AnalysisError), or, for a whole trace, reported undetermined
  with the reason (an empty trace is a device without the load path);
- results do not depend on the order in which the sweep points were written.

The traces are synthetic with known answers: a cache of C bytes whose accesses all hit up to C
and all miss beyond (LRU under a cyclic walk); a bank model of gcd(s, 32)-way conflicts; an L2
whose flushed copy is slower by 4 ns per KiB up to its size.
"""

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudissect.analysis.banks import bank_model
from gpudissect.analysis.caches import cache_size
from gpudissect.analysis.common.sweep_steps import find_steps, first_rise
from gpudissect.analysis.l2 import l2_flush
from gpudissect.exceptions import AnalysisError
from gpudissect.families import family

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FINITE = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
GROUPS = st.lists(st.lists(FINITE, min_size=1, max_size=12), min_size=1, max_size=24)


def _x(n):
    return np.arange(1, n + 1) * 512


# --- change points on per-point sample groups --------------------------------------------------
@SETTINGS
@given(groups=GROUPS)
def test_find_steps_gives_steps_or_the_documented_error(groups):
    x = _x(len(groups))
    try:
        steps = find_steps(x, groups)
    except AnalysisError:
        return
    for s in steps:
        assert 0 < s.index < len(groups)
        assert s.x_before < s.x_after
        assert 0.0 <= s.confidence <= 1.0
        assert math.isfinite(s.level_before) and math.isfinite(s.level_after)


@SETTINGS
@given(groups=GROUPS, data=st.data())
def test_nan_anywhere_is_refused(groups, data):
    i = data.draw(st.integers(0, len(groups) - 1))
    j = data.draw(st.integers(0, len(groups[i])))
    groups[i] = [*groups[i][:j], float("nan"), *groups[i][j:]]
    with pytest.raises(AnalysisError, match="NaN"):
        find_steps(_x(len(groups)), groups)
    with pytest.raises(AnalysisError, match="NaN"):
        first_rise(_x(len(groups)), groups)


def test_empty_inputs_are_refused():
    with pytest.raises(AnalysisError, match="non-empty"):
        find_steps([], [])
    with pytest.raises(AnalysisError, match="empty"):
        find_steps([512, 1024], [[40.0], []])


@SETTINGS
@given(groups=GROUPS.filter(lambda g: len(g) > 1), data=st.data())
def test_unsorted_sweep_points_are_refused_not_misread(groups, data):
    order = data.draw(st.permutations(range(len(groups))))
    if list(order) == sorted(order):
        return
    with pytest.raises(AnalysisError, match="strictly increasing"):
        find_steps(_x(len(groups))[list(order)], [groups[k] for k in order])


# --- whole traces: the order of the sweep points does not matter ------------------------------
def _same(a, b):
    assert json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def _points_reordered(frame: pd.DataFrame, key: list[str], order) -> pd.DataFrame:
    """The same rows with the sweep points (groups of `key`) in `order`; the rows within a
    point keep their order (a P-chase's accesses are a sequence)."""
    points = [g for _, g in frame.groupby(key, sort=True)]
    return pd.concat([points[k] for k in order], ignore_index=True)


def _l1_trace(cache_bytes, sizes, seed):
    rng = np.random.default_rng(seed)
    rows = []
    for size in sizes:
        lat = np.where(size > cache_bytes, 300, 40) + rng.normal(0, 2.0, 256)
        rows.append(
            pd.DataFrame(
                {
                    "carveout_pct": -1,
                    "shared_buffer_bytes": 16384,
                    "array_bytes": size,
                    "latency_cycles": np.round(lat),
                }
            )
        )
    return pd.concat(rows, ignore_index=True)


L1_SIZES = list(range(4096, 16385, 1024))


@SETTINGS
@given(
    cache=st.sampled_from([6144, 8192, 12288]),
    seed=st.integers(0, 2**16),
    order=st.permutations(range(len(L1_SIZES))),
)
def test_cache_size_ignores_the_order_of_sweep_points(cache, seed, order):
    frame = _l1_trace(cache, L1_SIZES, seed)
    doc = cache_size.analyse(frame, provenance={"device": "x"})
    assert doc["elements"]["l1d"]["size_bytes"]["value"] == cache
    _same(
        doc,
        cache_size.analyse(
            _points_reordered(frame, ["array_bytes"], order), provenance={"device": "x"}
        ),
    )


def test_cache_size_of_an_empty_trace_is_not_applicable():
    # an empty trace is a device without the load path: not applicable (the device lacks it),
    # with the reason, never undetermined (the data would have decided nothing)
    empty = _l1_trace(8192, L1_SIZES, 0).iloc[:0]
    prov = {"device": "x", "config": {"parameters": {"path": "ca"}}}
    doc = family("l1_size").analyse(empty, provenance=prov)
    size = doc["elements"]["l1d"]["size_bytes"]
    assert size["value"] is None and "no `ca` load path" in size["not_applicable"]
    assert "undetermined" not in size


@pytest.mark.parametrize(
    ("name", "frame", "column"),
    [
        ("l1_size", lambda: _l1_trace(8192, L1_SIZES, 0), "latency_cycles"),
        ("bank_conflicts", lambda: _bank_trace(0), "elapsed_cycles"),
        ("l2_flush", lambda: _flush_trace(768 * KIB, 0), "elapsed_ms"),
    ],
)
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_trace_with_a_nan_measurement_is_refused(name, frame, column, bad):
    data = frame().astype({column: float})
    data.loc[7, column] = bad
    with pytest.raises(AnalysisError, match=f"column '{column}' has 1 NaN/infinite value.*row 7"):
        family(name).analyse(data, provenance={"device": "x"})


def test_an_unknown_clock_is_no_reason_to_refuse():
    data = _bank_trace(0)
    data["sm_clock_mhz"] = np.nan  # the driver did not report the clock
    doc = family("bank_conflicts").analyse(data, provenance={"device": "x"})
    assert doc["elements"]["shared"]["banks"]["value"] == 32


def _bank_trace(seed, strides=range(0, 65)):
    rng = np.random.default_rng(seed)
    rows = []
    for s in strides:
        degree = 1 if s == 0 else math.gcd(s, 32)
        for r in range(3):
            elapsed = 64 * (40 + 10 * (degree - 1)) + rng.normal(0, 2.4)
            rows.append((4, 4, s, 64, r, round(elapsed), 1000.0))
    cols = ["bank_mode_bytes", "element_bytes", "stride_elements", "loads", "repetition"]
    return pd.DataFrame(rows, columns=[*cols, "elapsed_cycles", "sm_clock_mhz"])


@SETTINGS
@given(seed=st.integers(0, 2**16), order=st.permutations(range(65)))
def test_bank_model_ignores_the_order_of_sweep_points(seed, order):
    frame = _bank_trace(seed)
    doc = bank_model.analyse(frame, provenance={"device": "x"})
    assert doc["elements"]["shared"]["banks"]["value"] == 32
    _same(
        doc,
        bank_model.analyse(
            _points_reordered(frame, ["stride_elements"], order), provenance={"device": "x"}
        ),
    )


KIB = 1024
FLUSH_SIZES = np.arange(64, 1537, 64) * KIB


def _flush_trace(l2_bytes, seed):
    rng = np.random.default_rng(seed)
    rows = []
    for rep in range(3):
        for s in FLUSH_SIZES:
            for flushed in (False, True):
                t = 1e-3 + 1e-6 * s / KIB + (4e-6 * min(s, l2_bytes) / KIB if flushed else 0.0)
                rows.append((0, s, flushed, 76 << 20, rep, t * (1 + rng.normal(0, 1e-3)), 1e3))
    cols = ["point", "size_bytes", "flushed", "flush_bytes", "repetition", "elapsed_ms",
            "sm_clock_mhz"]  # fmt: skip
    return pd.DataFrame(rows, columns=cols)


@SETTINGS
@given(
    l2_kib=st.sampled_from([384, 768, 1024]),
    seed=st.integers(0, 2**16),
    order=st.permutations(range(len(FLUSH_SIZES))),
)
def test_l2_flush_ignores_the_order_of_sweep_points(l2_kib, seed, order):
    frame = _flush_trace(l2_kib * KIB, seed)
    doc = l2_flush.analyse(frame, provenance={"device": "x"})
    assert doc["elements"]["l2"]["size_bytes"]["value"] == l2_kib * KIB
    _same(
        doc,
        l2_flush.analyse(
            _points_reordered(frame, ["size_bytes"], order), provenance={"device": "x"}
        ),
    )
