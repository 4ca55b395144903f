"""The tables of the caches' stage 2 (analysis.caches.cache_structure): misses per (k, line) and
each line's onset."""

import numpy as np
import pandas as pd

from gpudissect.analysis.caches.cache_structure import PERSISTENCE, line_miss_table, onsets
from gpudissect.analysis.caches.level_size import Classifier

CLASSIFIER = Classifier(hit_latency_cycles=50.0, threshold_cycles=100.0, outlier_rate=0.01)


def _rows(k, address, latency):
    return pd.DataFrame(
        {
            "extra_lines": np.asarray(k, np.int32),
            "address_bytes": np.asarray(address, np.int64),
            "latency_cycles": np.asarray(latency, np.uint32),
        }
    )


def test_counts_accesses_and_misses_per_k_and_line_in_order():
    # 128-B lines. k = 2 first in the rows: lines 0, 1, 0, 1, 2 at 50, 300, 50, 300, 50 cycles;
    # then k = 1: line 1 at 300, line 0 at 300 (address 0) and 50 (address 4, the same line).
    # Per (k, line), sorted: (1,0) 2 accesses 1 slow; (1,1) 1/1; (2,0) 2/0; (2,1) 2/2; (2,2) 1/0.
    # Missing: every access slow, or at least two slow ones beyond the 1% outlier rate:
    # (1,1) and (2,1); (1,0)'s single slow access of two is an outlier's worth.
    rows = _rows(
        [2, 2, 2, 2, 2, 1, 1, 1],
        [0, 128, 0, 128, 256, 128, 0, 4],
        [50, 300, 50, 300, 50, 300, 300, 50],
    )
    t = line_miss_table(rows, CLASSIFIER, 128)
    assert list(t.columns) == ["k", "line", "size", "sum", "missing"]
    assert list(zip(t["k"], t["line"], strict=True)) == [(1, 0), (1, 1), (2, 0), (2, 1), (2, 2)]
    assert t["size"].tolist() == [2, 1, 2, 2, 1]
    assert t["sum"].tolist() == [1, 1, 0, 2, 0]
    assert t["missing"].tolist() == [False, True, False, True, False]
    assert t.index.tolist() == list(range(5))


def test_many_slow_accesses_of_one_line_miss_though_not_all():
    # 20 accesses of line 3 at k = 5, 10 of them slow: far more than a 1% outlier rate explains
    latency = [300] * 10 + [50] * 10
    t = line_miss_table(_rows([5] * 20, [384] * 20, latency), CLASSIFIER, 128)
    assert t[["k", "line", "size", "sum"]].values.tolist() == [[5, 3, 20, 10]]
    assert t["missing"].tolist() == [True]


def test_no_rows_give_an_empty_table_of_the_same_columns():
    t = line_miss_table(_rows([], [], []), CLASSIFIER, 128)
    assert list(t.columns) == ["k", "line", "size", "sum", "missing"]
    assert len(t) == 0


def test_a_line_starts_missing_where_it_keeps_missing_at_the_later_k_it_was_walked():
    # k = 1..5; M miss, h hit, . not walked (absent from the table)
    #   line 0: M h h h h  -> 1 of 5 from k=1 (0.2): no onset
    #   line 1: h h M M M  -> from k=3: 3 of 3: onset 3
    #   line 2: . M h M M  -> from k=2: 3 of 4 (0.75 < 0.8); from k=4: 2 of 2: onset 4
    #   line 3: . M M M .  -> from k=2: 3 of 3 (k=5 not walked counts neither way): onset 2
    assert PERSISTENCE == 0.8
    rows = {0: "Mhhhh", 1: "hhMMM", 2: ".MhMM", 3: ".MMM."}
    table = pd.DataFrame(
        [
            {"k": k, "line": line, "size": 8, "missing": mark == "M"}
            for k in range(1, 6)
            for line, marks in rows.items()
            if (mark := marks[k - 1]) != "."
        ]
    )
    assert onsets(table) == {1: 3, 2: 4, 3: 2}
    assert list(onsets(table)) == [1, 2, 3]
    assert onsets(table[table["line"] == 0]) == {}
