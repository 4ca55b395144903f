"""Request-table model: hand-derived timelines and the saturation points of Lashgar et al.

Conventions of every hand derivation below (see outstanding.py): a unit issues one request per
``issue_cycles`` (IC); a request sent at t returns at t + L; the unit writes replies back in
issue order, ``writeback_cycles`` (WB) each, so write-back ends at max(arrival, previous end) +
WB; an entry is released when its last reply is written back; elapsed = last write-back end.
"""

import numpy as np
import pytest

from gpudissect.exceptions import ProfileError
from gpudissect.sim.coalescing import merger_addresses
from gpudissect.sim.outstanding import (
    RequestsSpec,
    run_request_kernel,
    simulate_request_kernel,
)

L = 100


def run(spec, *, threads, loads=1, merge=1, latency=L):
    addrs = merger_addresses(threads=threads, loads_per_thread=loads, threads_per_block=merge)
    return simulate_request_kernel(spec, addresses_bytes=addrs, memory_latency_cycles=latency)


def mshr(entries, **kw):
    kw = {"issue_cycles": 1, "writeback_cycles": 1, **kw}
    return RequestsSpec(kind="mshr", entries=entries, **kw)


def prt(entries, **kw):
    kw = {"issue_cycles": 1, "writeback_cycles": 1, **kw}
    return RequestsSpec(kind="prt", entries=entries, **kw)


def test_four_entries_eight_unique_requests_second_wave_waits_one_latency():
    # requests 0..3 issue at t=0..3, return at 100..103, written back at 101..104 (released).
    # request 4 (t=4) finds the table full and waits for the first release at 101: it returns at
    # 201, written back at 202. Requests 5, 6, 7 issue at 102, 103, 104 (one release each),
    # written back at 203, 204, 205.
    r = run(mshr(4), threads=8)
    assert r.elapsed_cycles.tolist() == [205.0] * 8
    assert r.stall_cycles == 101 - 4
    assert r.memory_requests == 8
    # with room for all eight: issue 0..7, written back 101..108
    assert run(mshr(8), threads=8).elapsed_cycles[0] == 108


def test_mshr_merges_up_to_capacity_and_replays_the_rest():
    # Merger32: 32 threads, one block. Capacity 8: 8 threads take the entry (back at 100,
    # written back 101, released); the other 24 replay at 101 (new request, back 201, written
    # 202), 202 (-> 303) and 303 (-> 404): four round trips, four memory requests.
    r = run(mshr(128, merge_capacity=8), threads=32, merge=32)
    assert r.elapsed_cycles[0] == 404 and r.memory_requests == 4
    # capacity 32: one request for the whole warp, written back at 101
    r = run(mshr(128, merge_capacity=32), threads=32, merge=32)
    assert r.elapsed_cycles[0] == 101 and r.memory_requests == 1
    # Merger8 with capacity 8: four blocks, issued at 0..3, written back 101..104
    r = run(mshr(128, merge_capacity=8), threads=32, merge=8)
    assert r.elapsed_cycles[0] == 104 and r.memory_requests == 4


def test_mshr_merges_across_warps():
    # two warps on two units read one block at t=0; the second merges into the first's entry
    # (one memory request) and writes back at max(100, 0) + 1 = 101
    spec = mshr(1, merge_capacity=64, issue_units=2)
    addrs = np.zeros((64, 1), np.int64)
    r = simulate_request_kernel(spec, addresses_bytes=addrs, memory_latency_cycles=L)
    assert r.memory_requests == 1 and r.elapsed_cycles[0] == 101 and r.stall_cycles == 0


def test_prt_takes_one_entry_per_warp_instruction():
    # 3 warps x 1 load, 32 unique blocks each, one unit, 2 PRT entries.
    # instr 0: issue 0..31, back 100..131, written back 101..132 -> released at 132.
    # instr 1: issue 32..63, back 132..163, written back 133..164.
    # instr 2 at t=64: no entry until 132; issue 132..163, back 232..263, written 233..264.
    r = run(prt(2), threads=96)
    assert r.elapsed_cycles[0] == 264 and r.stall_cycles == 132 - 64
    assert r.memory_requests == 96
    # a third entry removes the wait: instr 2 issues 64..95, written back by 196
    assert run(prt(3), threads=96).elapsed_cycles[0] == 196
    # per instruction, not per request: one warp with 32 unique blocks needs one entry ...
    assert run(prt(1), threads=32).stall_cycles == 0
    # ... whereas an MSHR of 2 entries stalls for 30 of the 32 blocks
    assert run(mshr(2), threads=32).stall_cycles > 0
    # Merger32 (one request per instruction) still needs an entry per instruction:
    # instr 0 t=0 -> written 101, instr 1 t=1 -> 102, instr 2 waits for 101 -> 202
    assert run(prt(2), threads=96, merge=32).elapsed_cycles[0] == 202


def test_per_warp_limit_holds_the_next_load_until_the_oldest_completes():
    # one thread, 3 loads to distinct blocks, limit 2: loads 0 and 1 at t=0 and 1 (written
    # back 101 and 102); load 2 waits for load 0 (101), back at 201, written back 202.
    assert run(mshr(128, per_warp_limit=2), threads=1, loads=3).elapsed_cycles[0] == 202
    assert run(mshr(128), threads=1, loads=3).elapsed_cycles[0] == 103
    assert run(prt(44, per_warp_limit=2), threads=1, loads=3).elapsed_cycles[0] == 202


def test_issue_units_serve_warps_in_parallel():
    # one unit: the second warp's single request issues after the first warp's 32, at t=32,
    # and is written back at max(132, 132) + 1 = 133; with two units it goes at t=0 and is
    # written back at 101, so the end is warp 0's last write-back, 132
    assert run(mshr(128), threads=33).elapsed_cycles[0] == 133
    assert run(mshr(128, issue_units=2), threads=33).elapsed_cycles[0] == 132


def sweep(spec, *, loads, merge=1, latency=400):
    threads = np.arange(2, 1025, 2)
    times = np.array(
        [
            run(spec, threads=t, loads=loads, merge=merge, latency=latency).elapsed_cycles[0]
            for t in threads
        ]
    )
    return threads, times


def test_prt_request_slots_saturate_inside_a_warp():
    # 100 entries (never short), 64 request slots, one unit, one load per thread, UNQ.
    # 64 threads: instr 0 issues 0..31, written back 101..132 (released: 32 slots free at 132);
    # instr 1 issues 32..63, written back 133..164 -> elapsed 164, no stall.
    assert run(prt(100, request_slots=64), threads=64).elapsed_cycles[0] == 164
    # 66 threads: instr 2 (2 requests) at t=64 finds the 64 slots held; it waits for instr 0's
    # release at 132, issues 132, 133, returns 232, 233, written back 233, 234.
    r = run(prt(100, request_slots=64), threads=66)
    assert r.elapsed_cycles[0] == 234 and r.stall_cycles == 132 - 64
    # without the limit it issues at 64, 65, returns 164, 165: written back 165, 166
    assert run(prt(100), threads=66).elapsed_cycles[0] == 166
    # slots count requests, not threads: Merger32 makes one request per instruction, so 66
    # threads (3 requests) never wait
    assert run(prt(100, request_slots=64), threads=66, merge=32).stall_cycles == 0


def big_jumps(threads, times, *, over):
    """Thread counts where the time rises by more than ``over`` from the previous count."""
    return threads[1:][np.diff(times) > over].tolist()


M2070 = RequestsSpec(
    kind="mshr",
    entries=128,
    merge_capacity=8,
    per_warp_limit=4,
    issue_cycles=2,
    writeback_cycles=2,
    issue_units=3,
)
K20 = RequestsSpec(
    kind="prt", entries=44, per_warp_limit=3, issue_cycles=1, writeback_cycles=1, issue_units=16
)


def test_m2070_unq_one_load_jumps_between_128_and_130_threads():
    # 4 warps (128 threads) make 128 unique requests: they all fit the 128 entries, and the
    # last is issued by t = 64 x IC = 128 cycles (warps 0 and 3 share unit 0), well before the
    # first reply (t = 400). At 130 threads a 5th warp adds two requests: they find the table
    # full and wait for the first release (~L + WB), so they return about one latency later
    # than the others: the time jumps by nearly L. Between those points only serialisation
    # adds a few cycles per thread.
    r128 = run(M2070, threads=128, latency=400).elapsed_cycles[0]
    r130 = run(M2070, threads=130, latency=400).elapsed_cycles[0]
    r126 = run(M2070, threads=126, latency=400).elapsed_cycles[0]
    assert r130 - r128 > 0.5 * 400
    assert r128 - r126 <= 2 * M2070.writeback_cycles + 2 * M2070.issue_cycles
    threads, times = sweep(M2070, loads=1)
    assert big_jumps(threads, times, over=100)[0] == 130
    # the first, smaller change: a 4th warp shares unit 0 after 96 threads (3 units)
    assert times[threads == 96][0] == times[threads == 34][0] < times[threads == 98][0]


@pytest.mark.parametrize(
    ("loads", "merge", "first_spike"),
    [(2, 1, 66), (1, 2, 258), (2, 4, 258), (4, 8, 258)],
)
def test_m2070_saturates_at_128_unique_requests(loads, merge, first_spike):
    # UNQ N=2: 64 threads x 2 = 128 requests; Merger2/4/8 with N=1/2/4: 256 threads make
    # 256 x N / K = 128 blocks, each merged from K <= 8 threads into one entry
    threads, times = sweep(M2070, loads=loads, merge=merge)
    assert big_jumps(threads, times, over=100)[0] == first_spike


def test_m2070_merger16_and_32_have_no_table_spike():
    # K > 8 threads per block exceed the merge capacity: the rest replay one latency later, so
    # the baseline is already >= 2 round trips and table saturation hides under it
    for merge in (16, 32):
        threads, times = sweep(M2070, loads=1, merge=merge)
        assert big_jumps(threads[threads > 32], times[threads > 32], over=100) == []


@pytest.mark.parametrize(("loads", "first_spike"), [(2, 706), (3, 450)])
def test_k20_prt_saturates_at_44_warp_instructions(loads, first_spike):
    # N=2: 22 warps x 2 = 44 instructions fit; the 23rd warp (706 threads) overflows.
    # N=3: 14 warps x 3 = 42 fit; the 15th warp (450 threads) makes 45 > 44.
    threads, times = sweep(K20, loads=loads)
    assert big_jumps(threads, times, over=100)[0] == first_spike


def test_k20_one_load_never_fills_the_prt():
    # 1024 threads = 32 warps = 32 instructions < 44 entries
    threads, times = sweep(K20, loads=1)
    assert big_jumps(threads, times, over=100) == []


def test_jitter_is_seeded_and_run_request_kernel_returns_per_thread_times():
    addrs = merger_addresses(threads=64, loads_per_thread=2)
    kw = dict(addresses_bytes=addrs, memory_latency_cycles=L, latency_jitter_cycles=5.0)
    a = run_request_kernel(M2070, **kw, rng=np.random.default_rng(7))
    b = run_request_kernel(M2070, **kw, rng=np.random.default_rng(7))
    assert a.shape == (64,) and np.array_equal(a, b)
    with pytest.raises(ValueError, match="rng"):
        run_request_kernel(M2070, **kw)


def test_bad_specs_name_the_field():
    with pytest.raises(ProfileError, match="kind"):
        RequestsSpec(kind="queue", entries=4)
    with pytest.raises(ProfileError, match="entries"):
        RequestsSpec(kind="mshr", entries=0)
    with pytest.raises(ProfileError, match="per_warp_limit"):
        RequestsSpec(kind="prt", entries=4, per_warp_limit=0)
    with pytest.raises(ProfileError, match="request_slots must be >= 1"):
        RequestsSpec(kind="prt", entries=4, request_slots=0)
    with pytest.raises(ProfileError, match="request_slots applies to kind prt only"):
        RequestsSpec(kind="mshr", entries=4, request_slots=8)
    with pytest.raises(ValueError, match="shape"):
        simulate_request_kernel(M2070, addresses_bytes=np.zeros(4, int), memory_latency_cycles=L)


def test_blocks_of_one_sm_share_the_table_and_each_sees_its_own_completion():
    # 64 warps, one request per warp instruction (K = 32), IC = WB = 0, one unit: the 32 warps
    # of block 0 issue first (warp order) and take the 32 entries at t=0, back at L; block 1's
    # 32 instructions wait for those releases and return at 2L. With blocks of 1024 threads,
    # block 0's threads see L, block 1's 2L; as one block every thread sees 2L.
    spec = prt(32, issue_cycles=0, writeback_cycles=0)
    addrs = merger_addresses(threads=2048, loads_per_thread=1, threads_per_block=32)
    two = simulate_request_kernel(
        spec, addresses_bytes=addrs, memory_latency_cycles=L, block_threads=1024
    ).elapsed_cycles
    one = simulate_request_kernel(spec, addresses_bytes=addrs, memory_latency_cycles=L)
    assert np.all(two[:1024] == L) and np.all(two[1024:] == 2 * L)
    assert np.all(one.elapsed_cycles == 2 * L)
    with pytest.raises(ValueError, match="block_threads"):
        simulate_request_kernel(
            spec, addresses_bytes=addrs, memory_latency_cycles=L, block_threads=100
        )
