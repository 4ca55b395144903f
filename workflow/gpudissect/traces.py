"""Parquet traces: one declared schema per experiment, provenance in the file metadata.

Writes go to a temporary file in the same folder and are renamed into place, so a failed or
interrupted job never leaves a partial trace behind.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .exceptions import AnalysisError, TraceError
from .limits import MAX_ADDRESS_BYTES, MAX_MEASURED_VALUE

METADATA_KEY = b"gpudissect"
TRACE_FORMAT_VERSION = 1

# Keys every trace's provenance must hold (DESIGN.md principle 5).
REQUIRED_PROVENANCE = (
    "package_version",
    "git_commit",
    "config_hash",
    "host",
    "experiment",
    "device",
)


@dataclass(frozen=True)
class Trace:
    data: pd.DataFrame
    provenance: dict[str, Any]
    path: Path | None = None


def _list_column(values: pd.Series, field: pa.Field) -> pa.Array | None:
    """A list column whose cells are all numpy arrays, built from one concatenated buffer
    (`Table.from_pandas` converts such cells one by one); None when the fast path does not apply."""
    cells = values.to_numpy()
    if not len(cells) or not all(isinstance(c, np.ndarray) and c.ndim == 1 for c in cells):
        return None
    offsets = np.zeros(len(cells) + 1, dtype=np.int64)
    np.cumsum([c.size for c in cells], out=offsets[1:])
    if offsets[-1] >= 2**31:
        return None
    flat = pa.array(np.concatenate(cells), type=field.type.value_type)
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), flat, type=field.type)


def _numeric(kind: pa.DataType) -> bool:
    """Numbers, or lists of them."""
    if pa.types.is_list(kind):
        kind = kind.value_type
    return pa.types.is_integer(kind) or pa.types.is_floating(kind)


def _to_table(data: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    lists = {
        f.name: col
        for f in schema
        if pa.types.is_list(f.type) and (col := _list_column(data[f.name], f)) is not None
    }
    if not lists:
        return pa.Table.from_pandas(data[schema.names], schema=schema, preserve_index=False)
    rest = [n for n in schema.names if n not in lists]
    rest_schema = pa.schema([schema.field(n) for n in rest])
    base = pa.Table.from_pandas(data[rest], schema=rest_schema, preserve_index=False)
    columns = [lists[n] if n in lists else base.column(n) for n in schema.names]
    return pa.Table.from_arrays(columns, schema=schema.remove_metadata())


def write_trace(
    path: str | os.PathLike,
    data: pd.DataFrame,
    *,
    schema: pa.Schema,
    provenance: dict[str, Any],
    compression_level: int | None = None,
) -> Path:
    """Write `data` with `schema` and `provenance` to `path` atomically (zstd at
    `compression_level`, 1 to 22; None: Arrow's default)."""
    missing = [k for k in REQUIRED_PROVENANCE if k not in provenance]
    if missing:
        raise TraceError(f"{path}: provenance lacks {missing}; every trace must carry them")
    extra = sorted(set(data.columns) - set(schema.names))
    absent = [n for n in schema.names if n not in data.columns]
    if extra or absent:
        raise TraceError(
            f"{path}: columns do not match the schema (missing {absent}, unexpected {extra})"
        )
    table = _to_table(data, schema)
    meta = dict(provenance, trace_format_version=TRACE_FORMAT_VERSION)
    table = table.replace_schema_metadata({METADATA_KEY: json.dumps(meta, default=str).encode()})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        write_table(table, tmp, compression_level=compression_level)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


ENCODING_SAMPLE_ROWS = 65536


def _encoded_bytes(column: pa.Table, delta: bool) -> int:
    sink = pa.BufferOutputStream()
    name = column.schema.names[0]
    kw = {"column_encoding": {name: "DELTA_BINARY_PACKED"}} if delta else {}
    pq.write_table(column, sink, compression="zstd", use_dictionary=False, **kw)
    return sink.tell()


def delta_columns(table: pa.Table) -> list[str]:
    """The integer columns that delta encoding writes smaller than plain encoding, judged on
    the first `ENCODING_SAMPLE_ROWS` rows: steps, addresses and array sizes that grow along a
    walk shrink to their differences (a trace of TLB walks to a quarter of its plain size)."""
    sample = table.slice(0, ENCODING_SAMPLE_ROWS)
    return [
        f.name
        for f in table.schema
        if pa.types.is_integer(f.type)
        and _encoded_bytes(sample.select([f.name]), True)
        < _encoded_bytes(sample.select([f.name]), False)
    ]


@dataclass(frozen=True)
class ColumnStorage:
    """How one column is stored: its Parquet leaf path ('elapsed_cycles.list.element' for a
    list), dictionary-encoded or not, the encoding when not (None: plain), its zstd level."""

    path: str
    dictionary: bool
    encoding: str | None
    level: int


ZSTD_MAX_LEVEL = 22


def write_table(
    table: pa.Table,
    path: str | os.PathLike | pa.NativeFile,
    *,
    compression_level: int | None = None,
    storage: list[ColumnStorage] | None = None,
) -> None:
    """Write a trace's table as Parquet: zstd, labels dictionary-encoded, integer columns delta-
    encoded where that is smaller, every data page with its checksum. `compression_level` is
    zstd's (1 to 22; None: Arrow's default); `storage`, one entry per column, replaces those
    choices with its own (the compaction of a finished folder measures them, `compact`)."""
    if compression_level is not None and not (
        isinstance(compression_level, int) and 1 <= compression_level <= ZSTD_MAX_LEVEL
    ):
        raise TraceError(
            f"write_table: compression_level {compression_level!r} not allowed; give an "
            f"integer from 1 to {ZSTD_MAX_LEVEL}, or None for Arrow's default"
        )
    if storage is not None:
        encodings = {c.path: c.encoding for c in storage if c.encoding and not c.dictionary}
        kw: dict[str, Any] = {
            "compression_level": {c.path: c.level for c in storage},
            "use_dictionary": [c.path for c in storage if c.dictionary],
            "column_encoding": encodings or None,
        }
    else:
        # Dictionary encoding pays off only for repeated values (labels); on numeric columns,
        # such as the per-thread times of a request sweep, it costs time and little space.
        deltas = delta_columns(table)
        kw = {
            "compression_level": compression_level,
            "use_dictionary": [f.name for f in table.schema if not _numeric(f.type)],
            "column_encoding": {name: "DELTA_BINARY_PACKED" for name in deltas} or None,
        }
    # page checksums (CRC32 of every data page) let a reader tell a damaged page from data
    pq.write_table(table, path, compression="zstd", write_page_checksum=True, **kw)


def read_trace(path: str | os.PathLike, *, schema: pa.Schema | None = None) -> Trace:
    """Read a trace, checking its schema (when given) and provenance; errors name the file."""
    path = Path(path)
    if not path.exists():
        raise TraceError(f"{path}: trace file does not exist")
    table = _read_verified(path)
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise TraceError(
            f"{path}: no gpudissect provenance metadata; was it written by "
            "gpudissect? Re-run the sweep that produces it"
        )
    provenance = json.loads(raw)
    missing = [k for k in REQUIRED_PROVENANCE if k not in provenance]
    if missing:
        raise TraceError(f"{path}: provenance lacks {missing}")
    if schema is not None:
        check_schema(table.schema, schema, path)
    check_ranges(table, path, experiment=str(provenance.get("experiment", "")))
    return Trace(data=table.to_pandas(), provenance=provenance, path=path)


def check_schema(found: pa.Schema, schema: pa.Schema, path: Path | str) -> None:
    """Raise TraceError naming the file where a trace's columns are not the experiment's."""
    got = found.remove_metadata()
    if not got.equals(schema.remove_metadata()):
        raise TraceError(
            f"{path}: schema does not match the experiment's declared schema\n"
            f"expected: {schema}\nfound: {got}"
        )


def _read_verified(path: Path) -> pa.Table:
    """The whole table, every data page checked against its checksum; a damaged page is named
    by its column (a trace written before checksums has none, and is read as before)."""
    try:
        pf = pq.ParquetFile(path, page_checksum_verification=True)
    except (OSError, pa.ArrowInvalid) as exc:
        raise TraceError(f"{path}: not a readable Parquet file ({exc})") from exc
    columns = {}
    for name in pf.schema_arrow.names:
        try:
            columns[name] = pf.read(columns=[name]).column(0)
        except (OSError, pa.ArrowException) as exc:
            raise TraceError(
                f"{path}: column {name!r} is corrupted ({exc}); the file's data do not match "
                "their checksums or cannot be decoded: re-run the sweep that wrote it"
            ) from exc
    return pa.Table.from_pydict(columns, schema=pf.schema_arrow)


# The range a sweep can produce in a column, by its unit suffix (DESIGN.md principle 6): sizes,
# strides, offsets and addresses lie in the GPU's address space; measurements are not negative.
_COLUMN_RANGES = {
    "_bytes": (0, MAX_ADDRESS_BYTES),
    "_cycles": (0, MAX_MEASURED_VALUE),
    "_ns": (0, MAX_MEASURED_VALUE),
    "_ms": (0, MAX_MEASURED_VALUE),
    "_gbps": (0, MAX_MEASURED_VALUE),
    "_mhz": (0, MAX_MEASURED_VALUE),
}

# Columns with a "none" value below the range, by experiment: l2_slices writes -1 as the
# reference offset and the elapsed time of the rows of a probe that has neither.
_LOWEST = {("l2_slices", "reference_offset_bytes"): -1, ("l2_slices", "elapsed_ns"): -1}


def check_ranges(table: pa.Table, path: Path | str, *, experiment: str = "") -> None:
    """Raise TraceError naming the file and the column whose values lie outside what a sweep
    could have written (NaN is left to refuse_non_finite, which knows where it is allowed)."""
    import pyarrow.compute as pc

    for name in table.column_names:
        unit = next((u for u in _COLUMN_RANGES if name.endswith(u)), None)
        column = table.column(name)
        kind = column.type.value_type if pa.types.is_list(column.type) else column.type
        if unit is None or not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
            continue
        values = pc.list_flatten(column) if pa.types.is_list(column.type) else column
        if len(values) == 0 or values.null_count == len(values):
            continue
        low, high = _COLUMN_RANGES[unit]
        low = _LOWEST.get((experiment, name), low)
        extremes = pc.min_max(values)
        lo, hi = extremes["min"].as_py(), extremes["max"].as_py()
        if lo is not None and (lo < low or hi > high):
            bad = lo if lo < low else hi
            raise TraceError(
                f"{path}: column {name!r} holds {bad!r}, outside what a sweep can write "
                f"(allowed: {low} to {high:.3g} for {unit}); the trace is damaged or was not "
                "written by gpudissect: re-run the sweep that wrote it"
            )


# Units of measured values (DESIGN.md principle 6). A clock (`_mhz`) may be NaN: the driver did
# not report it, which the analyses handle; a measurement may not.
MEASURED_UNITS = ("_cycles", "_ms", "_ns", "_gbps")


def refuse_non_finite(data: pd.DataFrame, *, where: str = "trace") -> None:
    """Raise AnalysisError naming the column and the first row where a measured value is NaN or
    infinite: no analysis reads a number out of such a point."""
    for name in data.columns:
        if not str(name).endswith(MEASURED_UNITS):
            continue
        column = data[name]
        if column.dtype == object:  # list cells: one flag per row
            bad = _bad_cells(column.to_numpy())
        elif pd.api.types.is_numeric_dtype(column):
            bad = ~np.isfinite(column.to_numpy(dtype=float))
        else:
            continue
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise AnalysisError(
                f"{where}: column {name!r} has {int(bad.sum())} NaN/infinite value(s), first in "
                f"row {row}; allowed: finite measurements (re-run the sweep that wrote it)"
            )


def _bad_cells(cells: np.ndarray) -> np.ndarray:
    """One flag per list cell: whether it holds a NaN or infinite value, as each cell's values
    read as floats tell. Cells as a trace's list columns read (1-D arrays of integers or of
    floats of at most 64 bits) are checked all at once (a request sweep has a hundred thousand
    of them): integers are finite, floats are checked in one array of their values. Any other
    cell (None, a list, a scalar) is read one by one."""
    floats = False
    for c in cells:
        if type(c) is not np.ndarray or c.ndim != 1 or c.dtype.kind not in "biuf":
            return _bad_cells_one_by_one(cells)
        if c.dtype.kind == "f":
            if c.dtype.itemsize > 8:  # a long double may lie beyond a float's range
                return _bad_cells_one_by_one(cells)
            floats = True
    if not floats:  # integers and booleans only: all finite
        return np.zeros(len(cells), dtype=bool)
    # integers beside floats promote to a float type that holds them: finite still
    where = np.flatnonzero(~np.isfinite(np.concatenate(cells)))
    ends = np.cumsum([c.size for c in cells], dtype=np.int64)
    bad = np.zeros(len(cells), dtype=bool)
    bad[np.searchsorted(ends, where, side="right")] = True  # the cell that holds each value
    return bad


def _bad_cells_one_by_one(cells: np.ndarray) -> np.ndarray:
    return np.array(
        [not np.all(np.isfinite(np.asarray(c, dtype=float))) for c in cells], dtype=bool
    )
