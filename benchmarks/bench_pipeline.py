"""Wall time of the default pipeline (all shipped simulated profiles) with --cores 2.

Runs the real `snakemake --cores 2` on a fresh copy of the workflow in a temporary folder (so no
earlier outputs or numba caches count in its favour... except numba's on-disk cache of the
installed package, which a user's second run also has; the first run's compile time is printed
separately) and prints the elapsed seconds.
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
        times = []
        for attempt in range(2):
            work = Path(tmp, f"run{attempt}")
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            for item in ("Snakefile", "workflow", "config", "kernels", "envs", "profiles"):
                src = REPO / item
                (
                    shutil.copytree(src, work / item, ignore=ignore)
                    if src.is_dir()
                    else shutil.copy(src, work / item)
                )
            times.append(run_once(work))
        print(
            f"host: {platform.machine()}, {platform.processor() or 'cpu'}, "
            f"{__import__('os').cpu_count()} CPUs"
        )
        print(
            f"default pipeline, --cores 2: first run {times[0]:.1f} s, "
            f"second run (fresh outputs, warm numba cache) {times[1]:.1f} s"
        )


if __name__ == "__main__":
    main()
