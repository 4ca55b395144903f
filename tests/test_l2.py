"""The L2 footprint family: twins' L2 sizes from latencies, near/far split on synthetic data."""

from pathlib import Path

import numpy as np
import pytest

from gpudissect.analysis.l2 import analyse, near_far
from gpudissect.config import load
from gpudissect.sweep import run_experiment
from gpudissect.traces import read_trace

REPO = Path(__file__).resolve().parents[1]


# L2 sizes the papers report: TPDS Table V (GTX560Ti 512 KB, GTX780 1536 KB, GTX980 2048 KB),
# thesis Table 5.4 (K20c 1.25 MiB); the default sweep steps by 128-512 KiB, so the size must be
# the footprint just below the first one that misses.
@pytest.mark.parametrize(
    ("device", "size"),
    [
        ("gtx560ti", 512 << 10),
        ("gtx780", 1536 << 10),
        ("gtx980", 2048 << 10),
        ("tesla_k20c", 1280 << 10),
    ],
)
def test_twin_l2_size(device, size, tmp_path):
    cfg = load(REPO / "config" / "config.yaml", base_dir=REPO)
    trace = read_trace(run_experiment(cfg.device(device), "l2", out=tmp_path / "t.parquet"))
    doc = analyse(trace.data, provenance=trace.provenance)
    assert doc["elements"]["l2"]["size_bytes"]["value"] == size
    assert doc["elements"]["l2"]["far_hit_latency_cycles"]["value"] is None  # one distance


def test_two_partitions_are_split():
    # 60% of hits at ~260 cycles, 40% at ~330 (sd 6): two groups 70 cycles apart
    rng = np.random.default_rng(0)
    hits = np.concatenate([rng.normal(260, 6, 6000), rng.normal(330, 6, 4000)])
    q = near_far(hits)
    assert abs(q["hit_latency_cycles"]["value"] - 260) < 2
    assert abs(q["far_hit_latency_cycles"]["value"] - 330) < 2
    assert abs(q["far_share"]["value"] - 0.4) < 0.02


def test_one_distance_is_not_split():
    rng = np.random.default_rng(1)
    q = near_far(rng.normal(300, 8, 10000))
    assert q["far_hit_latency_cycles"]["value"] is None
    assert abs(q["hit_latency_cycles"]["value"] - 300) < 1
