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
    return {"value": None, "undetermined": reason}


def write_result(path: str | os.PathLike, document: dict[str, Any]) -> Path:
    """Write a result document atomically (temporary file, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(document, indent=2, sort_keys=False, default=_plain) + "\n")
    os.replace(tmp, path)
    return path


def _plain(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"cannot serialise {type(obj).__name__}")
