"""Stage-2 set rules (analysis.caches.cache_structure) on synthetic miss tables derived by hand."""

import pandas as pd

from gpudissect.analysis.caches.cache_structure import find_sets, index_bits


def _lru_table(sets_of, base_lines, ways, ks):
    """Per k: lines 0..base+k-1; a line misses (every pass) iff its set holds more than its ways
    (cyclic LRU walk). `sets_of(line)`, `ways[set]`."""
    rows = []
    for k in ks:
        n = base_lines + k
        count = {}
        for line in range(n):
            count[sets_of(line)] = count.get(sets_of(line), 0) + 1
        for line in range(n):
            miss = count[sets_of(line)] > ways[sets_of(line)]
            rows.append({"k": k, "line": line, "size": 10, "sum": 10 * miss, "missing": miss})
    return pd.DataFrame(rows)


def test_bits_indexed_four_sets():
    # 16 lines, 4 sets on line bits 0-1 (address bits 5-6 for 32 B lines), 4 ways: at k = 1..4
    # set k-1 overflows with 5 lines, so bursts of 5 at k = 1, 2, 3, 4
    table = _lru_table(lambda n: n % 4, 16, [4] * 4, range(0, 7))
    s = find_sets(table, base_lines=16)
    assert s.complete and s.ways == [4, 4, 4, 4] and [k for k, _ in s.bursts] == [1, 2, 3, 4]
    ib = index_bits(s.labels, line_bytes=32, sets=4)
    assert ib.bits == [5, 6]


def test_unequal_sets_and_table_mapping():
    # TPDS Fig. 10 shape: period-8 table [0,0,1,2,3,4,5,6]; set 0 has 4 ways, the others 2
    table_map = [0, 0, 1, 2, 3, 4, 5, 6]
    ways = [4, 2, 2, 2, 2, 2, 2]
    table = _lru_table(lambda n: table_map[n % 8], 16, ways, range(0, 10))
    s = find_sets(table, base_lines=16)
    assert s.complete and s.ways == [4, 2, 2, 2, 2, 2, 2]
    ib = index_bits(s.labels, line_bytes=32, sets=7)
    assert ib.bits is None and ib.xor_linear is False


def test_xor_hash_is_not_bit_defined_but_linear():
    # set = (n0 ^ n2, n1): 4 sets, 2 ways, 8 lines; bits 0, 1 and 2 all change the set
    table = _lru_table(lambda n: ((n & 1) ^ ((n >> 2) & 1)) | (n & 2), 8, [2] * 4, range(0, 8))
    s = find_sets(table, base_lines=8)
    assert s.complete and s.ways == [2, 2, 2, 2]
    ib = index_bits(s.labels, line_bytes=128, sets=4)
    assert ib.bits is None and ib.xor_linear is True and ib.always == [7, 8, 9]


def test_incomplete_sweep_is_flagged():
    table = _lru_table(lambda n: n % 4, 16, [4] * 4, range(0, 3))
    assert not find_sets(table, base_lines=16).complete
