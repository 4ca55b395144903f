"""The conflict degree of a strided warp access under a hypothesised shared-memory bank
structure (the gcd bank model of `bank_model`; TPDS Sec. 6.2, NPC Sec. 4.1).

**The mapping of a hypothesis** (``B`` banks, each ``W`` bytes wide, device in mode ``M``):
successive ``m = min(M, W)``-byte words go to successive banks (``bank = (addr // m) mod B``); a
*bank row* is ``W`` bytes of every bank, so ``row = addr // (B * W)``; threads that read the same
row of a bank are served together (broadcast), and the warp needs as many passes as the busiest
bank has distinct rows: the conflict *degree*. A mode wider than the banks (``M > W``) cannot
exist on such banks; the hypothesis then maps by ``W``.

**Closed forms** for 32 threads and 4-byte elements at stride ``s > 0`` (``s = 0`` is a broadcast,
degree 1), each checked against the enumeration below and against the simulator's own mapping in
tests/test_bank_conflicts.py:

- ``M = W = 4`` (Fermi, Maxwell, Hopper): ``ceil(32 * gcd(s, B) / B)``; for ``B = 32`` the papers'
  ``gcd(s, 32)`` (TPDS Sec. 6.2, NPC Sec. 4.1).
- ``M = W = 8`` (Kepler's 8-byte mode), ``B = 32``: even ``s``: ``gcd(s / 2, 32)`` (thread ``i``
  reads 8-byte word ``i * s / 2``); odd ``s``: ``1`` when ``s = 1`` or ``s = 33 (mod 64)``, else
  ``2``. (Even threads ``2k`` read words ``s k``, odd threads ``2k + 1`` words ``s k + h`` with
  ``h = (s - 1) / 2``: each set alone hits 16 distinct banks, and a word of one set shares a bank
  with one of the other unless ``s^-1 h = 16 (mod 32)``, i.e. ``h = 16 (mod 32)``; ``s = 1``
  reads each word twice, a broadcast.)
- ``M = 4, W = 8`` (Kepler's 4-byte mode), ``B = 32``: ``ceil(gcd(s, 32) / 2)`` when ``s`` is a
  power of two up to 32 (words ``w`` and ``w + 32`` share a bank *and* a row), else
  ``gcd(s, 32)`` (stride 2: none; 4: 2-way; 6: 2-way, as TPDS Sec. 6.2 reports).
"""

from __future__ import annotations

import math

import numpy as np

WARP_THREADS = 32


def hypothesis_degree(
    stride_elements: int,
    *,
    banks: int,
    bank_width_bytes: int,
    mode_bytes: int,
    element_bytes: int = 4,
    threads: int = WARP_THREADS,
) -> int:
    """Conflict degree of ``index = t * stride`` under a hypothesised bank structure (module
    docstring), enumerated from the threads' byte addresses."""
    if stride_elements < 0:
        raise ValueError(f"stride_elements must be >= 0, got {stride_elements}")
    word = min(mode_bytes, bank_width_bytes)
    addrs = np.arange(threads, dtype=np.int64) * stride_elements * element_bytes
    first = addrs // word
    last = (addrs + element_bytes - 1) // word
    span = int((last - first).max()) + 1
    words = (first[:, None] + np.arange(span))[np.arange(span) <= (last - first)[:, None]]
    bank = words % banks
    row = (words * word) // (banks * bank_width_bytes)
    pairs = np.unique(bank * (int(row.max()) + 1) + row)
    return int(np.bincount(pairs // (int(row.max()) + 1)).max())


def gcd_degree(stride_elements: int, *, banks: int = 32, mode_bytes: int, bank_width_bytes: int):
    """The closed forms of the module docstring (4-byte elements, 32 threads)."""
    s = stride_elements
    if s == 0:
        return 1
    if mode_bytes == bank_width_bytes == 4:
        return math.ceil(WARP_THREADS * math.gcd(s, banks) / banks)
    if banks != 32:
        raise ValueError("the 8-byte closed forms are derived for 32 banks")
    if mode_bytes == bank_width_bytes == 8:
        if s % 2 == 0:
            return math.gcd(s // 2, 32)
        return 1 if s == 1 or s % 64 == 33 else 2
    if mode_bytes == 4 and bank_width_bytes == 8:
        g = math.gcd(s, 32)
        return (g + 1) // 2 if s <= 32 and s & (s - 1) == 0 else g
    raise ValueError(f"no closed form for mode {mode_bytes} on {bank_width_bytes}-byte banks")
