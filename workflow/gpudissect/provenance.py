"""Provenance: what every trace carries in its Parquet metadata (DESIGN.md principle 5)."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from . import __version__

REPO_ROOT = Path(__file__).resolve().parents[2]


def git_commit(root: Path = REPO_ROOT) -> str:
    """HEAD's commit, with `-dirty` when tracked files differ from it.

    Where git cannot tell (a copy of the tree sent to a GPU host, an unpacked bundle) the commit
    comes from GPUDISSECT_GIT_COMMIT when set, else `unknown`.
    """
    fallback = os.environ.get("GPUDISSECT_GIT_COMMIT", "unknown")
    try:
        top, head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--show-toplevel", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.split()
        if Path(top).resolve() != Path(root).resolve():
            # the tree sits inside another repository (a copy unpacked in a checkout): that
            # repository's HEAD says nothing about this tree
            return fallback
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError, ValueError):
        return fallback
    if not head:
        return fallback
    return f"{head}-dirty" if dirty else head


def config_hash(section: Any) -> str:
    """SHA-256 of a config fragment in canonical JSON (sorted keys)."""
    text = json.dumps(section, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def base_provenance(*, config_fragment: Any) -> dict[str, Any]:
    return {
        "package": "gpudissect",
        "package_version": __version__,
        "git_commit": git_commit(),
        "config_hash": config_hash(config_fragment),
        "config": config_fragment,
        "host": platform.node(),
        "python": platform.python_version(),
        "created_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
