"""Wall time of the whole GPU experiment set (`config/gpu.yaml`) on this host's GPU.

Runs the real `snakemake --cores N --configfile config/gpu.yaml` once on a fresh copy of the
workflow in a temporary folder: nvcc builds the kernels, every sweep runs on the GPU (one at a
time: they share the `gpu` resource), then the analyses, figures and the report. Prints the
elapsed wall time, the GPU it ran on, and each sweep's own time (the `sweep timing:` line of
its log: traces hold no wall-clock time), longest first, then each sweep's profile (the `sweep
profile:` line, `gpudissect.contract.profile`): launches, waits for the GPU, copies, allocations
and mappings, and the host work of the handlers and of the experiment. `--keep DIR` copies the
run's `results/` and `logs/` to DIR; `--json FILE` writes the figures as JSON.

A run that fails keeps what it has: `--keep` still gets the run's `logs/` (each job's own log),
whatever `results/` it wrote, Snakemake's log (`snakemake_log/`) and its console output
(`snakemake_console.log`, which the benchmark does not print), `--json` still gets the
figures of the sweeps that finished with `failed: true`, Snakemake's exit status and the failed
jobs (rule, wildcards, output, log), the failed jobs' logs are printed, and the benchmark exits
with Snakemake's status.

`--pstats` profiles each sweep's run with cProfile into `--keep DIR/pstats/` (read with `python -m
pstats DIR/pstats/gpu0_tlb_mappings.pstats`; the profiler slows the run, so time without it).

`--source DIR` runs the workflow of another source tree (the same folders from DIR), so that
code before and after a change are timed on the same unit in one session, e.g.
`git archive BASE | tar -x -C DIR` here, then on the GPU host
`python benchmarks/bench_gpu_pipeline.py --source DIR --keep before` and
`python benchmarks/bench_gpu_pipeline.py --keep after`, and `gpudissect runs --topology
before/results/topology/gpu0.json after/results/topology/gpu0.json --out runs.json` to check
that no structural value moved. Code before the profile logs none: its table is left out.

The topology part alone: `--configfile config/gpu.yaml config/topology_only.yaml --target
results/topology/gpu0.json` (its sweeps, analyses and the topology document).

The copy is not a git checkout: its traces take their commit from GPUDISSECT_GIT_COMMIT, set
here from this checkout's HEAD (or passed through when already set).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpudissect.contract.profile import PROFILE_TAG
from gpudissect.provenance import git_commit
from gpudissect.sweep import PSTATS_ENV, TIMING_TAG
from gpudissect.traces import read_trace

REPO = Path(__file__).resolve().parents[1]
CONSOLE = "snakemake_console.log"  # Snakemake's console output, in the run folder


def _sweep_seconds(log: Path) -> float:
    """A sweep's wall time, from the timing line its log ends with (traces hold no time)."""
    lines = log.read_text().splitlines() if log.is_file() else []
    for line in reversed(lines):
        if TIMING_TAG in line:
            return float(json.loads(line.split(TIMING_TAG, 1)[1])["elapsed_s"])
    return 0.0


def _sweep_profile(log: Path) -> dict | None:
    """A sweep's profile, from the `sweep profile:` line of its log (None: code without it)."""
    lines = log.read_text().splitlines() if log.is_file() else []
    for line in reversed(lines):
        if PROFILE_TAG in line:
            return json.loads(line.split(PROFILE_TAG, 1)[1])
    return None


FIELDS = ("jobid", "wildcards", "input", "output", "log")  # a failed job's, from Snakemake's log


def failed_jobs(work: Path) -> list[dict]:
    """The jobs Snakemake's log (`.snakemake/log/` of the run folder) says failed, in its order:
    each a dict of its `Error in rule NAME:` block's fields (rule, jobid, input, output, log,
    without Snakemake's `(check log file(s)...)` hint) and the wildcards of its job block (the
    `rule NAME:` block of the same jobid, where the error block has none)."""
    started: list[dict] = []
    jobs: list[dict] = []
    for log in sorted((work / ".snakemake" / "log").glob("*.snakemake.log")):
        block = None
        for line in log.read_text(errors="replace").splitlines():
            head = line.removeprefix("local")
            if line.startswith("Error in rule ") and line.endswith(":"):
                block = {"rule": line[len("Error in rule ") : -1]}
                jobs.append(block)
            elif head.startswith("rule ") and line.endswith(":"):
                block = {"rule": head[len("rule ") : -1]}
                started.append(block)
            elif block is not None and line.startswith("    ") and line[4] != " ":
                key, _, value = line.strip().partition(": ")
                if key in FIELDS:
                    block[key] = value.split(" (check log file(s)", 1)[0]
            elif block is not None and not line.startswith("        "):
                block = None
    by_jobid = {b["jobid"]: b for b in started if "jobid" in b}
    for job in jobs:
        wildcards = by_jobid.get(job.get("jobid"), {}).get("wildcards")
        if wildcards is not None:
            job.setdefault("wildcards", wildcards)
    return jobs


def keep_outputs(work: Path, keep: Path) -> None:
    """Copy the run's `results/` and `logs/` (those it has) and Snakemake's own log to `keep`."""
    for sub in ("results", "logs", "pstats"):
        if (work / sub).is_dir():
            shutil.copytree(work / sub, keep / sub, dirs_exist_ok=True)
    if (work / ".snakemake" / "log").is_dir():
        shutil.copytree(work / ".snakemake" / "log", keep / "snakemake_log", dirs_exist_ok=True)
    if (work / CONSOLE).is_file():
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(work / CONSOLE, keep / CONSOLE)


# the profile's columns: (header, how a profile gives it)
COLUMNS = (
    ("wall s", lambda p: f"{p['wall_s']:.2f}"),
    ("launches", lambda p: str(p["launches"])),
    ("launch s", lambda p: f"{p['launch_s']:.2f}"),
    ("sync s", lambda p: f"{p['sync_s']:.2f}"),
    ("syncs", lambda p: str(p["sync_calls"])),
    ("copies", lambda p: str(sum(p[f"{k}_calls"] for k in ("htod", "dtoh", "dtod")))),
    (
        "copy MiB",
        lambda p: f"{sum(p[f'{k}_bytes'] for k in ('htod', 'dtoh', 'dtod')) / 2**20:.1f}",
    ),
    ("copy s", lambda p: f"{sum(p[f'{k}_s'] for k in ('htod', 'dtoh', 'dtod')):.2f}"),
    ("memset s", lambda p: f"{p['memset_s']:.2f}"),
    ("allocs", lambda p: str(p["alloc_calls"])),
    ("alloc s", lambda p: f"{p['alloc_s']:.2f}"),
    ("map s", lambda p: f"{p['map_s']:.2f}"),
    ("handler host s", lambda p: f"{p['backend_host_s']:.2f}"),
    ("experiment host s", lambda p: f"{p['experiment_host_s']:.2f}"),
    ("write s", lambda p: f"{p['trace_write_s']:.2f}"),
    ("setup s", lambda p: f"{p['setup_s']:.2f}"),
)


def profile_table(profiles: list[tuple[str, dict]]) -> str:
    """The profiles as a Markdown table, one row a sweep, in the order given."""
    head = ["sweep", *(h for h, _ in COLUMNS)]
    rows = [[name, *(f(p) for _, f in COLUMNS)] for name, p in profiles]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", type=int, default=8)
    ap.add_argument(
        "--configfile",
        nargs="+",
        default=["config/gpu.yaml"],
        help="run config(s), merged in order (config/topology_only.yaml: the topology part alone)",
    )
    ap.add_argument(
        "--target",
        nargs="+",
        default=["all"],
        help="Snakemake targets (results/topology/gpu0.json: sweeps, analyses and the topology "
        "document, without figures and report)",
    )
    ap.add_argument("--keep", type=Path, help="copy results/ and logs/ here afterwards")
    ap.add_argument("--json", type=Path, help="write the wall time, sweeps and profiles here")
    ap.add_argument(
        "--pstats",
        action="store_true",
        help="profile each sweep's run with cProfile (kept in --keep DIR/pstats/, one "
        "<device>_<experiment>.pstats a sweep; the profiler slows the run: not for timing)",
    )
    ap.add_argument(
        "--source",
        type=Path,
        default=REPO,
        help="the source tree whose workflow runs (default: this checkout); e.g. a `git "
        "archive` of the commit before a change, unpacked",
    )
    args = ap.parse_args()
    source = args.source.resolve()
    if not (source / "Snakefile").is_file() or not (source / "workflow").is_dir():
        ap.error(f"--source {args.source}: no Snakefile and workflow/ there (a source tree)")
    if args.pstats and not args.keep:
        ap.error("--pstats: the profiles go to --keep DIR/pstats/; give --keep")
    env = dict(os.environ)
    env.setdefault("GPUDISSECT_GIT_COMMIT", git_commit(source))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp, "gpudissect")
        work.mkdir()
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc")
        for item in ("Snakefile", "workflow", "config", "kernels", "envs", "profiles"):
            src = source / item
            if src.is_dir():
                shutil.copytree(src, work / item, ignore=ignore)
            else:
                shutil.copy(src, work / item)
        # the copy's bytecode, as a checkout has it after its first run (not timed: on a host
        # that sets PYTHONDONTWRITEBYTECODE every process would compile the package again)
        compileall.compile_dir(work / "workflow", quiet=1)
        # every job imports the copy's package, not an installed one (the rules' scripts run in
        # processes of their own): with --source, the code timed is the source tree's
        env["PYTHONPATH"] = os.pathsep.join(
            [str(work / "workflow"), *filter(None, [os.environ.get("PYTHONPATH")])]
        )
        if args.pstats:
            env[PSTATS_ENV] = str(work / "pstats")
        start = time.perf_counter()
        # quiet about progress only: a job's error block (rule, wildcards, output, log) is what
        # names a failed job, and Snakemake's `--quiet` leaves it out of its log too. Its console
        # (every job's block) goes to a file of the run, kept with its logs.
        with open(work / CONSOLE, "w") as console:
            returncode = subprocess.run(
                [sys.executable, "-m", "snakemake", *args.target, "--cores", str(args.cores)]
                + ["--quiet", "progress", "--configfile", *args.configfile],
                cwd=work,
                check=False,
                env=env,
                stdout=console,
                stderr=subprocess.STDOUT,
            ).returncode
        elapsed = time.perf_counter() - start
        sweeps, profiles, gpu = [], {}, None
        for trace in sorted((work / "results" / "traces").glob("*/*.parquet")):
            prov = read_trace(trace).provenance
            gpu = gpu or (prov.get("device_info") or {}).get("name")
            name = f"{trace.parent.name}/{trace.stem}"
            log = work / "logs" / "run_sweep" / f"{name}.log"
            sweeps.append((_sweep_seconds(log), name))
            profile = _sweep_profile(log)
            if profile is not None:
                profiles[name] = profile
        what = f"{' '.join(args.configfile)} {' '.join(args.target)}, --cores {args.cores}"
        if source != REPO:
            what += f", source {args.source}"
        failed = failed_jobs(work) if returncode else []
        if returncode:
            what += f": FAILED (snakemake exit status {returncode})"
        print(f"{what}: {elapsed:.1f} s wall on {gpu}")
        print(f"sweeps: {sum(s for s, _ in sweeps):.1f} s in all")
        for seconds, name in sorted(sweeps, reverse=True):
            print(f"  {name}: {seconds:.1f} s")
        if profiles:
            print("\nsweep profiles (host-side timers; sync: waits for the GPU):")
            order = [n for _, n in sorted(sweeps, reverse=True) if n in profiles]
            print(profile_table([(n, profiles[n]) for n in order]))
        if args.json:
            figures = {
                "what": what,
                "gpu": gpu,
                "commit": env["GPUDISSECT_GIT_COMMIT"],
                "wall_s": round(elapsed, 3),
                "sweeps": {n: s for s, n in sweeps},
                "profiles": profiles,
            }
            if returncode:
                figures |= {"failed": True, "returncode": returncode, "failed_jobs": failed}
            args.json.write_text(json.dumps(figures, indent=1) + "\n")
        if args.keep:
            keep_outputs(work, args.keep)
            print(f"outputs copied to {args.keep}")
        if returncode:
            for job in failed:
                print(f"\nfailed: rule {job['rule']} {job.get('wildcards', '')}", file=sys.stderr)
                for name in filter(None, job.get("log", "").split(", ")):
                    if (work / name).is_file():
                        print(f"--- {name} ---", file=sys.stderr)
                        print((work / name).read_text(errors="replace")[-8000:], file=sys.stderr)
            if not failed:
                print("failed before or outside a job; Snakemake said:", file=sys.stderr)
                print((work / CONSOLE).read_text(errors="replace")[-8000:], file=sys.stderr)
            sys.exit(returncode)


if __name__ == "__main__":
    main()
