"""Where repeat k of a run (config key `repeats`) writes: repeat 1 the usual paths, a later
repeat the same path with `.r<k>` before the suffix (`results/traces/<device>/l2.r2.parquet`,
`results/analysis/<device>/l2.r2.json`)."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

_REPEAT = re.compile(r"\.r([0-9]+)$")


def repeat_path(path: str, repeat: int) -> str:
    """`path` as repeat `repeat` (from 1) writes it."""
    if repeat == 1:
        return path
    p = PurePosixPath(path)
    return str(p.with_name(f"{p.stem}.r{repeat}{p.suffix}"))


def repeat_of(path: str) -> int:
    """The repeat that wrote `path` (1 when it carries no `.r<k>`)."""
    match = _REPEAT.search(PurePosixPath(path).stem)
    return int(match.group(1)) if match else 1
