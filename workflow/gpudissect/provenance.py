"""Provenance: what every trace carries in its Parquet metadata (DESIGN.md principle 5)."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from . import __version__

PACKAGE_DIR = Path(__file__).resolve().parent


def git_commit(source: str | os.PathLike = PACKAGE_DIR) -> str:
    """The commit of the checkout that tracks `source` (a file or folder), with `-dirty` when
    tracked files differ from it.

    GPUDISSECT_GIT_COMMIT, when set, names the commit outright: a copy of the tree sent to a GPU
    host may carry git metadata older than its files, and the one who set the variable knows
    which code they sent. The workflow sets it from its own checkout (unless already set), so
    every job of a pipeline run records the workflow's commit. Where it is unset and no checkout
    tracks `source` (an installed package, an unpacked bundle, a copy inside another checkout),
    the commit is `unknown`.
    """
    explicit = os.environ.get("GPUDISSECT_GIT_COMMIT")
    if explicit:
        return explicit
    fallback = "unknown"
    source = Path(source).resolve()
    where = source if source.is_dir() else source.parent

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(where), *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()

    try:
        # fails unless the checkout tracks at least one file at or under `source`: a copy
        # inside another checkout says nothing about that checkout's HEAD
        git("ls-files", "--error-unmatch", "--", str(source))
        head = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError, ValueError):
        return fallback
    if not head:
        return fallback
    return f"{head}-dirty" if dirty else head


#: The file a copy of the tree without its git history (an artifact bundle) carries at its root,
#: holding the commit it was made from.
COMMIT_FILE = "COMMIT"


def workflow_commit(root: str | os.PathLike) -> str:
    """The commit of the workflow whose root folder is `root`: its checkout's when git tracks
    it, else the one recorded in `root/COMMIT` (an unpacked artifact bundle), else what
    `git_commit` falls back to."""
    commit = git_commit(root)
    recorded = Path(root) / COMMIT_FILE
    if commit == os.environ.get("GPUDISSECT_GIT_COMMIT", "unknown") and recorded.is_file():
        text = recorded.read_text().strip()
        if text:
            return text
    return commit


def config_hash(section: Any) -> str:
    """SHA-256 of a config fragment in canonical JSON (sorted keys)."""
    text = json.dumps(section, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def base_provenance(*, config_fragment: Any) -> dict[str, Any]:
    """What every trace carries. No wall-clock time: a trace is a function of the config, the
    seed and the code, byte for byte; when a sweep ran goes to its timing file (see sweep.py)."""
    return {
        "package": "gpudissect",
        "package_version": __version__,
        "git_commit": git_commit(),
        "config_hash": config_hash(config_fragment),
        "config": config_fragment,
        "host": platform.node(),
        "python": platform.python_version(),
    }
