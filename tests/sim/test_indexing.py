"""Set-index functions on hand-worked addresses, and their compiled forms agree."""

from __future__ import annotations

import numpy as np
import pytest

from gpudissect.sim import _kernels as K
from gpudissect.sim.indexing import (
    BitListIndex,
    BitsIndex,
    IndexSpec,
    TableIndex,
    XorIndex,
    make_index,
)


def test_contiguous_bits():
    # 32 B lines, 8 sets: set = (addr >> 5) mod 8; 0x1E0 >> 5 = 15 -> 7; 0x200 >> 5 = 16 -> 0
    idx = make_index(IndexSpec(), sets=8, line_bytes=32)
    assert isinstance(idx, BitsIndex) and idx.low_bit == 5
    assert [idx.set_of(a) for a in (0, 31, 32, 0x1E0, 0x200)] == [0, 0, 1, 7, 0]


def test_contiguous_bits_any_set_count():
    # the 12-word cache of TPDS Fig. 2: 8 B lines, 3 sets; line n goes to set n mod 3
    idx = BitsIndex(sets=3, low_bit=3)
    assert [idx.set_of(8 * n) for n in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_bit_list_kepler_texture():
    # Kepler texture L1 (TPDS 4.3): bits 7-8 pick the set, so each 128 B block of 4 lines of
    # 32 B stays in one set and successive 128 B blocks go to sets 0, 1, 2, 3, 0, ...
    idx = BitListIndex(bits=(7, 8))
    assert idx.sets == 4
    assert [idx.set_of(a) for a in (0, 32, 96, 128, 256, 384, 512)] == [0, 0, 0, 1, 2, 3, 0]


def test_xor_hash():
    # bit 0 = parity(addr & 0b1100), bit 1 = parity(addr & 0b0110)
    idx = XorIndex(masks=(0b1100, 0b0110))
    # 0b0100: parities (1, 1) -> 3; 0b1000: (1, 0) -> 1; 0b0010: (0, 1) -> 2; 0b1110: (0, 0) -> 0
    assert [idx.set_of(a) for a in (0b0100, 0b1000, 0b0010, 0b1110)] == [3, 1, 2, 0]


def test_table():
    # 4 lines of 32 B per 128 B period: lines go to sets 0, 1, 1, 0, then repeat;
    # 200 mod 128 = 72 is line 2 of the period (set 1), 250 mod 128 = 122 is line 3 (set 0)
    idx = TableIndex(sets=2, line_bytes=32, period_bytes=128, table=[0, 1, 1, 0])
    assert [idx.set_of(a) for a in (0, 32, 64, 96, 128, 160, 200, 250)] == [0, 1, 1, 0, 0, 1, 1, 0]


@pytest.mark.parametrize(
    "spec, sets, line",
    [
        (IndexSpec(), 3, 8),
        (IndexSpec(kind="bits", low_bit=9), 8, 128),
        (IndexSpec(kind="bit_list", bits=(7, 8)), 4, 32),
        (IndexSpec(kind="xor", masks=(0x1480, 0x2900, 0x5200)), 8, 128),
        (IndexSpec(kind="table", period_bytes=256, sets_of_lines=(0, 2, 1, 1, 2, 0, 0, 1)), 3, 32),
    ],
)
def test_compiled_form_agrees(spec, sets, line):
    idx = make_index(spec, sets=sets, line_bytes=line)
    c = idx.compiled()
    par = np.zeros((1, K.NCOL), dtype=np.int64)
    par[0, [K.C_NSETS, K.C_IKIND, K.C_ISHIFT, K.C_ILEN, K.C_IPERIOD]] = [
        sets,
        c.kind,
        c.shift,
        len(c.data),
        c.period_bytes,
    ]
    addrs = np.random.default_rng(1).integers(0, 1 << 20, 2000)
    expected = [idx.set_of(int(a)) for a in addrs]
    assert [K.set_of(int(a), par, 0, c.data) for a in addrs] == expected
    # the engine marks a power-of-two set count or period, which the kernel then masks
    modulus = sets if c.kind == K.MODULO else c.period_bytes
    if c.kind != K.MASKS and modulus & (modulus - 1) == 0:
        par[0, K.C_IPOW2] = modulus
        assert [K.set_of(int(a), par, 0, c.data) for a in addrs] == expected
