"""Recursive single change points (the thesis's method on each part) on seeded staircases whose
steps are known from how they are built."""

import numpy as np
import pytest

from gpudissect.analysis.common.changepoint_recursive import recursive_steps

PAGE_BYTES = 4096


def _sweep(levels, lengths, sigma, samples, rng):
    """Sizes one page apart; per size `samples` raw latencies of its level. The steps start at
    the sizes of index cumsum(lengths)[:-1]."""
    point_levels = np.repeat(levels, lengths)
    groups = [lv + rng.normal(0.0, sigma, samples) for lv in point_levels]
    return PAGE_BYTES * np.arange(1, len(groups) + 1), groups


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_three_levels_give_two_steps(seed):
    # L1 40, L2 260, DRAM 550 cycles over 12 + 15 + 10 sizes: steps at indices 12 and 27
    rng = np.random.default_rng(seed)
    x, groups = _sweep([40.0, 260.0, 550.0], [12, 15, 10], 3.0, 64, rng)
    steps = recursive_steps(x, groups, alpha=0.01)
    assert [s.index for s in steps] == [12, 27]
    assert [s.x_after for s in steps] == [13 * PAGE_BYTES, 28 * PAGE_BYTES]
    assert all(s.confidence > 0.99 for s in steps)
    assert steps[0].level_before == pytest.approx(40, abs=2)
    assert steps[1].level_after == pytest.approx(550, abs=2)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_flat_sweep_has_no_step(seed):
    rng = np.random.default_rng(seed)
    x, groups = _sweep([120.0], [30], 2.0, 64, rng)
    assert recursive_steps(x, groups, alpha=0.01) == []


def test_depth_limits_the_recursion():
    # four levels, three steps (at 8, 16, 24); depth 1 keeps only the first split
    rng = np.random.default_rng(5)
    x, groups = _sweep([40.0, 120.0, 260.0, 550.0], [8, 8, 8, 8], 2.0, 32, rng)
    assert [s.index for s in recursive_steps(x, groups)] == [8, 16, 24]
    assert len(recursive_steps(x, groups, max_depth=1)) == 1
