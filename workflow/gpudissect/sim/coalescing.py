"""How a warp's loads reach the request tables: the coalescing of one load instruction's
thread addresses into blocks (`_groups`), the order the issue units serve instructions in
(`_unit_order`), and the address patterns of Lashgar et al. (`merger_addresses`: UNQ and
MergerK). `outstanding.py` runs the tables on what these produce."""

from __future__ import annotations

import functools

import numpy as np
from numba import njit

WARP_THREADS = 32


@njit(cache=True)
def _groups_loop(blocks, n_loads, warp_threads):
    """`_groups` on the flat (thread-major) block numbers: dense block ids in sorted order of the
    block numbers, then per instruction the distinct blocks in order of their first thread."""
    n = blocks.size
    threads = n // n_loads
    order = np.argsort(blocks, kind="mergesort")
    dense = np.empty(n, np.int64)
    nb = 0
    for k in range(n):
        if k > 0 and blocks[order[k]] != blocks[order[k - 1]]:
            nb += 1
        dense[order[k]] = nb
    n_blocks = nb + 1 if n > 0 else 0
    n_instr = -(-threads // warp_threads) * n_loads
    g_instr = np.empty(n, np.int64)
    g_block = np.empty(n, np.int64)
    g_threads = np.zeros(n, np.int64)
    i_gstart = np.empty(n_instr, np.int64)
    i_gcount = np.zeros(n_instr, np.int64)
    ng = 0
    for i in range(n_instr):
        w, j = i // n_loads, i % n_loads
        i_gstart[i] = ng
        for t in range(w * warp_threads, min(threads, (w + 1) * warp_threads)):
            b = dense[t * n_loads + j]
            g = i_gstart[i]
            while g < ng and g_block[g] != b:
                g += 1
            if g == ng:  # a block this instruction has not touched yet
                g_instr[ng] = i
                g_block[ng] = b
                ng += 1
            g_threads[g] += 1
        i_gcount[i] = ng - i_gstart[i]
    return g_instr[:ng], g_block[:ng], g_threads[:ng], i_gstart, i_gcount, n_blocks


def _groups(addresses: np.ndarray, block_bytes: int):
    """Coalesce: per warp load (instruction ``w * N + j``), the distinct blocks and their
    thread counts, in order of each block's first thread; blocks renumbered densely."""
    threads, n_loads = addresses.shape
    blocks = np.ascontiguousarray(addresses // block_bytes, dtype=np.int64).ravel()
    return _groups_loop(blocks, n_loads, WARP_THREADS)


@functools.lru_cache(maxsize=256)
def _unit_order(warps: int, n_loads: int, units: int):
    """Instruction ids each unit serves, load-major then warp: unit u has warps u, u+U, ..."""
    order, start = [], [0]
    for u in range(units):
        mine = [w * n_loads + j for j in range(n_loads) for w in range(u, warps, units)]
        order.extend(mine)
        start.append(len(order))
    return np.array(order, np.int64), np.array(start, np.int64)


def merger_addresses(
    *, threads: int, loads_per_thread: int, threads_per_block: int = 1, block_bytes: int = 128
) -> np.ndarray:
    """The paper's patterns: UNQ (``threads_per_block=1``, a unique block per load) and MergerK
    (``K`` neighbouring threads load the same block). Shape ``(threads, loads_per_thread)``."""
    if threads < 1 or loads_per_thread < 1 or threads_per_block < 1:
        raise ValueError("threads, loads_per_thread and threads_per_block must be >= 1")
    groups = -(-threads // threads_per_block)
    t = np.arange(threads)[:, None]
    j = np.arange(loads_per_thread)[None, :]
    return ((j * groups + t // threads_per_block) * block_bytes).astype(np.int64)
