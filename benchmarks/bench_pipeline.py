"""Wall time of the default pipeline (all shipped simulated profiles) with --cores 2, and of each
study's target (`snakemake --cores 1 tpds`, ...) with --cores 1, each beside its goal
(issue: speed; README "Timing").

Every run is the real `snakemake` on a fresh copy of the workflow in a temporary folder, every
output removed before it. A first, untimed run of the default pipeline fills numba's on-disk
cache of the simulator's kernels (a user's first run compiles them once; every later run of a
checkout finds them). Each measurement is made with the run's fork server (the default) and with
`GPUDISSECT_FORKSERVER=off` (every job in its own cold interpreter, as before the server), one
after the other on the same machine, so the two are compared in the same hour. Prints the wall
time and the CPU time of every run (the second steadier on a host shared with other work).

    .venv/bin/python benchmarks/bench_pipeline.py [--only default|targets] [--server on|off|both]
        [--jobs N] [--readme README.md]

`--readme FILE` writes the measured times (with the fork server) into FILE's block between
`<!-- begin pipeline times (written by make bench) -->` and `<!-- end pipeline times -->`: a
table of the study targets (their twins, the sweeps each ran, the wall time) and the default
pipeline's time, with the host and the date; `make bench` does it to the README.

Each line carries the host's load averages before and after the run; `--jobs N` lists the run's
N longest jobs (the CPU column counts a job's own processes, so it is near zero for a job the
fork server ran: compare CPU per job with `--server off`).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from gpudissect.report.studies import STUDIES  # noqa: E402

DEFAULT_GOAL_S = 90.0
TARGET_GOAL_S = 60.0


def _fresh(work: Path) -> None:
    for out in ("results", "logs", ".snakemake"):
        shutil.rmtree(work / out, ignore_errors=True)


def costliest_jobs(work: Path, count: int) -> list[tuple[float, float, str]]:
    """The `count` longest jobs of the last run, from the rules' `benchmark:` files: (wall s,
    CPU s, rule/wildcards), longest first. The CPU is that of the job's own process tree: a job
    the fork server ran shows almost none there (its work ran in the server's child)."""
    jobs = []
    for tsv in (work / "results" / "benchmarks").rglob("*.tsv"):
        header, *rows = tsv.read_text().splitlines()
        if not rows:
            continue
        values = dict(zip(header.split("\t"), rows[-1].split("\t"), strict=False))
        name = str(tsv.relative_to(work / "results" / "benchmarks").with_suffix(""))
        jobs.append((float(values["s"]), float(values.get("cpu_time", "nan")), name))
    return sorted(jobs, reverse=True)[:count]


def sweeps_run(work: Path) -> int:
    """The sweeps the last run ran: its `run_sweep` benchmark files."""
    return len(list((work / "results" / "benchmarks" / "run_sweep").glob("*.tsv")))


def replace_block(text: str, name: str, body: str, *, source: str = "the file") -> str:
    """`text` with the lines between its `<!-- begin NAME (written by make bench) -->` and
    `<!-- end NAME -->` markers replaced by `body`."""
    begin, end = f"<!-- begin {name} (written by make bench) -->", f"<!-- end {name} -->"
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        raise SystemExit(f"--readme: {source} has no block from '{begin}' to '{end}'")
    return text[: i + len(begin)] + "\n" + body.rstrip("\n") + "\n" + text[j:]


def times_block(
    targets: list[tuple[str, int, float]],
    default: tuple[int, float] | None,
    *,
    host: str,
    day: str,
    load: tuple[str, str],
) -> str:
    """The README's block of measured times: each study target (key, sweeps it ran, wall s)
    with its study and twins, then the default pipeline's (sweeps, wall s) where measured."""
    lines = []
    if targets:
        lines += [
            "| command | study | twins | sweeps | time |",
            "| --- | --- | --- | --- | --- |",
        ]
        for key, sweeps, wall in targets:
            study = STUDIES[key]
            twins = ", ".join(study.devices)
            lines.append(
                f"| `snakemake --cores 1 {key}` | {study.title} | {twins} | {sweeps} | "
                f"{wall:.0f} s |"
            )
        lines.append("")
    what = "each study target with `--cores 1`, one at a time" if targets else ""
    if default is not None:
        sweeps, wall = default
        what += ("; " if what else "") + (
            f"the default pipeline (`snakemake --cores 2`, {sweeps} sweeps) {wall:.0f} s"
        )
    lines.append(
        f"Measured by `make bench` (`benchmarks/bench_pipeline.py --readme README.md`) on {day}, "
        f"{host}, from fresh outputs with numba's cache warm: {what} (load averages {load[0]} "
        f"before, {load[1]} after; a machine shared with other work takes longer)."
    )
    return "\n".join(lines)


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def run_once(work: Path, target: str, cores: int, server: bool) -> tuple[float, float]:
    """One run from fresh outputs: its wall time and the CPU time of its processes."""
    _fresh(work)
    bin_dir = str(Path(sys.executable).parent)
    # the copy's package, not the one the environment may have installed from the checkout
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(work),
        "PYTHONPATH": str(work / "workflow"),
    }
    if not server:
        env["GPUDISSECT_FORKSERVER"] = "off"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "snakemake", target, "--cores", str(cores), "--quiet"],
        cwd=work,
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _verdict(wall: float, goal: float) -> str:
    return "meets" if wall <= goal else "misses"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("default", "targets"), help="one part alone")
    parser.add_argument(
        "--server",
        choices=("on", "off", "both"),
        default="both",
        help="with the run's fork server, without it, or both one after the other (default)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=0,
        metavar="N",
        help="after each run, its N longest jobs (wall and CPU seconds, from the rules' "
        "benchmark files)",
    )
    parser.add_argument(
        "--readme",
        type=Path,
        metavar="FILE",
        help="write the times measured with the fork server into FILE's pipeline-times block",
    )
    args = parser.parse_args()
    if args.readme is not None:  # a file without the block is refused before anything runs
        replace_block(args.readme.read_text(), "pipeline times", "", source=str(args.readme))
    servers = {"on": [True], "off": [False], "both": [True, False]}[args.server]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp, "gpudissect")
        work.mkdir()
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc")
        for item in ("Snakefile", "workflow", "config", "kernels", "envs", "profiles"):
            src = REPO / item
            (
                shutil.copytree(src, work / item, ignore=ignore)
                if src.is_dir()
                else shutil.copy(src, work / item)
            )
        print(f"host: {platform.machine()}, {platform.processor() or 'cpu'}, {os.cpu_count()} CPUs")
        warm, _ = run_once(work, "all", 2, True)
        print(f"first run (numba compiles the kernels; not a measurement): {warm:.1f} s")
        rows = []
        measured: dict[str, tuple[int, float]] = {}
        first_load = _load()
        if args.only in (None, "default"):
            rows.append(("default pipeline (all)", "all", 2, DEFAULT_GOAL_S))
        if args.only in (None, "targets"):
            rows += [(f"study target {key}", key, 1, TARGET_GOAL_S) for key in STUDIES]
        for label, target, cores, goal in rows:
            for server in servers:
                # the host's load averages (1, 5, 15 min) before and after: on a shared host
                # the wall time is only as steady as they are
                load_before = _load()
                wall, cpu = run_once(work, target, cores, server)
                if server:
                    measured[target] = (sweeps_run(work), wall)
                how = "fork server" if server else "GPUDISSECT_FORKSERVER=off"
                print(
                    f"{label}, --cores {cores}, {how}: {wall:.1f} s wall, {cpu:.1f} s CPU; "
                    f"goal under {goal:.0f} s: {_verdict(wall, goal)} "
                    f"(load {load_before} before, {_load()} after)",
                    flush=True,
                )
                for job_wall, job_cpu, name in costliest_jobs(work, args.jobs):
                    print(f"    {job_wall:6.1f} s wall {job_cpu:6.1f} s CPU  {name}")
        if args.readme is not None and measured:
            host = f"{os.cpu_count()} CPUs ({platform.machine()})"
            block = times_block(
                [(k, *measured[k]) for k in STUDIES if k in measured],
                measured.get("all"),
                host=host,
                day=datetime.date.today().isoformat(),
                load=(first_load, _load()),
            )
            text = replace_block(args.readme.read_text(), "pipeline times", block)
            args.readme.write_text(text)
            print(f"written: the pipeline times of {args.readme}")


if __name__ == "__main__":
    main()
