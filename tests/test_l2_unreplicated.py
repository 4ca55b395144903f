"""The L2 size where an L2 in two partitions keeps no near copy of a far line
(tests/data/l2_unreplicated_twin.yaml, a GPU the code has not been tuned on): every footprint
that fits is served half from the near partition and half from the far one, by address, so the
smallest footprints hold two hit levels side by side. Both must count as L2 hits, and DRAM as
the miss, in `l2` and in `cache_stage1`, with gpu.yaml's (automatic) ranges.

Expectations, derived by hand from the profile (SM 0, partition 0, cg path): a near hit costs
200 + sm_cycles[0] (5) + slice_cycles (0, 3, 6, 9, 12, each on an equal share of the slices)
= 205-217 cycles, median 211; a far hit 180 more, 385-397, median 391; a miss the DRAM's
650. Slices alternate partitions, so half the lines are far. The L2 is 2048 sets x 20 ways
x 128 B = 5242880 bytes (LRU, contiguous set bits): that footprint fits; the next one swept
(5 MiB + 80 KiB, the automatic grid's 1/64 of the L2) puts 21 lines in 640 sets, which then
miss on every pass (a cyclic walk under LRU): 640 x 21 / 41600 = 32 % of its accesses at
DRAM latency.

The flush copy (Lashgar Sec. 3.3) of 1 MiB, 8-byte elements in blocks of 256 threads on all
8 SMs: 4096 warps of 256 B, 8 x 64 = 512 resident. Unflushed, every line hits, at the latency
of the SM that reads it: 200 + mean sm_cycles (33 / 8) + mean slice_cycles (6) + 180 x the far
half = 300.1 cycles = 200.1 ns at 1.5 GHz, so the copy takes 4096 x 200.1 / 512 = 1601 ns.
Flushed, every line misses and DRAM bounds it: 256 B / (0.8 x 200 GB/s) = 1.6 ns a warp,
4096 x 1.6 = 6554 ns. A model that reads every hit slower than 200 cycles as a miss bills the
unflushed copy DRAM time too, and the gap vanishes.
"""

from pathlib import Path

import numpy as np
import pytest
import yaml

from gpudissect.analysis.caches import cache_levels
from gpudissect.analysis.common.misses import FirstMissDetector
from gpudissect.analysis.l2 import l2, l2_flush
from gpudissect.backends.requests_sim import run_copy
from gpudissect.backends.sim import SimBackend
from gpudissect.config import load
from gpudissect.experiments.l2_flush import CopyWork
from gpudissect.sweep import run_experiment
from gpudissect.traces import read_trace

REPO = Path(__file__).resolve().parents[1]
TWIN = REPO / "tests/data/l2_unreplicated_twin.yaml"
L2_BYTES = 5242880
NEXT_BYTES = L2_BYTES + L2_BYTES // 64


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    gpu = yaml.safe_load((REPO / "config/gpu.yaml").read_text())
    doc = {
        "devices": [{"name": "unrep", "backend": "sim", "profile": str(TWIN)}],
        "experiments": {k: gpu["experiments"][k] for k in ("l2", "cache_stage1", "l2_flush")},
    }
    path = tmp_path_factory.mktemp("unrep") / "config.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load(path, base_dir=REPO)


def _run(config, experiment, tmp_path):
    return read_trace(run_experiment(config.device("unrep"), experiment, out=tmp_path / "t.pq"))


def test_l2_reads_the_size_and_both_distances(config, tmp_path):
    trace = _run(config, "l2", tmp_path)
    q = l2.analyse(trace.data, provenance=trace.provenance)["elements"]["l2"]
    assert q["size_bytes"]["value"] == L2_BYTES
    assert q["size_bytes"]["bracket_bytes"] == [L2_BYTES, NEXT_BYTES]
    assert abs(q["hit_latency_cycles"]["value"] - 211) <= 2
    assert abs(q["far_hit_latency_cycles"]["value"] - 391) <= 2
    assert abs(q["far_share"]["value"] - 0.5) < 0.05
    assert q["miss_latency_cycles"]["value"] == pytest.approx(650, abs=2)


def test_cache_stage1_reads_the_l2_size(config, tmp_path):
    trace = _run(config, "cache_stage1", tmp_path)
    doc = cache_levels.analyse(trace.data, provenance=trace.provenance)
    q = doc["elements"]["l2"]
    assert q["size_bytes"]["value"] == L2_BYTES
    assert q["miss_latency_cycles"]["value"] == pytest.approx(650, abs=2)
    # the fastest hit level, not a median between near (211) and far (391)
    assert abs(q["hit_latency_cycles"]["value"] - 211) <= 2
    assert "hit at 2 levels" in q["hit_latency_cycles"]["evidence"]
    assert doc["paths"]["cg"]["levels"][0]["reference_hit_latency_cycles"] == pytest.approx(
        211, abs=2
    )


def test_two_hit_levels_in_the_reference_are_hits_and_dram_is_the_miss():
    # seeded: hits at N(206, 4) (near) and N(386, 4) (far) while the size fits (2 MiB steps up
    # to 10 MiB), the far share wavering about one half by size (55 % in the two reference
    # sizes, 45 % in the third: its median is a near hit, theirs a far one, which a band of
    # one level read as "the smallest sizes already miss"); then a third of the accesses at
    # DRAM's 650 at 12 MiB and all of them from 14 MiB on
    rng = np.random.default_rng(3)
    sizes = np.arange(2, 18, 2) << 20
    far = [0.55, 0.55, 0.45, 0.5, 0.45, 0.55, 0.5, 0.5]
    dram = [0, 0, 0, 0, 0, 0.33, 1, 1]

    def group(far_share, dram_share, n=2048):
        lat = np.where(rng.random(n) < far_share, rng.normal(386, 4, n), rng.normal(206, 4, n))
        return np.where(rng.random(n) < dram_share, rng.normal(650, 4, n), lat)

    groups = [group(f, m) for f, m in zip(far, dram, strict=True)]
    assert np.median(groups[0]) > 370 and np.median(groups[2]) < 220
    det = FirstMissDetector().fit(sizes, groups)
    assert det.reference_ok
    assert [round(v) for v in det.hit_levels_] == [206, 386]
    assert (det.result.x_before, det.result.x_after) == (10 << 20, 12 << 20)
    assert 386 < det.result.threshold_cycles < 650


def test_one_level_keeps_its_old_band():
    # one hit level with a slower group 40 cycles up (inside 0.2 x hit: no gap a miss clears)
    rng = np.random.default_rng(4)
    sizes = np.arange(1, 7) << 20
    groups = [
        np.concatenate([rng.normal(280, 3, 1024), rng.normal(315, 3, 1024)]) for _ in sizes[:4]
    ] + [rng.normal(600, 4, 2048) for _ in sizes[4:]]
    det = FirstMissDetector().fit(sizes, groups)
    assert len(det.hit_levels_) == 1
    ref = np.concatenate(groups[:2])
    hit = np.median(ref)
    sigma = 1.4826 * np.median(np.abs(ref - hit))
    assert det.result.threshold_cycles == pytest.approx(hit + max(6 * sigma, 8, 0.2 * hit))
    assert (det.result.x_before, det.result.x_after) == (4 << 20, 5 << 20)


def test_the_flush_copy_times_carry_every_l2_latency_term():
    with SimBackend(profile_path=TWIN, seed=1) as backend:
        kept, flushed = (
            float(run_copy(backend, CopyWork(1 << 20, f, 24 << 20)).elapsed_ms[0]) * 1e6
            for f in (False, True)
        )
    assert kept == pytest.approx(1601, rel=0.02)
    assert flushed == pytest.approx(6554, rel=0.01)


def test_l2_flush_reads_the_size(config, tmp_path):
    trace = _run(config, "l2_flush", tmp_path)
    doc = l2_flush.analyse(trace.data, provenance=trace.provenance)
    assert doc["elements"]["l2"]["size_bytes"]["value"] == L2_BYTES


@pytest.mark.parametrize("name", ["l2_unreplicated_twin.yaml", "l2_slices_twin.yaml"])
def test_slices_of_many_addresses_is_slice_of_each(name):
    from gpudissect.sim.profile import load_profile

    spec = load_profile(REPO / "tests/data" / name).l2_slices
    addrs = np.random.default_rng(7).integers(0, 1 << 34, 2000)
    assert spec.slices_of(addrs).tolist() == [spec.slice_of(int(a)) for a in addrs]
