"""The sweep profile: where a sweep's wall time went (contract/profile.py), on the simulator
and through the cuda backend's driver stand-ins (backends/cuda_profile.py) over a fake driver."""

import json
import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

from gpudissect.backends.cuda_profile import (
    ProfiledContext,
    ProfiledDriver,
    ProfiledFunction,
    raw,
)
from gpudissect.config import load
from gpudissect.contract.backend import Backend, handles
from gpudissect.contract.profile import KINDS, PROFILE_TAG, SweepProfile, profiled_call
from gpudissect.families import family
from gpudissect.sweep import TIMING_TAG, run_experiment
from gpudissect.traces import read_trace

REPO = Path(__file__).resolve().parents[1]


def _logged(records, tag: str) -> dict:
    lines = [r.getMessage() for r in records if tag in r.getMessage()]
    assert len(lines) == 1, lines
    return json.loads(lines[0].split(tag, 1)[1])


@pytest.fixture(scope="module")
def classic_run(tmp_path_factory):
    """pchase_classic on the GTX780 twin, its log records kept: one run_chase per point."""
    cfg = load(REPO / "config" / "config.yaml", base_dir=REPO)
    device = cfg.device("gtx780")
    section = device.experiments["pchase_classic"] | {
        "saavedra": {"array_bytes": [16384], "max_stride_bytes": 256},
        "wong": {"stride_bytes": 32, "array_bytes": {"start": 12032, "stop": 12288, "step": 64}},
        "record_steps": 256,
    }  # 7 Saavedra strides (4 to 256 B) and 5 Wong sizes: 12 launches
    small = family("pchase_classic").parse_params(section, "pchase_classic")
    device = replace(
        device,
        params={**device.params, "pchase_classic": small},
        experiments={**device.experiments, "pchase_classic": section},
    )
    out = tmp_path_factory.mktemp("profile") / "t.parquet"
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("gpudissect.sweep")
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.INFO)
    try:
        trace = read_trace(run_experiment(device, "pchase_classic", out=out))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
    return trace, records


def test_sim_sweep_logs_a_profile_with_one_launch_per_point(classic_run):
    trace, records = classic_run
    profile = _logged(records, PROFILE_TAG)
    timing = _logged(records, TIMING_TAG)
    assert profile["backend"] == "sim"
    # pchase_classic makes one run_chase per point of its trace; the simulator counts each as a
    # launch, and no other backend call
    points = trace.data["point"].nunique()
    assert points == 12
    assert profile["launches"] == points
    assert profile["backend_calls"] == points
    # the same wall time as the timing line, split into parts that add up to it
    assert profile["wall_s"] == pytest.approx(timing["elapsed_s"], abs=2e-3)
    parts = profile["run_s"] + profile["trace_write_s"] + profile["setup_s"]
    assert parts == pytest.approx(profile["wall_s"], abs=2e-3)
    assert profile["backend_s"] + profile["experiment_host_s"] == pytest.approx(
        profile["run_s"], abs=2e-3
    )
    # the simulator makes no driver calls: its time inside the backend is all host work
    assert all(profile[f"{k}_s"] == 0 for k in KINDS)
    assert profile["backend_host_s"] == pytest.approx(profile["backend_s"], abs=1e-3)
    assert profile["backend_s"] > 0


def test_profile_is_not_in_the_trace(classic_run):
    trace, _ = classic_run
    text = json.dumps(trace.provenance)
    assert "backend_calls" not in text and "elapsed_s" not in text


# --- nesting: a handler that calls run_chase counts once ---------------------------------------
@dataclass(frozen=True)
class _Twice:
    n: int


class _Nesting(Backend):
    kind = "profile-test"
    calls_are_launches = True

    def device_info(self):
        return {}

    def facts(self):
        raise NotImplementedError

    @property
    def supports_carveout(self):
        return False

    @profiled_call
    def run_chase(self, work, *, carveout_pct, seed=0):
        time.sleep(0.002)
        return work

    def clocks(self):
        return {}


@handles("profile-test", _Twice)
def _twice(backend, work):
    return [backend.run_chase(i, carveout_pct=None) for i in range(work.n)]


def test_backend_calls_made_inside_a_backend_call_count_once():
    b = _Nesting()
    b.run(_Twice(3))  # one call, which makes three run_chase calls inside it
    b.run_chase(7, carveout_pct=None)  # one call
    p = b.sweep_profile
    assert p.backend_calls == 2
    assert p.calls["launch"] == 2
    assert p.backend_s >= 4 * 0.002


# --- the cuda stand-ins over a fake driver -------------------------------------------------------
class _FakeEvent:
    def __init__(self, at):
        self.at = at
        self.recorded = None

    def record(self, stream=None):
        self.recorded = ("recorded", stream)

    def synchronize(self):
        time.sleep(0.003)

    def time_since(self, other):
        if not isinstance(other, _FakeEvent):  # pycuda's C++ takes only its own events
            raise TypeError("not an Event")
        return self.at - other.at


class _FakeDriver:
    """The parts of pycuda.driver the stand-ins wrap; device memory is a dict of arrays."""

    class MemoryError(Exception):
        pass

    def __init__(self):
        self.memory = {}
        self.events = 0

    def mem_alloc(self, nbytes):
        address = 4096 * (len(self.memory) + 1)
        self.memory[address] = np.zeros(nbytes, np.uint8)
        return address

    def memcpy_htod(self, dest, src):
        b = np.frombuffer(np.ascontiguousarray(src).tobytes(), np.uint8)
        self.memory[dest][: len(b)] = b

    def memcpy_dtoh(self, dest, src):
        dest.view(np.uint8)[:] = self.memory[src][: dest.nbytes]

    def to_device(self, ary):
        address = self.mem_alloc(ary.nbytes)
        self.memcpy_htod(address, ary)
        return address

    def memset_d32(self, dest, value, count):
        self.memory[dest][: 4 * count].view(np.uint32)[:] = value

    def Event(self):  # noqa: N802 - pycuda's name
        self.events += 1
        return _FakeEvent(self.events * 10.0)

    def get_version(self):
        return (12, 4)


def test_driver_stand_in_counts_copies_and_bytes_and_passes_values_through():
    fake, profile = _FakeDriver(), SweepProfile()
    drv = ProfiledDriver(fake, profile)
    d = drv.mem_alloc(64)
    host = np.arange(16, dtype=np.uint32)  # 64 bytes
    drv.memcpy_htod(d, host)
    back = np.zeros(8, dtype=np.uint32)  # 32 bytes
    drv.memcpy_dtoh(back, d)
    assert back.tolist() == list(range(8))
    e = drv.to_device(np.ones(3, dtype=np.uint64))  # 24 bytes
    assert fake.memory[e].view(np.uint64).tolist() == [1, 1, 1]
    drv.memset_d32(d, 7, 2)
    assert fake.memory[d][:8].view(np.uint32).tolist() == [7, 7]
    assert drv.get_version() == (12, 4)  # anything else reaches the driver as it is
    assert drv.MemoryError is _FakeDriver.MemoryError
    assert profile.calls["alloc"] == 1
    assert (profile.calls["htod"], profile.copy_bytes["htod"]) == (2, 64 + 24)
    assert (profile.calls["dtoh"], profile.copy_bytes["dtoh"]) == (1, 32)
    assert profile.calls["memset"] == 1
    assert profile.calls["launch"] == profile.calls["sync"] == 0


def test_event_stand_ins_wait_as_sync_and_compare_as_pycuda_events():
    fake, profile = _FakeDriver(), SweepProfile()
    drv = ProfiledDriver(fake, profile)
    start, end = drv.Event(), drv.Event()
    start.record()
    end.record("stream")
    assert raw(end).recorded == ("recorded", "stream")
    end.synchronize()
    assert end.time_since(start) == 10.0  # the fake refuses anything but its own events
    assert profile.calls["sync"] == 1 and profile.seconds["sync"] >= 0.003


def test_context_and_function_stand_ins():
    profile = SweepProfile()

    class _Ctx:
        handle = 1234

        def synchronize(self):
            time.sleep(0.002)

    class _Fn:
        def __init__(self):
            self.calls = []
            self.num_regs = 17

        def prepared_call(self, grid, block, *args, shared_size=0):
            self.calls.append((grid, block, args, shared_size))

    ctx, fn = ProfiledContext(_Ctx(), profile), ProfiledFunction(_Fn(), profile)
    ctx.synchronize()
    fn.prepared_call((1, 1), (32, 1, 1), 5, 6, shared_size=128)
    fn.prepared_call((2, 1), (32, 1, 1), 7, shared_size=0)
    assert raw(fn).calls[0] == ((1, 1), (32, 1, 1), (5, 6), 128)
    assert fn.num_regs == 17 and ctx.handle == 1234
    assert raw(ctx) is not ctx and isinstance(raw(ctx), _Ctx)
    assert profile.calls["launch"] == 2
    assert profile.calls["sync"] == 1 and profile.seconds["sync"] >= 0.002


def test_gpu_benchmark_tabulates_a_logged_profile(classic_run, tmp_path):
    # benchmarks/bench_gpu_pipeline.py reads the profile back from a sweep's log
    from benchmark_module import load_benchmark

    bench = load_benchmark("bench_gpu_pipeline")
    _, records = classic_run
    log = tmp_path / "pchase_classic.log"
    log.write_text("\n".join(f"INFO gpudissect.sweep: {r.getMessage()}" for r in records) + "\n")
    profile = bench._sweep_profile(log)
    assert profile == _logged(records, PROFILE_TAG)
    assert bench._sweep_seconds(log) == _logged(records, TIMING_TAG)["elapsed_s"]
    table = bench.profile_table([("sim0/pchase_classic", profile)]).splitlines()
    assert len(table) == 3
    row = [c.strip() for c in table[2].strip("|").split("|")]
    head = [c.strip() for c in table[0].strip("|").split("|")]
    assert row[0] == "sim0/pchase_classic"
    assert row[head.index("launches")] == "12"
    assert bench._sweep_profile(tmp_path / "absent.log") is None


@pytest.mark.gpu
def test_cuda_chase_launch_is_profiled(pchase_backend):
    # one chase of 1 MiB at a 128-B stride on the cg path, long enough (100000 warm-up loads,
    # some 20 ms) that its wait shows in the profile's 0.1-ms rounding: the array goes up once,
    # one P-chase launch and one wait, latencies and indices come back (2 x 2048 x 4 bytes)
    from gpudissect.contract.backend import ChaseWork
    from gpudissect.patterns import stride_chain

    chain = stride_chain(array_bytes=1 << 20, stride_bytes=128)
    work = ChaseWork(
        path="cg",
        chain=chain,
        start_index=0,
        warmup_steps=100_000,
        record_steps=2048,
        shared_buffer_bytes=16384,
    )
    p = pchase_backend.sweep_profile
    before = p.summary(wall_s=0, run_s=0, write_s=0, backend="cuda")
    result = pchase_backend.run_chase(work, carveout_pct=100)
    after = p.summary(wall_s=0, run_s=0, write_s=0, backend="cuda")
    delta = {k: after[k] - before[k] for k in after if isinstance(after[k], (int, float))}
    assert len(result.latency_cycles) == 2048
    assert delta["backend_calls"] == 1
    assert delta["launches"] == 1
    assert delta["sync_calls"] == 1 and delta["sync_s"] > 0
    assert delta["htod_bytes"] == 1 << 20
    assert delta["dtoh_bytes"] == 2 * 2048 * 4
    assert delta["backend_s"] >= delta["sync_s"] + delta["launch_s"]
