"""Array builders shared by both backends: the exact memory contents an experiment runs on."""

from __future__ import annotations

import numpy as np

ELEMENT_BYTES = 4  # chains hold 32-bit element indices


def stride_chain(*, array_bytes: int, stride_bytes: int) -> np.ndarray:
    """The P-chase array of Mei & Chu: A[i] = (i + s) mod N, in 4-byte elements.

    Walking j = A[j] from 0 visits every s-th element and wraps around; one pass over the array
    takes ceil(N / s) steps.
    """
    if array_bytes % ELEMENT_BYTES or stride_bytes % ELEMENT_BYTES:
        raise ValueError(
            f"array_bytes ({array_bytes}) and stride_bytes ({stride_bytes}) must be "
            f"multiples of {ELEMENT_BYTES}"
        )
    n = array_bytes // ELEMENT_BYTES
    s = stride_bytes // ELEMENT_BYTES
    if not 0 < s <= n:
        raise ValueError(
            f"stride_bytes {stride_bytes} must be positive and at most array_bytes {array_bytes}"
        )
    # (i + s) mod n without a modulo over the whole array: i + s, then the last s wrap to 0..s-1
    # (the chains of an L2 sweep hold tens of millions of elements)
    chain = np.arange(s, n + s, dtype=np.uint64 if n + s > 2**32 else np.uint32)
    chain[n - s :] -= n
    return chain.astype(np.uint32, copy=False)


def stride_cycle(*, array_bytes: int, stride_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """The elements a walk of `stride_chain` from element 0 visits, in order over one cycle
    (every multiple of gcd(s, N)), and the value each holds: the same walk over an array that
    holds nothing else (a sparse chase)."""
    chain = stride_chain(array_bytes=array_bytes, stride_bytes=stride_bytes)
    n = len(chain)
    s = stride_bytes // ELEMENT_BYTES
    positions = (np.arange(n // np.gcd(s, n), dtype=np.int64) * s) % n
    return positions, chain[positions]


def chain_pass_steps(*, array_bytes: int, stride_bytes: int) -> int:
    """Steps of one pass over a stride chain starting at element 0."""
    n = array_bytes // ELEMENT_BYTES
    s = stride_bytes // ELEMENT_BYTES
    return -(-n // s)


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, ascending: in one pass where `values` is already non-decreasing
    (the sequences of a chase mostly are), else by np.unique."""
    a = np.asarray(values)
    if a.size < 2:
        return a.copy()
    d = a[1:] != a[:-1]
    if (a[1:] >= a[:-1]).all():
        return a[np.r_[True, d]]
    return np.unique(a)


def all_distinct(values: np.ndarray) -> bool:
    """Whether no value repeats (one pass where `values` is strictly increasing; else one
    sort, some 20 times faster than numpy's hashing `unique` on a chain's offsets)."""
    a = np.asarray(values)
    if a.size < 2 or (a[1:] > a[:-1]).all():
        return True
    s = np.sort(a, axis=None)
    return bool((s[1:] != s[:-1]).all())
