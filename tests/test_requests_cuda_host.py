"""The host side of the SM-wide request launches (`backends/requests_cuda.py`,
`req_<path>_sm_n<N>`) against a stand-in driver with addressed memory (no GPU): the launches of
one point go out together and come back in one copy, and the rows and retries are those of the
code before, which read each launch back before the next (kept below as `_one_by_one`)."""

from types import SimpleNamespace

import numpy as np
import pytest

from gpudissect.backends.requests_cuda import MAX_SMID, SPIN_CYCLES, run_requests
from gpudissect.exceptions import GpuDissectError
from gpudissect.experiments.requests import RequestsResult, RequestsWork, pattern_offsets

SMS = 16


class Device:
    """Addressed device memory, a driver over it and `req_*_sm_*` as the kernel behaves: each
    launch, the blocks land on SMs as `placement(launch)` says (SM -> blocks received); the
    target SM's first `blocks` blocks take a slot, wait, count as gathered only when all of them
    arrived, and write their clocks either way. A block of a launch that gathered writes t1 =
    1000 + 10 b + m, t2 = 1500 + 100 b + m (m: launches that gathered before it, so a row read
    from the right launch does not depend on which launch it was); one that did not gather
    writes t1 = 0, t2 = 77777, which no row may show."""

    def __init__(self, placement):
        self.memory = np.zeros(1 << 22, np.uint8)
        self.top = 4096
        self.placement = placement
        self.launches: list[int] = []  # target of each launch
        self.copies: list[int] = []  # bytes of each device-to-host copy
        self.gathered_launches = 0
        self.drv = self._driver()

    def _driver(self):
        dev = self

        class Buf:
            def __init__(self, n):
                self.address = dev.top
                dev.top += -(-n // 256) * 256

            def __int__(self):
                return self.address

            def free(self):
                pass

        class Drv:
            device_attribute = SimpleNamespace(MULTIPROCESSOR_COUNT="count")
            mem_alloc = staticmethod(Buf)

            def pagelocked_zeros(self, n, dtype):
                return np.zeros(n, dtype)

            def memcpy_htod(self, dst, src):
                b = np.ascontiguousarray(src).view(np.uint8).ravel()
                dev.memory[int(dst) : int(dst) + b.size] = b

            def memcpy_dtoh(self, dst, src):
                dev.copies.append(dst.nbytes)
                view = dst.view(np.uint8).reshape(-1)
                view[:] = dev.memory[int(src) : int(src) + view.size]

            def memset_d32(self, dst, value, n):
                dev.memory[int(dst) : int(dst) + 4 * n] = 0

        return Drv()

    def u32(self, address, n):
        return self.memory[address : address + 4 * n].view(np.uint32)

    def prepared_call(self, grid, block, _d, _o, _t, blocks, target, spin, arrived, gathered,
                      _sink, clocks):  # fmt: skip
        assert grid == (SMS * int(blocks), 1) and int(spin) == SPIN_CYCLES
        target, blocks = int(target), int(blocks)
        received = self.placement(len(self.launches))
        self.launches.append(target)
        counts = self.u32(int(arrived), MAX_SMID)
        for sm, c in received.items():
            counts[sm] += c
        slots = min(received.get(target, 0), blocks)
        ok = received.get(target, 0) >= blocks
        stamps = self.memory[int(clocks) : int(clocks) + 16 * blocks].view(np.uint64)
        m = self.gathered_launches
        for b in range(slots):
            stamps[2 * b : 2 * b + 2] = (
                (1000 + 10 * b + m, 1500 + 100 * b + m) if ok else (0, 77777)
            )
        if ok:
            self.u32(int(gathered), 1)[0] += blocks
            self.gathered_launches += 1

    def backend(self):
        return SimpleNamespace(
            drv=self.drv,
            device=SimpleNamespace(get_attribute=lambda key: SMS),
            function=lambda *a: SimpleNamespace(prepared_call=self.prepared_call),
            context=SimpleNamespace(synchronize=lambda: None),
            sm_clock=lambda: 1980,
        )


def _one_by_one(backend, work: RequestsWork) -> RequestsResult:
    """The SM-wide launches as the code before ran them (its body, unchanged): each launch read
    back (its gathered count, and its clocks when timed) before the next."""
    from gpudissect.backends.requests_cuda import _buffers, _sm_clock

    drv = backend.drv
    n, threads, blocks, per_block = (
        work.loads_per_thread, work.threads, work.blocks, work.block_threads
    )  # fmt: skip
    fn = backend.function("requests", f"req_{work.path}_sm_n{n}", "PPIIIQPPPP")
    buffers = _buffers(backend)
    data_bytes = int(work.offsets_bytes.max()) + 4
    data = buffers.get("data", data_bytes)
    offsets = buffers.get("offsets", work.offsets_bytes.nbytes)
    sink = buffers.get("sink", 2 * threads * 4)
    arrived = buffers.get("arrived", MAX_SMID * 4)
    gathered = buffers.get("gathered", 4)
    clocks = buffers.get("block_clocks", 2 * blocks * 8)
    drv.memcpy_htod(offsets, np.ascontiguousarray(work.offsets_bytes.T))
    drv.memcpy_htod(data, buffers.pinned("data", data_bytes))
    sms = backend.device.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)
    grid = int(sms) * blocks
    counts = np.zeros(MAX_SMID, dtype=np.uint32)
    got = np.zeros(1, dtype=np.uint32)
    stamps = np.zeros(2 * blocks, dtype=np.uint64)
    block_of = np.arange(threads) // per_block
    out = np.empty((work.runs, threads), dtype=np.uint32)
    target = getattr(backend, "_requests_target_sm", 0)
    for r in range(-work.warmup_launches, work.runs):
        for _ in range(8):
            drv.memset_d32(arrived, 0, MAX_SMID)
            drv.memset_d32(gathered, 0, 1)
            fn.prepared_call(
                (grid, 1), (per_block, 1, 1), data, offsets, np.uint32(threads),
                np.uint32(blocks), np.uint32(target), np.uint64(SPIN_CYCLES), arrived, gathered,
                sink, clocks,
            )  # fmt: skip
            drv.memcpy_dtoh(got, gathered)
            if got[0] == blocks:
                break
            drv.memcpy_dtoh(counts, arrived)
            target = int(np.argmax(counts))
        else:
            raise GpuDissectError(
                f"requests: no SM held {blocks} co-resident blocks of {per_block} threads "
                f"(blocks received per SM: {sorted(set(counts[counts > 0].tolist()))}); the "
                "kernel needs them resident together (registers, shared memory)"
            )
        backend._requests_target_sm = target
        if r >= 0:
            drv.memcpy_dtoh(stamps, clocks)
            t1, t2 = stamps[0::2], stamps[1::2]
            out[r] = (t2[block_of] - t1.min()).astype(np.uint32)
    backend.context.synchronize()
    return RequestsResult(elapsed_cycles=out, sm_clock_mhz=_sm_clock(backend))


def _works():
    """Three points of two and three blocks: 1568 threads (800 + 768), 1100 (576 + 524), 2500
    (3 x 864, the last 772), one untimed and three or two timed launches."""
    for threads, n, runs in ((1568, 5, 3), (1100, 2, 3), (2500, 1, 2)):
        o = pattern_offsets(threads=threads, loads_per_thread=n, merge_threads=1, block_bytes=128)
        yield RequestsWork("cg", o, runs, 1)


def _run_both(placement):
    """The rows of every point run the new way and the old way, on devices placing alike."""
    rows = {}
    for name, run in (("batched", run_requests), ("one_by_one", _one_by_one)):
        dev = Device(placement)
        backend = dev.backend()
        rows[name] = ([run(backend, w).elapsed_cycles for w in _works()], dev)
    return rows


def _expected(work):
    # thread t of block b: t2 - min t1 = (1500 + 100 b + m) - (1000 + m)
    return np.tile(500 + 100 * (np.arange(work.threads) // work.block_threads), (work.runs, 1))


def test_every_launch_gathers_the_rows_and_launches_are_the_same_in_one_copy_a_point():
    rows = _run_both(lambda i: {0: 3, 1: 1})
    new, old = rows["batched"], rows["one_by_one"]
    for a, b, w in zip(new[0], old[0], _works(), strict=True):
        assert np.array_equal(a, b) and np.array_equal(a, _expected(w))
    assert new[1].launches == old[1].launches == [0] * 11
    # one copy a point (clocks and gathered counts of all its launches), against one a launch
    # and one more a timed launch before
    assert len(new[1].copies) == 3 and len(old[1].copies) == 11 + 8


def test_a_target_that_does_not_gather_is_retried_on_the_sm_with_most_blocks_and_kept():
    # SM 0 receives one block of each launch, SM 5 all of them: the first launch on SM 0 is
    # retried on SM 5, which every later launch and point then targets
    rows = _run_both(lambda i: {0: 1, 5: 3, 9: 2})
    new, old = rows["batched"], rows["one_by_one"]
    for a, b, w in zip(new[0], old[0], _works(), strict=True):
        assert np.array_equal(a, b) and np.array_equal(a, _expected(w))
    assert old[1].launches == [0] + [5] * 11
    # the whole first point went out on SM 0, its four launches again on SM 5
    assert new[1].launches == [0] * 4 + [5] * 4 + [5] * 7


def test_launches_that_gather_on_changing_sms_give_the_same_rows():
    # each launch's blocks gather on SM 3 or SM 11 (seeded), so a target found for one launch
    # fails for some later ones: each is retried where its blocks went, no row from a launch
    # that did not gather
    pick = np.random.default_rng(5).integers(0, 2, 200)

    def placement(i):
        good = (3, 11)[pick[i]]
        return {good: 3, 14 - good: 1, 7: 2}

    rows = _run_both(placement)
    new, old = rows["batched"], rows["one_by_one"]
    for a, b, w in zip(new[0], old[0], _works(), strict=True):
        assert np.array_equal(a, b) and np.array_equal(a, _expected(w))
    assert set(new[1].launches) == set(old[1].launches) == {0, 3, 11}


def test_no_sm_that_gathers_raises_after_eight_tries_as_before():
    errors = []
    for run in (run_requests, _one_by_one):
        dev = Device(lambda i: {2: 1, 4: 1})
        with pytest.raises(GpuDissectError) as exc:
            run(dev.backend(), next(_works()))
        errors.append(str(exc.value))
        tries_of_first = dev.launches if run is _one_by_one else dev.launches[4:]
        assert len(tries_of_first) == 8 - (0 if run is _one_by_one else 1)
    assert errors[0] == errors[1]
    assert (
        "no SM held 2 co-resident blocks of 800 threads (blocks received per SM: [1])"
        in (errors[0])
    )
