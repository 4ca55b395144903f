"""Wall time of the default pipeline (all shipped simulated profiles) with --cores 2.

Runs the real `snakemake --cores 2` twice on a fresh copy of the workflow in a temporary folder,
removing every output in between: the first run compiles the simulator's numba kernels (a user's
first run does too), the second finds numba's on-disk cache warm (as every later run of a
checkout does). Prints both elapsed times.
"""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_once(work: Path) -> float:
    bin_dir = str(Path(sys.executable).parent)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "2", "--quiet", "all"],
        cwd=work,
        check=True,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(work)},
    )
    return time.perf_counter() - start


def main() -> None:
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
        times = []
        for _ in range(2):
            for out in ("results", "logs", ".snakemake"):
                shutil.rmtree(work / out, ignore_errors=True)
            times.append(run_once(work))
        print(
            f"host: {platform.machine()}, {platform.processor() or 'cpu'}, "
            f"{__import__('os').cpu_count()} CPUs"
        )
        print(
            f"default pipeline, --cores 2: first run (numba compiles the simulator) "
            f"{times[0]:.1f} s, second run (fresh outputs, numba's cache warm) {times[1]:.1f} s"
        )


if __name__ == "__main__":
    main()
