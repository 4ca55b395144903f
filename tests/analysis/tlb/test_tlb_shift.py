"""Paired-address reading of the TLB reach walks on seeded synthetic walks whose generating
translation level is known: a penalty of about 10 cycles inside a 50-cycle spread of
per-address data latencies (an H100-like L2)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gpudissect.analysis.tlb import tlb_shift

MIB = 2**20


def _walks(
    strides_lengths: dict[int, list[int]],
    *,
    unit: int,
    entries: int,
    penalty: float,
    seed: int = 0,
    traversals: int = 3,
    slow_traversal: tuple[int, int] | None = None,
    penalty_spread: float = 0.0,
    late_jitter: float | None = None,
) -> pd.DataFrame:
    """Reach-stage rows: cyclic walks of m elements at stride s, warm-up pass then
    `traversals` recorded ones. Each address has its own data latency (uniform 275..330, as
    L2 slices at different distances) plus jitter (sd 1.2). A fully associative LRU level of
    `entries` units of `unit` bytes: once a walk touches more units than that, the first
    address of every unit misses it on every traversal and pays `penalty`.
    `slow_traversal` = (stride, m): one traversal of that walk is 40 cycles slower throughout.
    `penalty_spread`: each address pays penalty +- up to this (uniform, its own), as a penalty
    that depends on the slice; `late_jitter`: the jitter sd of walks past the level's reach."""
    rng = np.random.default_rng(seed)
    offsets: dict[int, float] = {}
    extra: dict[int, float] = {}
    frames, point = [], 0
    for stride, lengths in strides_lengths.items():
        for m in lengths:
            addr = np.arange(m, dtype=np.int64) * stride
            for a in addr:
                offsets.setdefault(int(a), float(rng.uniform(275, 330)))
                extra.setdefault(int(a), float(rng.uniform(-penalty_spread, penalty_spread)))
            units = addr // unit
            first = np.r_[True, units[1:] != units[:-1]]
            over = len(np.unique(units)) > entries
            miss = first & over
            pay = penalty + np.array([extra[int(a)] for a in addr])
            lat = np.array([offsets[int(a)] for a in addr]) + pay * miss
            sd = late_jitter if (late_jitter is not None and over) else 1.2
            rec = np.tile(lat, traversals) + rng.normal(0, sd, m * traversals)
            if slow_traversal == (stride, m):
                rec[m : 2 * m] += 40
            n = rec.size
            frames.append(
                pd.DataFrame(
                    {
                        "point": point,
                        "stage": "reach",
                        "stride_bytes": stride,
                        "elements": m,
                        "step": np.arange(n),
                        "position": np.tile(addr, traversals) // 4,
                        "latency_cycles": np.rint(rec).astype(np.uint32),
                    }
                )
            )
            point += 1
    return pd.concat(frames, ignore_index=True)


def _grid(dense: int, top: int) -> list[int]:
    grid = list(range(2, dense + 1))
    m = float(dense)
    while round(m * 2**0.25) <= top:
        m *= 2**0.25
        grid.append(round(m))
    return sorted(set(grid))


# an H100-like L1 TLB: 16 entries of 16 MiB, +10.5 cycles
GRIDS = {2 * MIB: _grid(8, 400), 8 * MIB: _grid(8, 120), 32 * MIB: _grid(24, 40)}


def test_hidden_level_recovers_unit_entries_and_penalty():
    df = _walks(GRIDS, unit=16 * MIB, entries=16, penalty=10.5)
    onsets = tlb_shift.shift_onsets(df)
    assert [o.stride_bytes for o in onsets] == [2 * MIB, 8 * MIB, 32 * MIB]
    h = tlb_shift.hidden_level(onsets, threshold_reach_bytes=64 * 2**30)
    assert h.page_bytes == 16 * MIB
    assert h.entries == 16
    assert h.reach_bytes <= 16 * 16 * MIB < h.reach_bytes * 2**0.25 + 2 * MIB
    assert h.one_set is True
    assert h.penalty_cycles == pytest.approx(10.5, abs=1.0)


def test_no_level_no_onset():
    # the same per-address spread and jitter, no translation level: nothing rises
    df = _walks(GRIDS, unit=16 * MIB, entries=10**6, penalty=10.5, seed=4)
    assert tlb_shift.shift_onsets(df) == []


def test_one_slow_traversal_is_not_a_level():
    # one traversal of one walk 40 cycles slow: the walk after it is not, so no onset there
    df = _walks(
        GRIDS, unit=16 * MIB, entries=10**6, penalty=10.5, seed=5, slow_traversal=(32 * MIB, 11)
    )
    assert tlb_shift.shift_onsets(df) == []


def test_a_level_the_threshold_reading_already_has_is_not_hidden():
    # the onsets' reach (256 MiB) is that of the threshold reading's level: nothing hidden
    df = _walks(GRIDS, unit=16 * MIB, entries=16, penalty=10.5)
    onsets = tlb_shift.shift_onsets(df)
    reach = min(o.fit_bytes for o in onsets)
    assert tlb_shift.hidden_level(onsets, threshold_reach_bytes=reach) is None


def test_entries_stay_undetermined_without_a_dense_bracket():
    # only strides below the unit, on a geometric grid: the brackets leave a range
    df = _walks({2 * MIB: _grid(8, 400)}, unit=16 * MIB, entries=16, penalty=10.5)
    h = tlb_shift.hidden_level(tlb_shift.shift_onsets(df), threshold_reach_bytes=None)
    assert h.page_bytes == 16 * MIB
    assert h.entries is None
    lo, hi = h.entries_bracket
    assert lo <= 16 <= hi and hi > lo


def test_small_genuine_rises_count_when_longer_walks_are_noisier():
    # penalties of 5 to 16 cycles by address (an H100 run), and walks past the reach noisier
    # (sd 3.5) than those before it: the pooled spread is then about 3 cycles, so half the
    # median rise would cut the smaller genuine rises and break the 16 MiB spacing
    df = _walks(
        GRIDS, unit=16 * MIB, entries=16, penalty=10.5, penalty_spread=5.5, late_jitter=3.5,
        seed=7,
    )  # fmt: skip
    onsets = {o.stride_bytes: o for o in tlb_shift.shift_onsets(df)}
    assert {8 * MIB, 32 * MIB} <= set(onsets)
    assert onsets[8 * MIB].spacing_bytes == 16 * MIB
    assert len(onsets[32 * MIB].shifted_bytes) == onsets[32 * MIB].common  # every unit rose
    h = tlb_shift.hidden_level(list(onsets.values()), threshold_reach_bytes=64 * 2**30)
    assert h.page_bytes == 16 * MIB and h.entries == 16 and h.one_set is True
