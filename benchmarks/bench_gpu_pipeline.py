"""Wall time of the whole GPU experiment set (`config/gpu.yaml`) on this host's GPU.

Runs the real `snakemake --cores N --configfile config/gpu.yaml` once on a fresh copy of the
workflow in a temporary folder: nvcc builds the kernels, every sweep runs on the GPU (one at a
time: they share the `gpu` resource), then the analyses, figures and the report. Prints the
elapsed wall time, the GPU it ran on, and each sweep's own time (the `sweep timing:` line of
its log: traces hold no wall-clock time), longest first. `--keep DIR` copies the run's
`results/` and `logs/` to DIR.

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

from gpudissect.provenance import git_commit
from gpudissect.sweep import TIMING_TAG
from gpudissect.traces import read_trace

REPO = Path(__file__).resolve().parents[1]


def _sweep_seconds(log: Path) -> float:
    """A sweep's wall time, from the timing line its log ends with (traces hold no time)."""
    lines = log.read_text().splitlines() if log.is_file() else []
    for line in reversed(lines):
        if TIMING_TAG in line:
            return float(json.loads(line.split(TIMING_TAG, 1)[1])["elapsed_s"])
    return 0.0


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
    args = ap.parse_args()
    env = dict(os.environ)
    env.setdefault("GPUDISSECT_GIT_COMMIT", git_commit(REPO))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp, "gpudissect")
        work.mkdir()
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc")
        for item in ("Snakefile", "workflow", "config", "kernels", "envs", "profiles"):
            src = REPO / item
            if src.is_dir():
                shutil.copytree(src, work / item, ignore=ignore)
            else:
                shutil.copy(src, work / item)
        # the copy's bytecode, as a checkout has it after its first run (not timed: on a host
        # that sets PYTHONDONTWRITEBYTECODE every process would compile the package again)
        compileall.compile_dir(work / "workflow", quiet=1)
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "snakemake", *args.target, "--cores", str(args.cores), "--quiet"]
            + ["--configfile", *args.configfile],
            cwd=work,
            check=True,
            env=env,
        )
        elapsed = time.perf_counter() - start
        sweeps, gpu = [], None
        for trace in sorted((work / "results" / "traces").glob("*/*.parquet")):
            prov = read_trace(trace).provenance
            gpu = gpu or (prov.get("device_info") or {}).get("name")
            name = f"{trace.parent.name}/{trace.stem}"
            sweeps.append((_sweep_seconds(work / "logs" / "run_sweep" / f"{name}.log"), name))
        what = f"{' '.join(args.configfile)} {' '.join(args.target)}, --cores {args.cores}"
        print(f"{what}: {elapsed:.1f} s wall on {gpu}")
        print(f"sweeps: {sum(s for s, _ in sweeps):.1f} s in all")
        for seconds, name in sorted(sweeps, reverse=True):
            print(f"  {name}: {seconds:.1f} s")
        if args.keep:
            for sub in ("results", "logs"):
                shutil.copytree(work / sub, args.keep / sub, dirs_exist_ok=True)
            print(f"outputs copied to {args.keep}")


if __name__ == "__main__":
    main()
