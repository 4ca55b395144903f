"""The result contract (DESIGN.md): every inferred quantity with confidence, method, evidence."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def quantity(
    value: Any, *, unit: str | None, confidence: float, method: str, evidence: str
) -> dict[str, Any]:
    return {
        "value": value,
        "unit": unit,
        "confidence": round(float(min(max(confidence, 0), 1)), 4),
        "method": method,
        "evidence": evidence,
    }


def undetermined(reason: str) -> dict[str, Any]:
    """The data do not decide the quantity; `reason` says why."""
    return {"value": None, "undetermined": reason}


def not_applicable(reason: str) -> dict[str, Any]:
    """The device lacks what the quantity describes (a load path, a cache on a path), as the
    data show; `reason` says what it lacks. Not "undetermined": the data did decide."""
    return {"value": None, "not_applicable": reason}


def write_result(path: str | os.PathLike, document: dict[str, Any]) -> Path:
    """Write a result document atomically (temporary file, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(document, indent=2, sort_keys=False, default=_plain) + "\n")
    os.replace(tmp, path)
    return path


def table_path(result_path: str | os.PathLike) -> Path:
    """Where an analysis's tidy table lies: beside its result document, as Parquet."""
    return Path(result_path).with_suffix(".parquet")


def write_table(path: str | os.PathLike, table: Any) -> Path:
    """Write a tidy table (a DataFrame) atomically (temporary file, then rename)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        pq.write_table(pa.Table.from_pandas(table, preserve_index=False), tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _plain(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"cannot serialise {type(obj).__name__}")


def no_path_reason(provenance: dict[str, Any], *, path: str | None = None) -> str:
    """Why a trace is empty (or holds no rows of `path`, for experiments of several paths):
    the device lacks the load path the experiment needs."""
    path = path or provenance.get("config", {}).get("parameters", {}).get("path", "?")
    return f"the device has no `{path}` load path, so nothing was measured"


def header(analysis: str, provenance: dict[str, Any]) -> dict[str, Any]:
    """The fields every result document starts with."""
    return {
        "device": provenance["device"],
        "analysis": analysis,
        "path": provenance.get("config", {}).get("parameters", {}).get("path"),
        "trace": {k: provenance.get(k) for k in ("git_commit", "config_hash", "created_utc")},
        "device_info": provenance.get("device_info", {}),
    }
