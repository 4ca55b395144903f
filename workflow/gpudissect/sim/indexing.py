"""Set-index functions: which set of a cache (or TLB level) an address goes to.

Every index function takes a **byte address** (not a line number) and returns a set number in
``[0, sets)``. Using byte addresses keeps the profile's bit numbers the paper's bit numbers (the
Kepler texture L1 uses address bits 7-8, TPDS section 4.3) and lets TLB levels use the same
functions on 2 MB pages (bit 21 is then the lowest page-number bit).

Each function also has a compiled form (`CompiledIndex`) that the numba kernels evaluate:

- ``MODULO``: ``set = (address >> shift) mod sets`` (``bits``; any set count, e.g. 7 TLB sets)
- ``MASKS``:  ``set bit k = parity(address & mask_k)`` (``bit_list`` and ``xor``)
- ``TABLE``:  ``set = table[(address mod period) >> line_shift]`` (``table``)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MODULO, MASKS, TABLE = 0, 1, 2
INDEX_KINDS = ("bits", "bit_list", "xor", "table")


@dataclass(frozen=True)
class IndexSpec:
    """The ``index:`` block of a cache or TLB level, as the profile gives it."""

    kind: str = "bits"
    low_bit: int | None = None  # bits: defaults to log2(line_bytes)
    bits: tuple[int, ...] = ()  # bit_list
    masks: tuple[int, ...] = ()  # xor
    period_bytes: int | None = None  # table
    sets_of_lines: tuple[int, ...] = ()  # table


@dataclass(frozen=True)
class CompiledIndex:
    """Numba-friendly form: a kind code, a shift, an int64 data array and a period."""

    kind: int
    shift: int
    data: np.ndarray
    period_bytes: int


def _parity(value: int) -> int:
    return bin(value).count("1") & 1


class SetIndex:
    """Base class: ``set_of(address_bytes) -> set``; ``compiled()`` for the kernels."""

    sets: int

    def set_of(self, address_bytes: int) -> int:
        raise NotImplementedError

    def compiled(self) -> CompiledIndex:
        raise NotImplementedError


class BitsIndex(SetIndex):
    """Contiguous bits: ``set = (address >> low_bit) mod sets`` (the textbook mapping)."""

    def __init__(self, *, sets: int, low_bit: int) -> None:
        self.sets, self.low_bit = sets, low_bit

    def set_of(self, address_bytes: int) -> int:
        return (address_bytes >> self.low_bit) % self.sets

    def compiled(self) -> CompiledIndex:
        return CompiledIndex(MODULO, self.low_bit, np.zeros(1, np.int64), 0)


class XorIndex(SetIndex):
    """Set bit k is the parity of ``address & masks[k]`` (a hash; one-bit masks = bit list)."""

    def __init__(self, *, masks: tuple[int, ...]) -> None:
        self.masks = tuple(int(m) for m in masks)
        self.sets = 1 << len(self.masks)

    def set_of(self, address_bytes: int) -> int:
        return sum(_parity(address_bytes & m) << k for k, m in enumerate(self.masks))

    def compiled(self) -> CompiledIndex:
        return CompiledIndex(MASKS, 0, np.array(self.masks or (0,), np.int64), 0)


class BitListIndex(XorIndex):
    """Explicit address bits: ``set = sum(bit_{bits[k]}(address) << k)``."""

    def __init__(self, *, bits: tuple[int, ...]) -> None:
        self.bits = tuple(int(b) for b in bits)
        super().__init__(masks=tuple(1 << b for b in self.bits))


class TableIndex(SetIndex):
    """A lookup table over one period: ``set = table[(address mod period) // line_bytes]``."""

    def __init__(self, *, sets: int, line_bytes: int, period_bytes: int, table) -> None:
        self.sets, self.line_bytes, self.period_bytes = sets, line_bytes, period_bytes
        self.table = np.asarray(table, dtype=np.int64)

    def set_of(self, address_bytes: int) -> int:
        return int(self.table[(address_bytes % self.period_bytes) // self.line_bytes])

    def compiled(self) -> CompiledIndex:
        shift = self.line_bytes.bit_length() - 1
        return CompiledIndex(TABLE, shift, self.table.copy(), self.period_bytes)


def make_index(spec: IndexSpec, *, sets: int, line_bytes: int) -> SetIndex:
    """The index object for a validated ``IndexSpec`` (``line_bytes``: line or page size)."""
    if spec.kind == "bits":
        low_bit = spec.low_bit if spec.low_bit is not None else line_bytes.bit_length() - 1
        return BitsIndex(sets=sets, low_bit=low_bit)
    if spec.kind == "bit_list":
        return BitListIndex(bits=spec.bits)
    if spec.kind == "xor":
        return XorIndex(masks=spec.masks)
    if spec.kind == "table":
        return TableIndex(
            sets=sets,
            line_bytes=line_bytes,
            period_bytes=spec.period_bytes,
            table=spec.sets_of_lines,
        )
    raise ValueError(f"unknown index kind {spec.kind!r}; allowed: {', '.join(INDEX_KINDS)}")
