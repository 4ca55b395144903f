"""L1 eviction sets and index function (`l1_sets`): the GF(2) algebra, the packing of tests
into pointer walks, the family on simulated L1s whose ways, sets, index and policy it must
recover from the traces alone (a hashed index, a bit field, a non-power-of-two set count), the
policy rule on hand-made traces, and a GPU check (`pytest -m gpu`)."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpudissect.analysis.caches.l1_decisions import hit_threshold
from gpudissect.analysis.caches.l1_sets import analyse, figure_table
from gpudissect.analysis.common import gf2
from gpudissect.backends.sim import SimBackend
from gpudissect.experiments import l1_sets as e
from gpudissect.experiments.pointer_walk import WalkTest, pack

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests/data"


def _params(**over) -> e.L1SetsParams:
    base = dict(
        enabled=True,
        line_bytes=128,
        window_bytes=1 << 21,
        shared_buffer_bytes=8192,
        carveout_pct=0,
        calibration_lines=32,
        max_stride_lines=40,
        max_footprint_lines=192,
        walk_passes=3,
        miss_tolerance=2,
        targets=3,
        pool_factor=2.0,
        max_pool_lines=1024,
        set_passes=4,
        timed_passes=2,
        initial_groups=8,
        probe_batch=128,
        max_probes=4000,
        stop_factor=6,
        check_probes=32,
        policy_repeats=4,
        max_reduction_tests=2500,
        max_launches=20000,
        seed=1,
    )
    return e.L1SetsParams(**{**base, **over})


def _doc(profile: str, **over) -> dict:
    backend = SimBackend(profile_path=DATA / profile, seed=3)
    data = e.run(backend, _params(**over), device=None)
    return analyse(data, provenance={"device": "sim"})


def _strides(doc) -> dict[int, int]:
    return {r["stride_lines"]: r["measured_lines"] for r in doc["stride_validation"]["strides"]}


def test_annihilator_is_the_index_matrix_up_to_relabelling():
    # set bits b0 = a7 ^ a9, b1 = a8: kernel over bits 7-9 is {a7 ^ a9}, so the rows span
    # {a7 ^ a9, a8}; a relabelled matrix (b0 ^ b1, b1) spans the same space
    kernel = [(1 << 7) | (1 << 9)]
    rows = gf2.annihilator(kernel, range(7, 10))
    assert gf2.same_row_space(rows, [(1 << 7) | (1 << 9), 1 << 8])
    assert gf2.same_row_space(rows, [(1 << 7) | (1 << 8) | (1 << 9), 1 << 8])
    assert not gf2.same_row_space(rows, [1 << 7, 1 << 8])
    labels = gf2.labels(rows, np.array([0, 1 << 7, 1 << 9, (1 << 7) | (1 << 9)]))
    assert labels[0] == labels[3] and labels[1] == labels[2] and labels[0] != labels[1]


def test_packing_gives_each_visit_its_own_word_and_times_within_the_sector():
    # line 5 visited, then 3 other lines, then timed: slots 0 and 1 of line 5 (one sector)
    tests = [WalkTest(np.array([5, 1, 2, 3, 5]), (4,))] * 8
    launches = pack(
        tests, window_bytes=1 << 20, line_bytes=128, shared_buffer_bytes=8192, carveout_pct=None
    )
    # 16 words per line: each line visited twice per test for line 5, so 8 tests fit one launch
    assert len(launches) == 1
    off = launches[0].work.offsets_bytes
    assert len(np.unique(off)) == len(off)
    rec = launches[0].work.record_steps.astype(int)
    # every timed visit reads the sector of the visit before it (5 visits per test)
    for r in rec:
        assert off[r] // 32 == off[r - 4] // 32
    # a ninth test needs a second launch (line 5 has no words left)
    assert (
        len(
            pack(
                tests + tests[:1],
                window_bytes=1 << 20,
                line_bytes=128,
                shared_buffer_bytes=8192,
                carveout_pct=None,
            )
        )
        == 2
    )


@pytest.fixture(scope="module")
def hashed():
    return _doc("unseen_l1_hashed.yaml")


def test_hashed_l1_ways_sets_index_and_policy(hashed):
    # tests/data/unseen_l1_hashed.yaml: 4 ways, 32 sets, set bit k = a(7+k) ^ a(12+k) ^
    # a(17+k); inside the 2 MiB window (bits 7-20) the last mask loses bit 21: rows
    # 0x21080, 0x42100, 0x84200, 0x108400, 0x10800
    l1 = hashed["elements"]["l1d"]
    assert l1["ways_per_set"]["value"] == [4]
    assert l1["sets"]["value"] == 32
    assert l1["set_index_bits"]["value"] is None  # hashed, not a bit list
    index = hashed["index_function"]
    assert index["linear"] is True
    masks = [int(m, 16) for m in index["masks"]["value"]]
    truth = [0x21080, 0x42100, 0x84200, 0x108400, 0x10800]
    assert gf2.same_row_space(masks, truth)
    assert l1["policy"]["value"] == "lru"


def test_hashed_l1_capacity_predicted_at_every_stride(hashed):
    v = hashed["stride_validation"]
    assert [r["stride_lines"] for r in v["strides"]] == list(range(1, 41))
    assert v["agree"]["value"] is True
    # stride 1: 32 sets x 4 ways = 128 lines; the hash spreads other strides unevenly
    measured = _strides(hashed)
    assert measured[1] == 128
    assert min(measured.values()) < 64
    table = figure_table(None, hashed)
    assert list(table["predicted_lines"]) == list(table["measured_lines"])


def _l1_size_doc(tmp_path, size_bytes, carveout=None, buffer=None):
    series = [
        {"carveout_pct": 50, "shared_buffer_bytes": buffer, "l1d": {"size_bytes": {"value": 1}}},
        {
            "carveout_pct": carveout,
            "shared_buffer_bytes": buffer,
            "l1d": {"size_bytes": {"value": size_bytes}},
        },
    ]
    path = tmp_path / "l1_size.json"
    path.write_text(json.dumps({"series": series[1:] if carveout is None else series}))
    return {"l1_size": str(path)}


def test_walks_the_data_array_limits_are_compared_with_the_measured_l1_size(tmp_path):
    # the hashed twin's 128 lines (32 sets x 4 ways) are its data array too: with that size
    # every stride is still a set's overflow, predicted exactly
    backend = SimBackend(profile_path=DATA / "unseen_l1_hashed.yaml", seed=3)
    data = e.run(backend, _params(), device=None)
    doc = analyse(data, provenance={"device": "sim"}, inputs=_l1_size_doc(tmp_path, 16384))
    v = doc["stride_validation"]
    assert v["data_lines"]["lines"] == 128
    assert {r["limited_by"] for r in v["strides"]} == {"set"}
    assert v["agree"]["value"] is True
    # an L1 size of 96 lines: the strides whose walks no set limits below it (stride 1: 128
    # lines) are predicted to stop at 96 lines, and the 128 measured there disagree
    doc = analyse(data, provenance={"device": "sim"}, inputs=_l1_size_doc(tmp_path, 96 * 128))
    v = doc["stride_validation"]
    data_limited = [r for r in v["strides"] if r["limited_by"] == "data"]
    assert data_limited and all(r["predicted_lines"] == 96 for r in data_limited)
    assert not any(r["agree"] for r in data_limited)
    assert v["agree"]["value"] is False and "data array" in v["agree"]["evidence"]


def test_the_l1_size_of_the_sweeps_carveout_and_buffer_is_the_one_read(tmp_path):
    from gpudissect.analysis.caches.l1_sets import _data_lines

    inputs = _l1_size_doc(tmp_path, 222336, carveout=0, buffer=16384)
    assert _data_lines(inputs, [0], 16384)["bytes"] == 222336
    assert _data_lines(inputs, [50], 16384)["bytes"] == 1
    assert _data_lines(inputs, [0], 65536) is None
    assert _data_lines({}, [0], 16384) is None


def test_hashed_scan_resistant_l1():
    # tests/data/unseen_l1_hashed_srrip.yaml: 4 ways, 64 sets, set bit k = a(7+k) ^ a(13+k) ^
    # a(20-k), SRRIP with hit priority: lines that hit outlive lines touched once, so a target
    # timed after its candidates depends on what the tests before left; the overload test
    # does not
    doc = _doc("unseen_l1_hashed_srrip.yaml", max_footprint_lines=320, max_pool_lines=1024)
    l1 = doc["elements"]["l1d"]
    assert l1["ways_per_set"]["value"] == [4]
    assert all(s["verified"] for s in doc["eviction_sets"])
    assert l1["sets"]["value"] == 64
    masks = [int(m, 16) for m in doc["index_function"]["masks"]["value"]]
    truth = [(1 << (7 + k)) | (1 << (13 + k)) | (1 << (20 - k)) for k in range(6)]
    assert gf2.same_row_space(masks, truth)
    assert doc["stride_validation"]["agree"]["value"] is True
    # LRU's victims in the first two sequences, but a_0, hit once, outlives W new lines
    assert l1["policy"]["value"] == "srrip"


def test_bit_field_l1():
    # tests/data/unseen_l1_bits.yaml: 4 ways, 16 sets, set = address bits 7-10. Stride 2
    # lines reaches the 8 even sets (32 lines), 16 lines one set (4 lines)
    doc = _doc("unseen_l1_bits.yaml", max_stride_lines=16)
    l1 = doc["elements"]["l1d"]
    assert l1["ways_per_set"]["value"] == [4]
    assert l1["sets"]["value"] == 16
    assert l1["set_index_bits"]["value"] == [7, 8, 9, 10]
    assert l1["policy"]["value"] == "lru"
    measured = _strides(doc)
    assert measured[1] == 64 and measured[2] == 32 and measured[16] == 4 and measured[3] == 64
    assert doc["stride_validation"]["agree"]["value"] is True


def test_non_power_of_two_sets_are_not_linear_but_modulo():
    # tests/data/unseen_l1_48_sets.yaml: 64-byte lines, 4 ways, set = line mod 48: no GF(2)
    # map fits; line mod 48 does. Stride 3 reaches 16 sets (64 lines), stride 2 24 (96)
    doc = _doc("unseen_l1_48_sets.yaml", line_bytes=64, window_bytes=1 << 20, max_stride_lines=12)
    index = doc["index_function"]
    assert index["linear"] is False and "not linear" in index["undetermined"]
    assert index["modulo"]["value"] == 48
    assert doc["elements"]["l1d"]["ways_per_set"]["value"] == [4]
    measured = _strides(doc)
    assert measured[2] == 96 and measured[3] == 64 and measured[1] == 192
    assert doc["stride_validation"]["agree"]["value"] is True


def _policy_trace(victims: dict[int, list[float]]) -> pd.DataFrame:
    # calibration: 4 lines, first pass 300 cycles, second 40; then policy tests whose probed
    # line a_i reads 300 (gone) or 40 (there) as `victims[seq][i]` says
    rows = []
    for k, lat in enumerate([300] * 4 + [40] * 4):
        rows.append(("calibrate", 0, 0, 4, k, lat, 0))
    test = 1
    for seq, gone in victims.items():
        for i, g in enumerate(gone):
            for r in range(4):
                lat = 300 if r < round(4 * g) else 40
                rows.append(("policy", seq, i, 4, 0, lat, test))
                test += 1
    df = pd.DataFrame(
        rows, columns=["kind", "subject", "detail", "set_lines", "access", "latency_cycles", "test"]
    )
    df["point"] = df["test"]
    df["address_bytes"] = 0
    df["line_bytes"] = 128
    df["window_bytes"] = 1 << 20
    df["sm_clock_mhz"] = 1000.0
    return df


@pytest.mark.parametrize(
    "victims, policy",
    [
        ({0: [1, 0, 0, 0, 0], 1: [0, 1, 0, 0, 0]}, "lru"),
        ({0: [1, 0, 0, 0, 0], 1: [1, 0, 0, 0, 0]}, "fifo"),
        # tree-PLRU over 4 ways after a0..a3 and a0 again: the tree points at the pair of
        # a2, a3, and in it away from a3 (used last): a2
        ({0: [1, 0, 0, 0, 0], 1: [0, 0, 1, 0, 0]}, "plru"),
        ({0: [0.25, 0.25, 0.25, 0.25, 0], 1: [0.25, 0.5, 0, 0.25, 0]}, "random"),
        # the third sequence: a_0 hit again, W new lines, a_0 timed
        ({0: [1, 0, 0, 0, 0], 1: [0, 1, 0, 0, 0], 2: [1]}, "lru"),
        ({0: [1, 0, 0, 0, 0], 1: [0, 1, 0, 0, 0], 2: [0]}, "srrip"),
        ({0: [1, 0, 0, 0, 0], 1: [1, 0, 0, 0, 0], 2: [0]}, "non-lru"),
        ({0: [1, 0, 0, 0, 0], 1: [0, 1, 0, 0, 0], 2: [0.5]}, "non-lru"),
    ],
)
def test_policy_from_which_line_went(victims, policy):
    from gpudissect.analysis.caches.l1_decisions import evicted
    from gpudissect.analysis.caches.l1_sets import _policy

    data = _policy_trace(victims)
    data["evicted"] = evicted(data["latency_cycles"], 170)
    assert _policy(data)["value"] == policy


@pytest.mark.gpu
def test_gpu_walk_times_hits_and_misses(tmp_path, nvcc):
    from gpudissect.backends.cuda import CudaBackend
    from gpudissect.devices import detect_arch
    from gpudissect.kernels import compile_kernel

    arch = detect_arch(0)
    for kernel in e.KERNELS:
        compile_kernel(
            REPO / f"kernels/{kernel}.cu", arch=arch, output=tmp_path / f"{kernel}.cubin"
        )
    lines = np.arange(64, dtype=np.int64) * 37
    other = lines + 3
    # more lines than any L1 holds (256 KiB of unified L1/shared array on Hopper)
    evict = 4096 + np.arange(4096, dtype=np.int64)
    walk = np.concatenate([lines, lines, other, evict, evict, other, lines])
    n = len(walk)
    timed = tuple(range(128)) + tuple(range(n - 128, n))
    launches = pack(
        [WalkTest(walk, timed)],
        window_bytes=1 << 24,
        line_bytes=128,
        shared_buffer_bytes=8192,
        carveout_pct=0,
    )
    with CudaBackend(index=0, cubin_dir=tmp_path) as backend:
        (r,) = [backend.run(launch.work) for launch in launches]  # checks the final address
    lat = r.latency_cycles
    first, second, back, kept = (np.median(lat[i : i + 64]) for i in (0, 64, 128, 192))
    print(
        f"first touches {first} cycles, second {second}; after the eviction walk: lines "
        f"touched once {back}, lines that hit once {kept}"
    )
    # the lines touched once come back from the L2 (the calibration's misses)
    assert second < back <= first
    assert hit_threshold(lat[64:128], lat[128:192]) is not None


@pytest.mark.gpu
def test_gpu_overloaded_walk_misses_in_every_pass_and_a_small_one_never(tmp_path, nvcc):
    # the premise of the eviction-set tests on the GPU: a cyclic walk of more lines than any
    # L1 holds misses in each timed pass; one of a few dozen lines, after its first pass, not
    from gpudissect.analysis.caches.l1_decisions import overloaded
    from gpudissect.backends.cuda import CudaBackend
    from gpudissect.devices import detect_arch
    from gpudissect.kernels import compile_kernel

    arch = detect_arch(0)
    compile_kernel(
        REPO / "kernels/pointer_walk.cu", arch=arch, output=tmp_path / "pointer_walk.cubin"
    )
    big = np.arange(3000, dtype=np.int64) * 5
    small = 20000 + np.arange(40, dtype=np.int64) * 3
    tests = [
        WalkTest(np.tile(big, 3), tuple(range(2 * 3000, 3 * 3000))),
        WalkTest(np.tile(small, 4), tuple(range(2 * 40, 4 * 40))),
    ]
    launches = pack(
        tests, window_bytes=1 << 24, line_bytes=128, shared_buffer_bytes=32768, carveout_pct=0
    )
    with CudaBackend(index=0, cubin_dir=tmp_path) as backend:
        lat = np.concatenate([backend.run(launch.work).latency_cycles for launch in launches])
    hits = lat[3000 : 3000 + 80]
    threshold = (float(np.median(hits)) + float(np.median(lat[:3000]))) / 2
    print(
        f"3000-line walk: median {np.median(lat[:3000])} cycles, "
        f"{int(np.sum(lat[:3000] > threshold))} misses; 40-line walk: median "
        f"{np.median(hits)}, {int(np.sum(hits > threshold))} misses (threshold {threshold})"
    )
    assert overloaded(lat[:3000], threshold, 3000)
    assert not overloaded(hits, threshold, 40)


def test_a_reduction_past_its_test_budget_is_given_up():
    doc = _doc("unseen_l1_hashed.yaml", max_reduction_tests=5, targets=1)
    assert doc["elements"]["l1d"]["ways_per_set"]["value"] is None
    assert doc["eviction_sets"] == []


def test_topology_takes_the_l1_geometry_index_kind_and_masks_from_l1_sets(tmp_path):
    # tests/data/unseen_l1_hashed_topology.yaml: 6 ways, 16 sets, set bit k = a(7+k) ^
    # a(13+k), k = 0..3: masks 0x2080, 0x4100, 0x8200, 0x10400 (all inside the 2 MiB window).
    # Beside it a `caches` document that gave up on the sets (its reason must not win).
    from gpudissect.topology.build import build_topology

    doc = _doc("unseen_l1_hashed_topology.yaml")
    gave_up = {"value": None, "undetermined": "the sweep stopped before every line missed"}
    caches = {
        "analysis": "caches",
        "elements": {"l1d": {q: dict(gave_up) for q in ("sets", "ways_per_set", "set_index_bits")}},
    }
    paths = []
    for name, d in (("caches", caches), ("l1_sets", doc)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(d))
    topo = build_topology("sim", paths, ("caches", "l1_sets"))
    l1 = topo["elements"]["l1d"]
    assert l1["sets"]["value"] == 16 and l1["sets"]["experiment"] == "l1_sets"
    assert l1["ways_per_set"]["value"] == [6]
    assert l1["set_index_bits"]["value"] is None
    assert "hashed" in l1["set_index_bits"]["undetermined"]
    assert l1["set_index_bits"]["experiment"] == "l1_sets"
    assert l1["index_kind"]["value"] == "xor"
    masks = [int(m, 16) for m in l1["index_masks"]["value"]]
    assert gf2.same_row_space(masks, [0x2080, 0x4100, 0x8200, 0x10400])
