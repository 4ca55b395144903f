"""Linear algebra over GF(2) on address vectors held as Python ints (bit j = address bit j):
the tools of the index function as a linear map (Maurice et al., RAID 2015)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def parity(x: int) -> int:
    return bin(x).count("1") & 1


class Basis:
    """A basis in reduced echelon form: each vector has a pivot (its highest set bit) that no
    other vector has."""

    def __init__(self, vectors: Iterable[int] = ()) -> None:
        self.rows: dict[int, int] = {}  # pivot bit -> vector
        for v in vectors:
            self.insert(v)

    @property
    def dim(self) -> int:
        return len(self.rows)

    @property
    def vectors(self) -> list[int]:
        return [self.rows[p] for p in sorted(self.rows)]

    def reduce(self, v: int) -> int:
        """`v` minus its part in the span (0 when `v` is in the span)."""
        for p in sorted(self.rows, reverse=True):
            if v >> p & 1:
                v ^= self.rows[p]
        return v

    def contains(self, v: int) -> bool:
        return self.reduce(v) == 0

    def insert(self, v: int) -> bool:
        """Add `v`; False when it is already in the span."""
        v = self.reduce(v)
        if v == 0:
            return False
        p = v.bit_length() - 1
        for q, row in list(self.rows.items()):
            if row >> p & 1:
                self.rows[q] = row ^ v
        self.rows[p] = v
        return True

    def random_member(self, rng: np.random.Generator) -> int:
        """A uniformly random vector of the span other than 0 (0 when the span is {0})."""
        vectors = self.vectors
        if not vectors:
            return 0
        while True:
            v = 0
            for row, pick in zip(vectors, rng.integers(0, 2, len(vectors)), strict=True):
                if pick:
                    v ^= row
            if v:
                return v


def annihilator(kernel: Iterable[int], bits: Iterable[int]) -> list[int]:
    """A basis of the vectors m over `bits` with parity(m & k) = 0 for every k in `kernel`: the
    rows of a matrix whose kernel (on those bits) is `kernel`'s span, in reduced echelon form.
    """
    bits = sorted(bits)
    basis = Basis(kernel)
    # the kernel's reduced echelon form: pivots are determined, the free bits give one row each
    free = [b for b in bits if b not in basis.rows]
    rows = []
    for f in free:
        m = 1 << f
        for p, row in basis.rows.items():
            if row >> f & 1:
                m |= 1 << p
        rows.append(m)
    return Basis(rows).vectors


def same_row_space(a: Iterable[int], b: Iterable[int]) -> bool:
    """Whether two sets of rows span the same space (two index matrices that agree up to an
    invertible relabelling of the set bits)."""
    ba, bb = Basis(a), Basis(b)
    return ba.dim == bb.dim and all(bb.contains(v) for v in ba.vectors)


def labels(masks: list[int], lines: np.ndarray) -> np.ndarray:
    """Set label of each address under the rows `masks`: bit k = parity(address & masks[k])."""
    out = np.zeros(len(lines), dtype=np.int64)
    a = np.asarray(lines, dtype=np.int64)
    for k, m in enumerate(masks):
        x = a & np.int64(m)
        bit = np.zeros(len(a), dtype=np.int64)
        while np.any(x):
            bit ^= x & 1
            x = x >> 1
        out |= bit << k
    return out
