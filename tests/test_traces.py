"""Trace round trip: data, schema and provenance survive; wrong files are refused by name."""

import json
from pathlib import Path

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


def _one_by_one(cells):
    """A list column's flags as refuse_non_finite once made them, cell by cell."""
    return [not np.all(np.isfinite(np.asarray(c, dtype=float))) for c in cells]


def _column(cells):
    column = np.empty(len(cells), dtype=object)
    column[:] = cells
    return column


def test_list_cells_are_flagged_as_one_by_one():
    from gpudissect.traces import _bad_cells

    rng = np.random.default_rng(7)
    cells = []
    for _ in range(500):
        cell = rng.normal(size=int(rng.integers(0, 6))).astype(rng.choice(["f2", "f4", "f8"]))
        if cell.size and rng.random() < 0.2:
            cell[rng.integers(cell.size)] = rng.choice([np.nan, np.inf, -np.inf])
        cells.append(cell)
    flags = _one_by_one(cells)
    assert 0 < sum(flags) < len(cells) and any(c.size == 0 for c in cells)
    assert _bad_cells(_column(cells)).tolist() == flags
    # a non-finite value first or last in a cell, next to empty cells, in a lone cell
    edges = [np.array([]), np.array([np.nan, 1.0]), np.array([]), np.array([2.0, np.inf])]
    assert _bad_cells(_column(edges)).tolist() == [False, True, False, True]
    assert _bad_cells(_column([np.array([-np.inf])])).tolist() == [True]
    # integer and boolean cells are finite, beside float cells too
    ints = [np.array([1, 2], dtype=np.uint32), np.array([], dtype=np.int64), np.array([True])]
    assert _bad_cells(_column(ints)).tolist() == [False, False, False]
    assert _bad_cells(_column([*ints, np.array([np.nan])])).tolist() == [False] * 3 + [True]
    # only empty cells, no cells
    assert _bad_cells(_column([np.array([]), np.array([], dtype=np.int32)])).tolist() == [
        False,
        False,
    ]
    assert _bad_cells(_column([])).tolist() == []
    # cells that are not 1-D numeric arrays are read one by one, as before: a null list (None)
    # reads as NaN, a Python list and a scalar as their values, a 2-D array as its values
    others = [
        np.array([1.0]),
        None,
        [2.0, 3.0],
        [np.nan],
        4.0,
        np.array([[1.0, np.inf]]),
        np.array([[1.0, 2.0]]),
    ]
    flags = _one_by_one(others)
    assert flags == [False, True, False, True, False, True, False]
    assert _bad_cells(_column(others)).tolist() == flags
    # a long double beyond a float's range (where the platform has one) reads as infinite
    with np.errstate(over="ignore"):  # the cast to float overflows, as it is meant to
        beyond = np.array([np.finfo(np.float64).max], dtype=np.longdouble) * 4
        cells = [np.array([1.0]), beyond, np.array([2.0], dtype=np.longdouble)]
        assert _bad_cells(_column(cells)).tolist() == _one_by_one(cells)


# --- integrity: page checksums and column ranges --------------------------------------------

REFERENCE = Path(__file__).resolve().parents[1] / "results" / "reference" / "h100" / "traces"


def _rewritten_reference(tmp_path) -> Path:
    """A real small trace (the H100's L2 flush sweep), written again as sweeps write now."""
    from gpudissect.experiments import l2_flush

    source = read_trace(REFERENCE / "gpu0" / "l2_flush.parquet", schema=l2_flush.SCHEMA)
    out = tmp_path / "l2_flush.parquet"
    write_trace(out, source.data, schema=l2_flush.SCHEMA, provenance=source.provenance)
    return out


def _flip_inside_chunk(path: Path, column: str) -> None:
    """Invert 16 bytes in the middle of one column chunk's data; the footer stays intact."""
    meta = pq.ParquetFile(path).metadata
    chunk = next(
        meta.row_group(0).column(i)
        for i in range(meta.num_columns)
        if meta.row_group(0).column(i).path_in_schema == column
    )
    start = chunk.data_page_offset + chunk.total_compressed_size // 2
    raw = bytearray(path.read_bytes())
    raw[start : start + 16] = bytes(b ^ 0xFF for b in raw[start : start + 16])
    path.write_bytes(bytes(raw))
    assert pq.ParquetFile(path).metadata.num_rows == meta.num_rows  # the footer still reads


def test_traces_are_written_with_page_checksums(tmp_path):
    out = _rewritten_reference(tmp_path)
    # verification passes on the intact file; a file without checksums would pass too, so the
    # corrupted-page test below is what shows the checksums are there
    assert pq.ParquetFile(out, page_checksum_verification=True).read().num_rows > 0


def test_corrupted_data_page_is_refused_naming_file_and_column(tmp_path):
    from gpudissect.experiments import l2_flush

    out = _rewritten_reference(tmp_path)
    _flip_inside_chunk(out, "elapsed_ms")
    with pytest.raises(TraceError) as exc:
        read_trace(out, schema=l2_flush.SCHEMA)
    msg = str(exc.value)
    assert str(out) in msg and "'elapsed_ms'" in msg and "corrupted" in msg


def test_cli_refuses_a_corrupted_trace_without_a_traceback(tmp_path, capsys):
    from gpudissect.cli import main

    out = _rewritten_reference(tmp_path)
    _flip_inside_chunk(out, "size_bytes")
    rc = main(["analyze", "--trace", str(out), "--out", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert rc != 0
    assert err.startswith("gpudissect: error: ") and "Traceback" not in err
    assert str(out) in err and "'size_bytes'" in err
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(
    ("column", "value"),
    [("latency_cycles", -5), ("array_bytes", -4096), ("array_bytes", 2**62)],
)
def test_values_no_sweep_writes_are_refused_naming_file_and_column(tmp_path, column, value):
    data = _frame()
    data[column] = data[column].astype(np.int64)
    data.loc[2, column] = value
    schema = pa.schema(
        [pa.field(column, pa.int64()) if f.name == column else f for f in l1_size.SCHEMA]
    )
    out = write_trace(tmp_path / "t.parquet", data, schema=schema, provenance=PROV)
    with pytest.raises(TraceError) as exc:
        read_trace(out)
    assert str(out) in str(exc.value) and repr(column) in str(exc.value)
    assert str(value) in str(exc.value)


def test_growing_integer_columns_are_delta_encoded_and_read_back_exactly(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gpudissect.traces import delta_columns, write_table

    rng = np.random.default_rng(0)
    n = 200_000
    table = pa.table(
        {
            # a walk's addresses: one stride apart, as a TLB walk records them
            "address_bytes": pa.array(np.arange(n, dtype=np.int64) * 33554432),
            # latencies of three levels in random order: their differences take more bits
            # than the few values themselves
            "latency_cycles": pa.array(rng.choice([32, 290, 700], n).astype(np.uint32)),
        }
    )
    assert delta_columns(table) == ["address_bytes"]
    write_table(table, tmp_path / "t.parquet")
    pq.write_table(table, tmp_path / "plain.parquet", compression="zstd", use_dictionary=False)
    assert pq.read_table(tmp_path / "t.parquet").equals(table)
    meta = pq.ParquetFile(tmp_path / "t.parquet").metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema: meta.column(i).encodings for i in range(2)}
    assert "DELTA_BINARY_PACKED" in encodings["address_bytes"]
    assert "DELTA_BINARY_PACKED" not in encodings["latency_cycles"]
    sizes = [(tmp_path / f).stat().st_size for f in ("t.parquet", "plain.parquet")]
    assert sizes[0] < sizes[1]
