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
