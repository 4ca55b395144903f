"""The array helpers of `gpudissect.patterns`."""

import numpy as np
import pytest

from gpudissect.patterns import all_distinct, distinct


@pytest.mark.parametrize(
    "values",
    [[], [3], [1, 2, 2, 5], [5, 1, 5, 2], [0, 16, 32, 48], [7, 7, 7], [9, 3, 1]],
)
def test_distinct_and_all_distinct_agree_with_numpy(values):
    a = np.asarray(values, dtype=np.int64)
    assert np.array_equal(distinct(a), np.unique(a))
    assert all_distinct(a) == (len(np.unique(a)) == len(a))


@pytest.mark.parametrize("seed", range(4))
def test_all_distinct_agrees_with_numpy_on_shuffled_offsets(seed):
    # a pointer walk's offsets: shuffled words, then one of them repeated
    rng = np.random.default_rng(seed)
    a = rng.permutation(np.arange(0, 8 * int(rng.integers(2, 5000)), 8)).astype(np.int64)
    b = a.copy()
    b[rng.integers(0, len(b))] = b[rng.integers(0, len(b))]
    for x in (a, b, a.reshape(-1, 2) if len(a) % 2 == 0 else a):
        assert all_distinct(x) == (len(np.unique(x)) == x.size)
