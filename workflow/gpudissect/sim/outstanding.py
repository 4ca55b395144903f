"""Outstanding memory requests of one SM: an MSHR table or a pending request table (PRT).

This simulates the kernel of Lashgar, Salehi & Baniasadi, "A Case Study in Reverse Engineering
GPGPUs: Outstanding Memory Handling Resources" (Listing 1): one thread block of ``threads``
threads, ``N`` independent loads per thread, ``__syncthreads(); clock(); loads;
__syncthreads(); clock()``. Addresses go in, per-thread elapsed cycles come out; nothing here
knows where the spikes of the paper are.

Mechanism (section 2 of the paper, and GPGPU-sim's MSHR which the paper takes as its model):

- **Load/store units.** ``issue_units`` pipelines work in parallel; warp ``w`` is served by unit
  ``w mod issue_units`` (the paper: "memory issue and writeback of different warps can be
  processed in parallel ... up to 96 memory requests", i.e. 3 warps on the M2070). A unit takes
  its warps' load instructions in program order, round-robin over warps (load 0 of every warp,
  then load 1...). Inside a unit, each request (a coalesced group of threads, see below) costs
  ``issue_cycles`` to issue and each reply ``writeback_cycles`` to write to the register file
  of the threads it serves; a unit writes replies back in issue order. This serialisation is
  the slope from 1 to 32 threads (UNQ: one request per thread) and the smaller first change
  after ``32 * issue_units`` threads, when a second warp shares a unit.
- **Coalescing.** The threads of one warp load are grouped by ``block_bytes`` block.
- **MSHR** (``kind: mshr``). Each group needs the table entry of its block: it merges into a
  live entry of the same block while that entry holds fewer than ``merge_capacity`` thread
  requests, otherwise it allocates a free entry and sends one memory request. Threads beyond the
  capacity are replayed when that entry is released, without blocking the unit (GPGPU-sim's
  MSHR, which the paper takes as its model: a full entry refuses the access, which is retried).
  With no free entry the unit stalls until the earliest release. An entry is released once all
  its threads are written back. Merger16/32 on an 8-thread entry thus take two or four round
  trips from the first warp on, which hides the later table saturation (the paper saw no clear
  spike for them: "another resource may have been saturated").
- **PRT** (``kind: prt``). A warp load instruction takes one entry for all its requests (one
  memory request per distinct block); with no free entry the unit stalls. The entry is released
  when the last of its requests is written back. With ``request_slots`` the SM also holds at
  most that many requests (distinct blocks) over all entries: an entry holds a slot per request
  until its release, and a request that finds none free waits for the earliest release, so a
  table of uncoalesced instructions can saturate within a warp, before its entries run out.
- **Scoreboard.** A warp has at most ``per_warp_limit`` load instructions outstanding; load
  ``j`` waits until load ``j - per_warp_limit`` of its warp is written back.
- **Measurement.** Both clocks are read after a barrier. The second barrier completes when
  every warp's loads are written back, so every thread sees the completion time of the whole
  block (plus ``overhead_cycles`` for the clock and barrier instructions). With
  ``block_threads`` the threads form several co-resident blocks of one SM (thread ``t`` in block
  ``t // block_threads``) that start together and share its units, table and slots; each thread
  sees its own block's completion.

A memory request returns ``memory_latency_cycles`` after it is sent (the L2 hit latency in the
paper's setting, whose data fit in L2), optionally with seeded Gaussian jitter.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
from numba import njit

from gpudissect.exceptions import ProfileError

from .coalescing import WARP_THREADS, _groups, _unit_order

REQUEST_KINDS = ("mshr", "prt")


@dataclass(frozen=True)
class RequestsSpec:
    """The ``requests:`` block of a device profile (minus ``cite``); one SM's resources."""

    kind: str  # "mshr" | "prt"
    entries: int  # MSHR entries, or PRT entries (one per warp memory instruction)
    merge_capacity: int = 1  # mshr: thread requests one entry can hold (ignored by prt)
    per_warp_limit: int | None = None  # scoreboard: outstanding loads per warp (None: no limit)
    issue_cycles: int = 1  # per request (coalesced group), serialised inside a unit
    writeback_cycles: int = 1  # per reply written back, serialised inside a load/store unit
    issue_units: int = 1  # load/store units serving different warps in parallel
    block_bytes: int = 128  # coalescing granularity: one request per distinct block
    request_slots: int | None = None  # prt: requests in flight over all entries (None: no limit)

    def __post_init__(self) -> None:
        if self.kind not in REQUEST_KINDS:
            raise ProfileError(
                f"requests.kind must be one of {', '.join(REQUEST_KINDS)}, got {self.kind!r}"
            )
        for name in ("entries", "merge_capacity", "issue_units", "block_bytes"):
            if getattr(self, name) < 1:
                raise ProfileError(f"requests.{name} must be >= 1, got {getattr(self, name)}")
        if self.request_slots is not None and self.request_slots < 1:
            raise ProfileError(
                f"requests.request_slots must be >= 1, got {self.request_slots}; leave it out "
                "for no limit"
            )
        if self.request_slots is not None and self.kind != "prt":
            raise ProfileError(
                "requests.request_slots applies to kind prt only (an MSHR entry is one request), "
                f"got kind {self.kind!r}"
            )
        if self.per_warp_limit is not None and self.per_warp_limit < 1:
            raise ProfileError(
                f"requests.per_warp_limit must be >= 1, got {self.per_warp_limit}; leave it out "
                "for no scoreboard limit"
            )
        if self.issue_cycles < 0 or self.writeback_cycles < 0:
            raise ProfileError(
                "requests.issue_cycles and requests.writeback_cycles must be >= 0, got "
                f"{self.issue_cycles} and {self.writeback_cycles}"
            )
        if self.block_bytes & (self.block_bytes - 1):
            raise ProfileError(
                f"requests.block_bytes must be a power of two, got {self.block_bytes}"
            )


@dataclass(frozen=True)
class RequestRun:
    """What one simulated launch produced."""

    elapsed_cycles: np.ndarray  # (threads,) t2 - t1 of every thread
    load_done_cycles: np.ndarray  # (warps, N) when each warp load was fully written back
    memory_requests: int  # requests sent to memory (MSHR allocations or PRT block requests)
    stall_cycles: float  # total time units waited for a free table entry


# ---------------------------------------------------------------------------------------------
# the event loop (numba); times are float64 cycles


@njit(cache=True)
def _simulate(
    is_prt, entries, merge_cap, limit, issue_c, wb_c, n_loads,
    g_instr, g_block, g_threads, i_gstart, i_gcount, unit_instrs, unit_start, latency, n_blocks,
    slots,
):  # fmt: skip
    n_instr = i_gstart.size
    n_units = unit_start.size - 1
    n_alloc_max = latency.size
    big = 1e300
    remaining = np.zeros(n_instr, np.int64)  # threads of each instruction not yet attached
    for i in range(n_instr):
        for g in range(i_gstart[i], i_gstart[i] + i_gcount[i]):
            remaining[i] += g_threads[g]
    done = np.zeros(n_instr, np.float64)
    unit_t = np.zeros(n_units, np.float64)
    wb_t = np.zeros(n_units, np.float64)
    fifo = unit_start[:-1].copy()  # next instruction (position in unit_instrs) of each unit
    blocked_on = -np.ones(n_units, np.int64)
    cur_alloc = -np.ones(n_blocks, np.int64)
    a_fill = np.zeros(n_alloc_max, np.float64)
    a_release = np.zeros(n_alloc_max, np.float64)
    a_merged = np.zeros(n_alloc_max, np.int64)
    a_alive = np.zeros(n_alloc_max, np.bool_)
    a_block = np.zeros(n_alloc_max, np.int64)
    i_alloc = -np.ones(n_instr, np.int64)
    n_alloc = 0
    free = entries
    stall = 0.0
    # events: (time, seq, unit, group, threads left, is_fifo); releases: (time, alloc)
    ev = [(0.0, 0, 0, 0, 0, 0)]
    ev.pop()
    rel = [(0.0, 0)]
    rel.pop()
    slot_free = slots  # prt request slots (slots == 0: unlimited)
    i_slots = np.zeros(n_instr, np.int64)  # slots each instruction holds
    slot_rel = [(0.0, 0)]  # (release time, slots) of the entries holding slots
    slot_rel.pop()

    def push_head(u, t):  # push unit u's next instruction, if its scoreboard lets it start
        if fifo[u] >= unit_start[u + 1]:
            return
        i = unit_instrs[fifo[u]]
        if limit > 0 and i % n_loads >= limit:
            prev = i - limit
            if remaining[prev] > 0:
                blocked_on[u] = prev
                return
            t = max(t, done[prev])
        heapq.heappush(ev, (t, fifo[u], u, i_gstart[i], g_threads[i_gstart[i]], 1))

    for u in range(n_units):
        push_head(u, 0.0)

    while len(ev) > 0:
        t, seq, u, g, k, is_fifo = heapq.heappop(ev)
        if unit_t[u] > t:
            heapq.heappush(ev, (unit_t[u], seq, u, g, k, is_fifo))
            continue
        while len(rel) > 0 and rel[0][0] <= t:  # retire released entries
            r, a = heapq.heappop(rel)
            if a_alive[a] and a_release[a] == r:
                a_alive[a] = False
                if cur_alloc[a_block[a]] == a:
                    cur_alloc[a_block[a]] = -1
                free += 1
        i = g_instr[g]
        first = g == i_gstart[i]
        if is_prt:
            if first:  # one entry for the whole instruction
                if free == 0:
                    while len(rel) > 0 and not (
                        a_alive[rel[0][1]] and a_release[rel[0][1]] == rel[0][0]
                    ):
                        heapq.heappop(rel)
                    if len(rel) == 0:  # every entry is held by an instruction still issuing
                        heapq.heappush(ev, (t + max(issue_c, 1.0), seq, u, g, k, is_fifo))
                        continue
                    r, a2 = heapq.heappop(rel)
                    a_alive[a2] = False
                    stall += r - t
                    t = r
                else:
                    free -= 1
                i_alloc[i] = n_alloc
                n_alloc += 1
                a_alive[i_alloc[i]] = True
            if slots > 0:  # one slot per request (distinct block), held until the entry's release
                while len(slot_rel) > 0 and slot_rel[0][0] <= t:
                    slot_free += heapq.heappop(slot_rel)[1]
                if slot_free == 0:
                    if len(slot_rel) == 0:  # every slot is held by an instruction still issuing
                        heapq.heappush(ev, (t + max(issue_c, 1.0), seq, u, g, k, is_fifo))
                        continue
                    r, c = heapq.heappop(slot_rel)
                    slot_free += c
                    stall += r - t
                    t = r
                slot_free -= 1
                i_slots[i] += 1
            a = i_alloc[i]
            a_fill[a] = t + latency[g]
        else:
            b = g_block[g]
            a = cur_alloc[b]
            if a >= 0 and a_merged[a] >= merge_cap:  # full entry: replay after its release
                heapq.heappush(ev, (a_release[a], seq, u, g, k, 0))
                a = -2
            elif a < 0:
                if free == 0:
                    t_free = t
                    while True:
                        r, a2 = heapq.heappop(rel)
                        if a_alive[a2] and a_release[a2] == r:
                            a_alive[a2] = False
                            if cur_alloc[a_block[a2]] == a2:
                                cur_alloc[a_block[a2]] = -1
                            t_free = r
                            break
                    stall += t_free - t
                    t = t_free
                else:
                    free -= 1
                a = n_alloc
                n_alloc += 1
                a_alive[a] = True
                a_block[a] = b
                a_fill[a] = t + latency[a]
                a_release[a] = 0.0
                a_merged[a] = 0
                cur_alloc[b] = a
        if a >= 0:
            m = k if is_prt else min(k, merge_cap - a_merged[a])
            a_merged[a] += m
            arrival = max(a_fill[a], t)
            wb_end = max(arrival, wb_t[u]) + wb_c
            wb_t[u] = wb_end
            a_release[a] = max(a_release[a], wb_end)
            if not is_prt or g == i_gstart[i] + i_gcount[i] - 1:
                heapq.heappush(rel, (a_release[a], a))
                if is_prt and slots > 0:
                    heapq.heappush(slot_rel, (a_release[a], i_slots[i]))
            done[i] = max(done[i], wb_end)
            remaining[i] -= m
            if k > m:  # threads beyond the merge capacity: replay after the release
                heapq.heappush(ev, (a_release[a], seq, u, g, k - m, 0))
            if remaining[i] == 0:
                for v in range(n_units):
                    if blocked_on[v] == i:
                        blocked_on[v] = -1
                        push_head(v, max(unit_t[v], done[i]))
        unit_t[u] = t + issue_c
        if is_fifo:  # next group of this instruction, or the unit's next instruction
            if g + 1 < i_gstart[i] + i_gcount[i]:
                heapq.heappush(ev, (unit_t[u], seq, u, g + 1, g_threads[g + 1], 1))
            else:
                fifo[u] += 1
                push_head(u, unit_t[u])
    end = 0.0
    for i in range(n_instr):
        end = max(end, done[i])
    for u in range(n_units):
        if blocked_on[u] >= 0 or fifo[u] < unit_start[u + 1]:
            end = big  # cannot happen: every instruction completes
    return done, n_alloc, stall, end


# ---------------------------------------------------------------------------------------------


def simulate_request_kernel(
    spec: RequestsSpec,
    *,
    addresses_bytes: np.ndarray,
    memory_latency_cycles: float,
    overhead_cycles: float = 0.0,
    latency_jitter_cycles: float = 0.0,
    rng: np.random.Generator | None = None,
    block_threads: int | None = None,
) -> RequestRun:
    """Run Listing 1 on one SM. ``addresses_bytes``: shape ``(threads, N)``, the byte address of
    load ``j`` of thread ``t``; ``block_threads``: threads per block (None: one block of all).
    Returns per-thread elapsed cycles and what happened."""
    addrs = np.asarray(addresses_bytes)
    if addrs.ndim != 2 or addrs.shape[0] < 1 or addrs.shape[1] < 1:
        raise ValueError(
            f"addresses_bytes must have shape (threads, loads per thread), got {addrs.shape}"
        )
    if not np.issubdtype(addrs.dtype, np.integer) or (addrs < 0).any():
        raise ValueError("addresses_bytes must hold non-negative integer byte addresses")
    if memory_latency_cycles < 0 or latency_jitter_cycles < 0:
        raise ValueError("memory_latency_cycles and latency_jitter_cycles must be >= 0")
    addrs = addrs.astype(np.int64)
    threads, n_loads = addrs.shape
    if block_threads is not None and (
        block_threads < 1 or (block_threads < threads and block_threads % WARP_THREADS)
    ):
        raise ValueError(
            f"block_threads must be >= 1, and a multiple of 32 below the {threads} threads, got "
            f"{block_threads}"
        )
    warps = -(-threads // WARP_THREADS)
    g_instr, g_block, g_threads, i_gstart, i_gcount, n_blocks = _groups(addrs, spec.block_bytes)
    unit_instrs, unit_start = _unit_order(warps, n_loads, spec.issue_units)
    n_latency = max(threads * n_loads, g_instr.size) + 1
    latency = np.full(n_latency, float(memory_latency_cycles))
    if latency_jitter_cycles > 0:
        if rng is None:
            raise ValueError("latency_jitter_cycles > 0 needs a seeded rng (np.random.Generator)")
        latency = np.maximum(
            1.0, np.round(latency + rng.normal(0.0, latency_jitter_cycles, n_latency))
        )
    done, n_alloc, stall, end = _simulate(
        spec.kind == "prt", spec.entries, spec.merge_capacity, spec.per_warp_limit or 0,
        float(spec.issue_cycles), float(spec.writeback_cycles), n_loads,
        g_instr, g_block, g_threads, i_gstart, i_gcount, unit_instrs, unit_start, latency,
        n_blocks, spec.request_slots or 0,
    )  # fmt: skip
    if end >= 1e299:  # pragma: no cover - the event loop left an instruction unissued
        raise RuntimeError("request simulation stalled; please report this with the inputs")
    memory_requests = int(n_alloc) if spec.kind == "mshr" else int(g_instr.size)
    load_done = done.reshape(warps, n_loads)
    if block_threads is None or block_threads >= threads:
        elapsed = np.full(threads, end + overhead_cycles, dtype=np.float64)
    else:  # each block's second barrier waits for its own warps only
        warp_block = np.arange(warps) // (block_threads // WARP_THREADS)
        block_end = np.zeros(int(warp_block[-1]) + 1)
        np.maximum.at(block_end, warp_block, load_done.max(axis=1))
        elapsed = block_end[np.arange(threads) // block_threads] + overhead_cycles
    return RequestRun(
        elapsed_cycles=elapsed,
        load_done_cycles=load_done,
        memory_requests=memory_requests,
        stall_cycles=float(stall),
    )


def run_request_kernel(
    spec: RequestsSpec,
    *,
    addresses_bytes: np.ndarray,
    memory_latency_cycles: float,
    overhead_cycles: float = 0.0,
    latency_jitter_cycles: float = 0.0,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Per-thread elapsed cycles (``t2 - t1``) of Listing 1; see ``simulate_request_kernel``."""
    return simulate_request_kernel(
        spec,
        addresses_bytes=addresses_bytes,
        memory_latency_cycles=memory_latency_cycles,
        overhead_cycles=overhead_cycles,
        latency_jitter_cycles=latency_jitter_cycles,
        rng=rng,
    ).elapsed_cycles
