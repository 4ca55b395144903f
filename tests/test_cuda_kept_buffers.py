"""The cuda backend's kept device buffers (`CudaBackend.kept_buffer`): a launch's records, a
sparse chase's scatter inputs and the L2-slice walks' buffers are allocated once a sweep and
grown on demand instead of allocated and freed every launch, with the same values read back.
Against a stand-in driver with addressed memory (no GPU)."""

from types import SimpleNamespace

import numpy as np

from gpudissect.backends.cuda import CudaBackend
from gpudissect.contract.backend import ChaseWork


class Memory:
    def __init__(self):
        self.bytes = np.zeros(1 << 20, np.uint8)
        self.top = 4096
        self.allocs = 0
        self.frees = 0

    def driver(self):
        mem = self

        class Buf:
            def __init__(self, n):
                self.address, self.n = mem.top, n
                mem.top += -(-n // 256) * 256
                mem.allocs += 1

            def __int__(self):
                return self.address

            def free(self):
                mem.frees += 1

        class Drv:
            mem_alloc = staticmethod(Buf)
            device_attribute = SimpleNamespace(MULTIPROCESSOR_COUNT="sms")

            def memcpy_htod(self, dst, src):
                b = np.ascontiguousarray(src).view(np.uint8).ravel()
                mem.bytes[int(dst) : int(dst) + b.size] = b

            def memcpy_dtoh(self, dst, src):
                view = dst.view(np.uint8).reshape(-1)
                view[:] = mem.bytes[int(src) : int(src) + view.size]

            def memset_d32(self, dst, value, n):
                mem.bytes[int(dst) : int(dst) + 4 * n].view(np.uint32)[:] = value

        return Drv()

    def u32(self, address, n):
        return self.bytes[int(address) : int(address) + 4 * n].view(np.uint32)


def _backend(mem):
    b = CudaBackend.__new__(CudaBackend)  # no driver: only what the handlers below use
    b.drv = mem.driver()
    b.context = SimpleNamespace(synchronize=lambda: None)
    b._kept, b._buffer, b._closers, b._modules, b._functions = {}, None, [], {}, {}
    return b


def test_records_come_back_from_kept_buffers_allocated_once_and_grown():
    mem = Memory()
    b = _backend(mem)
    launches = []

    def prepared_call(grid, block, *args, shared_size):
        d_lat, d_idx, steps = args[-2], args[-1], len(launches)
        n = int(args[3])  # record_steps
        mem.u32(d_lat, n)[:] = 1000 * steps + np.arange(n)
        mem.u32(d_idx, n)[:] = 7 * steps + np.arange(n)
        launches.append(n)

    fn = SimpleNamespace(prepared_call=prepared_call)
    got = []
    for steps in (64, 256, 64, 128):
        work = ChaseWork(
            path="cg",
            chain=np.zeros(16, np.uint32),
            start_index=0,
            warmup_steps=16,
            record_steps=steps,
            shared_buffer_bytes=8 * steps,
        )
        got.append(b._records(work, fn, (None, np.uint32(0), np.uint32(16), np.uint32(steps))))
    for i, ((lat, idx), steps) in enumerate(zip(got, (64, 256, 64, 128), strict=True)):
        assert np.array_equal(lat, 1000 * i + np.arange(steps)), i
        assert np.array_equal(idx, 7 * i + np.arange(steps)), i
    # two buffers at the first launch, two more when the records grow to 256; none after
    assert mem.allocs == 4 and mem.frees == 2
    b.close = CudaBackend.close.__get__(b)
    b.context = SimpleNamespace(pop=lambda: None, detach=lambda: None)
    b.lock = None
    b.close()
    assert mem.frees == 4 and b._kept == {}


def test_scatter_inputs_are_copied_into_kept_buffers():
    mem = Memory()
    b = _backend(mem)
    for n, wide in ((100, True), (40, True), (300, False)):
        positions = np.arange(n, dtype=np.int64) * 3
        work = SimpleNamespace(
            sparse_positions=positions, sparse_next=positions + 1, element_bytes=8 if wide else 4
        )
        pos, val = b.scatter_inputs(work)
        dt = np.uint64 if wide else np.uint32
        back = mem.bytes[int(pos) : int(pos) + 8 * n].view(np.uint64)
        assert np.array_equal(back, positions)
        size = np.dtype(dt).itemsize
        assert np.array_equal(mem.bytes[int(val) : int(val) + size * n].view(dt), positions + 1)
    # positions: 800 B, kept for 320 B, grown to 2400 B; values: 800 B, kept for 320 B, grown
    # to 1200 B (300 x 4): four allocations for three chases, against six
    assert mem.allocs == 4


def test_l2_slice_walks_share_their_buffers_and_read_their_own_latencies():
    from gpudissect.backends.l2slices_cuda import _walk

    mem = Memory()
    b = _backend(mem)
    b.device = SimpleNamespace(get_attribute=lambda key: 4)
    b._set_shared = lambda fn, **kw: None
    walks = []

    def prepared_call(grid, block, region, start, warmup, record, sm, claim, lat, res, shared_size):
        # the walking block lands on the SM asked for and ends on the host's final element
        assert mem.u32(claim, 1)[0] == 0 and mem.u32(res, 2).tolist() == [0xFFFFFFFF] * 2
        mem.u32(res, 2)[:] = (int(sm), int(start))
        mem.u32(lat, max(int(record), 1))[: int(record)] = 100 * len(walks) + np.arange(int(record))
        walks.append(int(record))

    fn = SimpleNamespace(prepared_call=prepared_call)
    work = SimpleNamespace(grid_blocks=None, final_index=lambda: 5)
    out = [
        _walk(b, fn, 0, work, sm=sm, warmup=8, record=record, shared=0)
        for sm, record in ((3, 0), (1, 32), (2, 16), (0, 32))
    ]
    assert [sm for _, sm in out] == [3, 1, 2, 0]
    assert [lat.tolist() for lat, _ in out] == [
        [],
        list(range(100, 132)),
        list(range(200, 216)),
        list(range(300, 332)),
    ]
    # claim, result, latency at the first walk; latency again once it needs 32 records
    assert mem.allocs == 4


def test_pointer_walks_copy_their_chain_and_steps_and_read_their_own_latencies():
    from gpudissect.backends.pointer_walk_cuda import run_pointer_walk
    from gpudissect.experiments.pointer_walk import PointerWalkWork

    mem = Memory()
    b = _backend(mem)
    b._buffer_bytes = b._last_bytes = 0
    b._pointer_walk_flush = (mem.driver().mem_alloc(256), 2)
    b._set_shared = lambda fn, **kw: None
    b.nvml = SimpleNamespace(sm_clock=lambda max_age_s: 1980.0)
    mem.allocs = 0
    seen = []

    def link(grid, block, base, d_off, n):
        seen.append(mem.bytes[int(d_off) : int(d_off) + 8 * int(n)].view(np.uint64).tolist())

    def walk(grid, block, start, n, d_rec, records, d_lat, d_end, flush, lines, shared_size):
        steps = mem.u32(d_rec, int(records) + 1).tolist()
        assert steps[-1] == 0  # the sentinel after the record steps
        mem.u32(d_lat, int(records))[:] = 10 * len(seen) + np.asarray(steps[:-1])
        mem.bytes[int(d_end) : int(d_end) + 8].view(np.uint64)[0] = int(start)

    kernels = {"link_words": link, "walk_ca": walk}
    b.function = lambda kernel, name, sig: SimpleNamespace(prepared_call=kernels[name])
    got = []
    for words, steps in ((64, (0, 5, 9)), (512, (1, 2, 3, 40, 41)), (32, (7,))):
        offsets = (np.arange(words, dtype=np.int64)[::-1] * 8).copy()
        work = PointerWalkWork(
            window_bytes=4096,
            offsets_bytes=offsets,
            record_steps=np.asarray(steps, np.uint32),
            shared_buffer_bytes=16384,
        )
        got.append((run_pointer_walk(b, work).latency_cycles.tolist(), offsets.tolist()))
    assert [lat for lat, _ in got] == [[10, 15, 19], [21, 22, 23, 60, 61], [37]]
    assert seen == [off for _, off in got]
    # the window buffer once, the four walk buffers at the first walk, the offsets, steps and
    # latencies again when the second walk needs more, none at the third: 8 (13 before, four a
    # walk)
    assert mem.allocs == 1 + 4 + 3
