"""Shared-memory bank model: conflict degrees derived by hand from the bank mapping.

Notation: Fermi-like = 32 banks of 4 bytes (one mode); Kepler-like = 32 banks that are physically
8 bytes wide, with a 4-byte and an 8-byte mode. A bank row is 32 x 4 = 128 bytes on Fermi and
32 x 8 = 256 bytes on Kepler (in either mode).
"""

import dataclasses
import math

import numpy as np
import pytest

from gpudissect.exceptions import ProfileError
from gpudissect.sim.banks import (
    SharedSpec,
    access_latency_cycles,
    conflict_degree,
    strided_addresses,
    strided_warp_access,
    warp_access,
)

FERMI = SharedSpec(
    size_bytes=49152,
    banks=32,
    bank_width_bytes=4,
    base_latency_cycles=50,
    conflict_latency_cycles=37,
)
KEPLER = SharedSpec(
    size_bytes=49152,
    banks=32,
    bank_width_bytes=4,
    modes_bytes=(4, 8),
    base_latency_cycles=47,
    conflict_latency_cycles=14,
)
BANK8 = SharedSpec(size_bytes=49152, banks=32, bank_width_bytes=8)  # 8-byte banks only


def degree(spec, stride, *, width=None, element_bytes=4):
    return strided_warp_access(
        spec, stride_elements=stride, bank_width_bytes=width, element_bytes=element_bytes
    )[1]


def test_stride_2_conflicts_on_4_byte_banks_but_not_on_8_byte_banks():
    # 4-byte banks: thread t reads word 2t, bank 2t mod 32. Threads t and t+16 read words 2t and
    # 2t+32: same bank, rows 0 and 1 (row = addr // 128) -> 2 distinct rows -> 2-way.
    assert degree(FERMI, 2) == 2
    # 8-byte banks: thread t reads bytes 8t..8t+3, 8-byte word t, bank t: 32 banks, one row each.
    assert degree(BANK8, 2) == 1
    assert degree(KEPLER, 2, width=8) == 1


def test_stride_0_is_a_broadcast():
    # every thread reads word 0: one bank, one row
    assert degree(FERMI, 0) == 1
    assert degree(KEPLER, 0, width=8) == 1
    assert warp_access(FERMI, np.zeros(32, np.int64)) == (50, 1)


def test_stride_32_is_a_32_way_conflict_on_fermi():
    # word 32t: bank 0 for every thread, rows 0..31 all distinct
    assert degree(FERMI, 32) == 32
    assert strided_warp_access(FERMI, stride_elements=32)[0] == 50 + 37 * 31


def test_stride_33_and_odd_strides_do_not_conflict():
    # word 33t -> bank 33t mod 32 = t mod 32: 32 threads, 32 different banks
    assert degree(FERMI, 33) == 1
    for stride in (1, 3, 5, 7, 9, 15, 17, 31, 63):
        # an odd stride is coprime with 32, so t -> stride*t mod 32 is a permutation of banks
        assert degree(FERMI, stride) == 1
        assert degree(KEPLER, stride) == 1


def test_fermi_degree_follows_gcd_law_as_a_consequence():
    # not how the model computes it (it counts rows per bank), but what the papers observed
    for stride in range(1, 130):
        assert degree(FERMI, stride) == math.gcd(stride, 32), stride


def test_kepler_even_strides_npc_fig7():
    # 4-byte mode: word w in bank w mod 32, row w // 64 (a 256-byte row holds words b and b+32).
    # stride 4: words 4t; bank 4t mod 32 holds t, t+8, t+16, t+24 -> words 4t, 4t+32, 4t+64,
    # 4t+96 -> rows 0, 0, 1, 1 -> 2-way (both modes, TPDS: "stride 4: 2-way in both modes").
    assert degree(KEPLER, 4) == 2
    assert degree(KEPLER, 4, width=8) == 2
    # stride 6, 4-byte mode: bank 6t mod 32 is shared by t and t+16, words 6t and 6t+96 are 96
    # words apart, so always in different 64-word rows -> 2-way.
    assert degree(KEPLER, 6) == 2
    # stride 6, 8-byte mode: 8-byte word 3t, bank 3t mod 32: a permutation -> no conflict
    assert degree(KEPLER, 6, width=8) == 1
    # stride 64 in 4-byte mode: bank 0, rows t -> 32-way; stride 32: rows t//2 -> 16-way
    assert degree(KEPLER, 64) == 32
    assert degree(KEPLER, 32) == 16


def test_two_words_in_one_8_byte_bank_row_do_not_conflict():
    # bytes 0 and 128: Fermi bank 0 rows 0 and 1 -> 2-way; Kepler 4-byte mode: words 0 and 32
    # are both in row 0 of bank 0 (row = addr // 256) -> no conflict
    pair = np.array([0, 128])
    assert conflict_degree(FERMI, pair) == 2
    assert conflict_degree(KEPLER, pair, bank_width_bytes=4) == 1
    # bytes 0 and 4 in 8-byte mode: the same 8-byte word
    assert conflict_degree(KEPLER, np.array([0, 4]), bank_width_bytes=8) == 1


def test_8_byte_elements_in_4_byte_mode_take_two_passes():
    # thread t covers words 2t and 2t+1; bank b gets word b (thread b//2) and word b+32
    # (thread 16 + b//2): rows 0 and 1 -> 2 passes, like Fermi's two half-warp transactions
    assert degree(FERMI, 1, element_bytes=8) == 2
    # 8-byte mode: 8-byte word t in bank t -> one pass
    assert degree(KEPLER, 1, width=8, element_bytes=8) == 1


def test_latency_is_linear_in_degree():
    for stride, deg in ((1, 1), (2, 2), (4, 4), (8, 8), (16, 16)):
        assert strided_warp_access(FERMI, stride_elements=stride) == (50 + 37 * (deg - 1), deg)


def test_latency_table_by_degree_kepler():
    # TPDS Table VIII (GTX780) as a table; the degree still comes from the addresses. In the
    # 4-byte mode a bank row holds words b and b + 32, so stride 2k gives gcd(2k, 64) / 2 ways:
    # stride 4 -> 2, 8 -> 4, 16 -> 8, 32 -> 16, 64 -> 32; stride 2 -> no conflict (base 47)
    table = {2: 82, 4: 96, 8: 158, 16: 257, 32: 484}
    spec = dataclasses.replace(KEPLER, conflict_latency_table_cycles=table)
    assert spec.conflict_latency_table_cycles == tuple(table.items())
    got = {s: strided_warp_access(spec, stride_elements=s) for s in (2, 4, 8, 16, 32, 64)}
    assert got == {2: (47, 1), 4: (82, 2), 8: (96, 4), 16: (158, 8), 32: (257, 16), 64: (484, 32)}
    # between listed degrees: linear; 3 ways -> (82 + 96) / 2 = 89; 12 -> (158 + 257) / 2 =
    # 207.5 -> 208 (round half to even of 207.5 is 208); beyond 32: + 14 per way
    assert access_latency_cycles(spec, 3) == 89
    assert access_latency_cycles(spec, 12) == 208
    assert access_latency_cycles(spec, 34) == 484 + 2 * 14
    # 3 threads in bank 0, rows 0, 1, 2 (bytes 0, 256, 512): a 3-way conflict
    assert warp_access(spec, np.array([0, 256, 512])) == (89, 3)
    # a table that starts above degree 2 interpolates from (1, base): degree 2 of {4: 100}
    # is 47 + (100 - 47) / 3 = 64.67 -> 65
    spec = dataclasses.replace(KEPLER, conflict_latency_table_cycles={4: 100})
    assert access_latency_cycles(spec, 2) == 65


def test_latency_table_refuses_bad_degrees():
    for table, match in (({1: 50}, "integer >= 2"), ({2: -1}, "negative"), ((("x", 3),), "x")):
        with pytest.raises(ProfileError, match=match):
            dataclasses.replace(KEPLER, conflict_latency_table_cycles=table)
    with pytest.raises(ProfileError, match="repeat"):
        dataclasses.replace(KEPLER, conflict_latency_table_cycles=((2, 80), (2, 81)))


def test_partial_warps_and_random_addresses_count_rows():
    # 3 threads, all in bank 5 (word 5, 37, 69) of Fermi -> rows 0, 1, 2 -> 3-way
    assert conflict_degree(FERMI, np.array([20, 148, 276])) == 3
    # repeated addresses are one row of one bank (multicast)
    assert conflict_degree(FERMI, np.array([20, 20, 148, 148])) == 2
    assert strided_addresses(stride_elements=2, threads=4).tolist() == [0, 8, 16, 24]


def test_bad_inputs_name_the_fix():
    with pytest.raises(ProfileError, match="modes"):
        strided_warp_access(FERMI, stride_elements=1, bank_width_bytes=8)
    with pytest.raises(ProfileError, match="modes_bytes"):
        SharedSpec(size_bytes=1024, banks=32, bank_width_bytes=8, modes_bytes=(4,))
    with pytest.raises(ProfileError, match="powers of two"):
        SharedSpec(size_bytes=1024, banks=32, bank_width_bytes=6)
    with pytest.raises(ValueError, match="warp"):
        conflict_degree(FERMI, np.arange(33) * 4)
    assert KEPLER.physical_width_bytes == 8
    assert FERMI.peak_bytes_per_cycle == 128
