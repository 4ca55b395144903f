"""benchmarks/replay_host_work.py: an experiment replayed from its trace makes the same launches
and rows, and a trace that does not fit the replay is refused."""

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from benchmark_module import load_benchmark

from gpudissect.config import load
from gpudissect.exceptions import TraceError
from gpudissect.families import family
from gpudissect.sweep import run_experiment
from gpudissect.traces import read_trace, write_trace

REPO = Path(__file__).resolve().parents[1]


def _bench():
    return load_benchmark("replay_host_work")


@pytest.fixture(scope="module")
def classic_trace(tmp_path_factory):
    """pchase_classic on the GTX780 twin, 12 launches (7 Saavedra strides, 5 Wong sizes), in a
    results folder's layout (<results>/traces/<device>/<experiment>.parquet)."""
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
    out = tmp_path_factory.mktemp("results") / "traces" / "gtx780" / "pchase_classic.parquet"
    return run_experiment(device, "pchase_classic", out=out)


def test_replay_makes_the_traces_launches_and_rows(classic_trace):
    bench = _bench()
    rows, seconds, backend = bench.replay(classic_trace)
    trace = read_trace(classic_trace).data
    assert backend.launches == 12 == trace["point"].nunique()
    assert seconds > 0
    assert bench.matches(rows, trace)
    pd.testing.assert_frame_equal(
        rows[["point", "array_bytes", "stride_bytes", "index", "latency_cycles"]].astype("int64"),
        trace[["point", "array_bytes", "stride_bytes", "index", "latency_cycles"]].astype("int64"),
    )


def test_a_trace_the_replay_drifts_from_is_refused(classic_trace, tmp_path):
    # the fourth launch's records cut short: the sweep asks for 256 where the trace holds 200
    t = read_trace(classic_trace)
    data = t.data[~((t.data["point"] == 3) & (t.data["step"] >= 200))]
    path = tmp_path / "traces" / "gtx780" / "pchase_classic.parquet"
    write_trace(path, data, schema=family("pchase_classic").schema, provenance=t.provenance)
    with pytest.raises(TraceError, match="launch 3 asks for 256 records; the trace holds 200"):
        _bench().replay(path)


def test_an_experiment_it_does_not_replay_is_named(classic_trace, tmp_path):
    t = read_trace(classic_trace)
    path = tmp_path / "traces" / "gtx780" / "x.parquet"
    prov = t.provenance | {"experiment": "bandwidth"}
    write_trace(path, t.data, schema=family("pchase_classic").schema, provenance=prov)
    with pytest.raises(TraceError, match="'bandwidth' is not replayed; allowed: .*caches"):
        _bench().replay(path)
