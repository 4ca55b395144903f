"""Wall time of CI: `CI=true bash .ci/run` on a fresh clone of this checkout, against the goal of
10 minutes on a 2-core machine.

Clones the checkout's HEAD (committed work only) into a temporary folder, runs `.ci/run` there
(it installs the missing system packages, makes the clone's virtualenv, lints and runs the whole
suite) and prints the wall time, each phase's time from the `ci: phase NAME S s` lines that
`.ci/run` writes, the suite's summary line and the load of the machine before and after. With
`--fresh-home` the run gets an empty HOME, so that pip's cache and the bundle's wheel cache start
empty as on a new machine. The suite's temporary folders are made under the clone's temporary
folder (`--basetemp`), and the log ends with the 40 slowest tests' times. Exits with
`.ci/run`'s status. With `--readme FILE` a run that passed writes its wall time, the commit, the
host and the suite's summary into FILE's block between `<!-- begin ci time (written by make
bench) -->` and `<!-- end ci time -->` (`make bench-ci` does it to the README).
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOAL_S = 600.0
PHASE = re.compile(r"^ci: phase (\S+) ([\d.]+) s$")
SUMMARY = re.compile(r"^=*\s*\d+ (passed|failed).* in [\d.]+s.*$")


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def run_ci(clone: Path, env: dict[str, str], log: Path) -> tuple[int, float, list[str]]:
    """Runs .ci/run in the clone, its output to the terminal and to `log`; returns its status,
    its wall time and its output's lines."""
    lines = []
    start = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(
            ["bash", ".ci/run"],
            cwd=clone,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for line in proc.stdout:
            out.write(line)
            sys.stdout.write(line)
            lines.append(line.rstrip("\n"))
        rc = proc.wait()
    return rc, time.monotonic() - start, lines


def report(rc: int, wall_s: float, lines: list[str], load: tuple[str, str]) -> str:
    phases = [(m[1], float(m[2])) for m in map(PHASE.match, lines) if m]
    summary = next((line for line in reversed(lines) if SUMMARY.match(line)), None)
    rows = [
        f"host: {os.cpu_count()} CPUs; load average (1, 5, 15 min) before {load[0]}, "
        f"after {load[1]}",
        f".ci/run exit status: {rc}",
        f"wall time: {wall_s:.0f} s ({wall_s / 60:.1f} min) against the goal of "
        f"{GOAL_S:.0f} s ({GOAL_S / 60:.0f} min): "
        + ("met" if rc == 0 and wall_s <= GOAL_S else "not met"),
    ]
    for name, seconds in phases:
        rows.append(f"  {name:<10} {seconds:7.1f} s")
    rows.append(f"  {'(other)':<10} {wall_s - sum(s for _, s in phases):7.1f} s")
    rows.append(f"suite: {summary.strip('= ') if summary else 'no summary line (see the log)'}")
    return "\n".join(rows)


def ci_block(wall_s: float, commit: str, summary: str | None, load: tuple[str, str]) -> str:
    """The README's line of CI's measured time (`ci_time` block)."""
    return (
        f"Measured by `make bench-ci` on {datetime.date.today().isoformat()}: `CI=true bash "
        f".ci/run` on a fresh clone of {commit[:7]} (the missing system packages, the "
        f"virtualenv, the lint and the whole suite) took {wall_s / 60:.1f} minutes ({wall_s:.0f} "
        f"s) on {os.cpu_count()} CPUs, load averages {load[0]} before and {load[1]} after; "
        f"suite: {summary.strip('= ') if summary else 'no summary line'}."
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the clone and print its path")
    parser.add_argument(
        "--fresh-home", action="store_true", help="an empty HOME (no pip or wheel cache)"
    )
    parser.add_argument("--log", type=Path, help="also write .ci/run's output here")
    parser.add_argument(
        "--readme", type=Path, metavar="FILE", help="write a passing run's time into FILE"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_pipeline import replace_block

    if args.readme is not None:  # a file without the block is refused before anything runs
        replace_block(args.readme.read_text(), "ci time", "", source=str(args.readme))
    tmp = Path(tempfile.mkdtemp(prefix="bench-ci-"))
    try:
        clone = tmp / "gpudissect"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env["CI"] = "true"
        # the suite's temporary folders in this run's own folder, apart from other pytest
        # sessions of the same user and removed with it; the 40 slowest tests' times at the end
        # of the log
        env["PYTEST_ADDOPTS"] = f"--basetemp={tmp / 'pytest'} --durations=40"
        if args.fresh_home:
            env["HOME"] = str(tmp / "home")
            Path(env["HOME"]).mkdir()
        log = args.log or tmp / "ci.log"
        before = _load()
        rc, wall_s, lines = run_ci(clone, env, log)
        print()
        after = _load()
        print(report(rc, wall_s, lines, (before, after)))
        if args.readme is not None and rc == 0:
            commit = subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True
            ).stdout.strip()
            summary = next((line for line in reversed(lines) if SUMMARY.match(line)), None)
            block = ci_block(wall_s, commit, summary, (before, after))
            args.readme.write_text(replace_block(args.readme.read_text(), "ci time", block))
            print(f"written: the CI time of {args.readme}")
        if args.keep:
            print(f"clone: {clone}")
        return rc
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
