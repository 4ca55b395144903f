"""Are two runs' simulated results the same? Compares every Parquet trace under
`<before>/traces` with the one of the same name under `<after>/traces` (column data, with
pyarrow's `Table.equals`, and the provenance metadata aside from the keys that name where and
from which commit it ran), and every topology JSON under `<before>/topology` (aside from its
`sources`, which name the commit). Prints one line per difference and a summary; exits 1 when
any file differs or is missing on one side.

    .venv/bin/python benchmarks/compare_runs.py BEFORE_RESULTS AFTER_RESULTS
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pyarrow.parquet as pq

# provenance that names the run, not the result
_RUN_KEYS = ("git_commit", "host", "python", "package_version")


def _provenance(table) -> dict:
    meta = table.schema.metadata or {}
    raw = meta.get(b"gpudissect")
    prov = json.loads(raw) if raw else {}
    return {k: v for k, v in prov.items() if k not in _RUN_KEYS}


def compare_trace(before: Path, after: Path) -> list[str]:
    """The differences between two traces: an empty list where they agree."""
    a, b = pq.read_table(before), pq.read_table(after)
    problems = []
    if a.schema.remove_metadata() != b.schema.remove_metadata():
        problems.append("schema differs")
    elif not a.equals(b):
        problems.append("column data differ")
    if _provenance(a) != _provenance(b):
        problems.append("provenance differs")
    return problems


def compare_topology(before: Path, after: Path) -> list[str]:
    a, b = (json.loads(p.read_text()) for p in (before, after))
    for doc in (a, b):
        for source in doc.get("sources", []):
            source.pop("git_commit", None)
    return [] if a == b else ["topology differs"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="a results folder (with traces/, topology/)")
    parser.add_argument("after", type=Path, help="the other results folder")
    args = parser.parse_args()
    checks = [("traces", "*.parquet", compare_trace), ("topology", "*.json", compare_topology)]
    compared = differ = 0
    for sub, pattern, compare in checks:
        names = {p.relative_to(args.before) for p in (args.before / sub).rglob(pattern)}
        names |= {p.relative_to(args.after) for p in (args.after / sub).rglob(pattern)}
        for name in sorted(names):
            one, two = args.before / name, args.after / name
            if not (one.exists() and two.exists()):
                problems = [f"only in {'before' if one.exists() else 'after'}"]
            else:
                problems = compare(one, two)
            compared += 1
            if problems:
                differ += 1
                print(f"{name}: {'; '.join(problems)}")
    print(f"{compared} files compared, {differ} differ")
    return 1 if differ or not compared else 0


if __name__ == "__main__":
    sys.exit(main())
