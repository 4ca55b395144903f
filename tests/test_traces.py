"""Trace round trip: data, schema and provenance survive; wrong files are refused by name."""

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpudissect.exceptions import TraceError
from gpudissect.experiments import l1_size
from gpudissect.traces import METADATA_KEY, read_trace, write_trace

PROV = {
    "package_version": "0",
    "git_commit": "abc",
    "config_hash": "f00",
    "host": "h",
    "created_utc": "2026-01-01T00:00:00+00:00",
    "experiment": "l1_size",
    "device": "twin",
    "device_info": {"name": "Test GPU", "profile_sha256": "d3adbeef"},
}


def _frame(n=5):
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "point": np.zeros(n, np.int32),
            "carveout_pct": np.full(n, -1, np.int16),
            "shared_buffer_bytes": np.full(n, 16384, np.int32),
            "array_bytes": np.full(n, 4096, np.int64),
            "stride_bytes": np.full(n, 128, np.int32),
            "repetition": np.zeros(n, np.int16),
            "step": np.arange(n, dtype=np.int32),
            "index": rng.integers(0, 1000, n).astype(np.uint32),
            "latency_cycles": rng.integers(30, 600, n).astype(np.uint32),
            "sm_clock_mhz": np.full(n, 1980.0, np.float32),
        }
    )


def test_round_trip_keeps_data_schema_and_provenance(tmp_path):
    df = _frame()
    path = write_trace(tmp_path / "t.parquet", df, schema=l1_size.SCHEMA, provenance=PROV)
    trace = read_trace(path, schema=l1_size.SCHEMA)
    pd.testing.assert_frame_equal(trace.data, df)
    assert trace.provenance["device_info"]["profile_sha256"] == "d3adbeef"
    assert trace.provenance["git_commit"] == "abc"
    assert not list(tmp_path.glob(".*tmp*")), "no temporary file left behind"


def test_missing_provenance_refused_on_write(tmp_path):
    with pytest.raises(TraceError, match="provenance lacks"):
        write_trace(
            tmp_path / "t.parquet", _frame(), schema=l1_size.SCHEMA, provenance={"git_commit": "x"}
        )
    assert not (tmp_path / "t.parquet").exists()


def test_foreign_parquet_refused_naming_file(tmp_path):
    path = tmp_path / "foreign.parquet"
    pq.write_table(pa.Table.from_pandas(_frame()), path)
    with pytest.raises(TraceError, match="foreign.parquet: no gpudissect provenance"):
        read_trace(path)


def test_wrong_schema_refused_naming_file(tmp_path):
    df = _frame().astype({"latency_cycles": np.float64})
    schema = l1_size.SCHEMA.set(
        l1_size.SCHEMA.get_field_index("latency_cycles"), pa.field("latency_cycles", pa.float64())
    )
    path = write_trace(tmp_path / "w.parquet", df, schema=schema, provenance=PROV)
    with pytest.raises(TraceError, match="w.parquet: schema does not match"):
        read_trace(path, schema=l1_size.SCHEMA)


def test_incomplete_provenance_refused_on_read(tmp_path):
    path = tmp_path / "p.parquet"
    table = pa.Table.from_pandas(_frame(), schema=l1_size.SCHEMA, preserve_index=False)
    table = table.replace_schema_metadata({METADATA_KEY: json.dumps({"git_commit": "x"})})
    pq.write_table(table, path)
    with pytest.raises(TraceError, match="p.parquet: provenance lacks"):
        read_trace(path)


def test_missing_file_named(tmp_path):
    with pytest.raises(TraceError, match="nope.parquet: trace file does not exist"):
        read_trace(tmp_path / "nope.parquet")


def test_commit_falls_back_to_environment_outside_git(tmp_path, monkeypatch):
    from gpudissect.provenance import git_commit

    monkeypatch.setenv("GPUDISSECT_GIT_COMMIT", "0123abc")
    assert git_commit(tmp_path) == "0123abc"  # tmp_path is no git checkout


def test_workflow_commit_of_a_tree_without_history_is_the_one_its_commit_file_names(
    tmp_path, monkeypatch
):
    from gpudissect.provenance import workflow_commit

    monkeypatch.delenv("GPUDISSECT_GIT_COMMIT", raising=False)
    assert workflow_commit(tmp_path) == "unknown"
    (tmp_path / "COMMIT").write_text("89abcdef\n")
    assert workflow_commit(tmp_path) == "89abcdef"
    # an empty file names nothing
    (tmp_path / "COMMIT").write_text("\n")
    assert workflow_commit(tmp_path) == "unknown"


def test_commit_of_a_tree_copied_into_another_checkout_is_not_that_checkouts(tmp_path, monkeypatch):
    import subprocess

    from gpudissect.provenance import git_commit

    outer = tmp_path / "outer"
    (outer / "copy").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(outer)], check=True)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    (outer / "tracked.py").write_text("x = 1\n")
    (outer / "copy" / "untracked.py").write_text("x = 1\n")
    subprocess.run(["git", "-C", str(outer), "add", "tracked.py"], check=True)
    subprocess.run(["git", "-C", str(outer), "commit", "-q", "-m", "x"], check=True)
    head = subprocess.run(
        ["git", "-C", str(outer), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    monkeypatch.delenv("GPUDISSECT_GIT_COMMIT", raising=False)
    # nothing under copy/ is tracked: the outer checkout's HEAD says nothing about it
    assert git_commit(outer / "copy") == "unknown"
    assert git_commit(outer / "copy" / "untracked.py") == "unknown"
    assert git_commit(outer) == head
    assert git_commit(outer / "tracked.py") == head
    (outer / "tracked.py").write_text("x = 2\n")
    assert git_commit(outer) == f"{head}-dirty"
    # a commit named outright wins over a checkout (a GPU host's copy with stale git metadata)
    monkeypatch.setenv("GPUDISSECT_GIT_COMMIT", "0123abc")
    assert git_commit(outer) == "0123abc"


def test_non_finite_measurements_are_found_in_list_cells_too():
    from gpudissect.exceptions import AnalysisError
    from gpudissect.traces import refuse_non_finite

    frame = pd.DataFrame(
        {
            "threads": [32, 64, 96],
            "thread_cycles": [np.array([1.0, 2.0]), np.array([3.0, np.nan]), np.array([4.0])],
            "sm_clock_mhz": [np.nan, 1980.0, 1980.0],  # an unknown clock is allowed
        }
    )
    with pytest.raises(AnalysisError, match="column 'thread_cycles' has 1 NaN.*first in row 1"):
        refuse_non_finite(frame)
    frame.loc[1, "thread_cycles"] = np.array([3.0, 5.0])
    refuse_non_finite(frame)  # finite everywhere a measurement is
