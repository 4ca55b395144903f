"""TPDS Fig. 5 on the GTX780 twin: Saavedra1992 and Wong2010 contradict each other."""

from pathlib import Path

import pytest

from gpudissect.analysis.caches.classic import analyse
from gpudissect.config import load
from gpudissect.sweep import run_experiment
from gpudissect.traces import read_trace

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gtx780_doc(tmp_path_factory):
    cfg = load(REPO / "config" / "config.yaml", base_dir=REPO)
    out = tmp_path_factory.mktemp("classic") / "t.parquet"
    trace = read_trace(run_experiment(cfg.device("gtx780"), "pchase_classic", out=out))
    return analyse(trace.data, provenance=trace.provenance)


def test_wong_reads_four_plateaus_of_128_bytes(gtx780_doc):
    # The twin's texture L1: 12 KiB, 32 B lines, 4 sets chosen by address bits 7-8. At stride
    # 32 B, each 128 B added past 12 KiB overflows one more set (all four lines of a 128 B block
    # share a set), so the average latency climbs in 4 plateaus of 128 B: Wong2010 reads a = 4,
    # b = 128 B; TPDS Fig. 5 reads 4 ways off the same plateaus.
    w = gtx780_doc["inferences"]["wong"]
    assert w["size_bytes"]["value"] == 12288
    assert w["ways"]["value"] == 4
    assert w["line_bytes"]["value"] == 128


def test_saavedra_reads_the_true_line(gtx780_doc):
    # At N = 48 KiB (4 x the cache) every access misses once the stride reaches the 32 B line.
    s = gtx780_doc["inferences"]["saavedra"]
    assert s["size_bytes"]["value"] == 12288
    assert s["line_bytes"]["value"] == 32


def test_the_methods_contradict(gtx780_doc):
    assert gtx780_doc["contradiction"]["value"] is True
    assert "line_bytes" in gtx780_doc["contradiction"]["evidence"]
