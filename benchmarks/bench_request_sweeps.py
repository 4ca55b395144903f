"""Seconds for the requests and l2_flush sweeps (Lashgar et al.), on the simulator or a GPU.

.venv/bin/python benchmarks/bench_request_sweeps.py                    # sim: the six twins
.venv/bin/python benchmarks/bench_request_sweeps.py --gpu --cubin-dir results/build/sm_90
  (compile first: gpudissect compile, or the compile_kernel rule; H100 L2 sizes up to 96 MiB)
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from gpudissect.config import SizeRange
from gpudissect.experiments import l2_flush, requests

REPO = Path(__file__).resolve().parents[1]
TWINS = ("gtx560ti", "gtx780", "gtx980", "tesla_m2070", "tesla_k20", "tesla_k20c")
REQUESTS = requests.RequestsSweep(
    True, "ca", tuple(requests.PATTERNS), (1, 2, 3, 4), requests.ThreadRange(2, 1024, 2), 3, 1, 128
)


def timed(label: str, fn) -> None:
    t0 = time.perf_counter()
    data = fn()
    print(f"{label}: {time.perf_counter() - t0:.2f} s ({len(data)} rows)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--gpu", action="store_true", help="time on CUDA device 0")
    ap.add_argument("--cubin-dir", default="results/build/sm_90")
    args = ap.parse_args()
    if args.gpu:
        from gpudissect.backends.cuda import CudaBackend

        l2 = l2_flush.L2FlushSweep(True, SizeRange(1 << 20, 96 << 20, 1 << 20), 256 << 20, 3, 256)
        with CudaBackend(index=0, cubin_dir=args.cubin_dir) as b:
            timed(
                "gpu requests (24 sweeps x 512 x 3 runs)",
                lambda: requests.run(b, REQUESTS, device=None),
            )
            timed("gpu l2_flush (1..96 MiB, 3 reps)", lambda: l2_flush.run(b, l2, device=None))
        return
    from gpudissect.backends.sim import SimBackend

    l2 = l2_flush.L2FlushSweep(True, SizeRange(65536, 3 << 20, 65536), 76 << 20, 1, 256)
    for twin in TWINS:
        b = SimBackend(profile_path=REPO / "config" / "devices" / f"{twin}.yaml", seed=1)
        timed(f"sim {twin} requests", lambda b=b: requests.run(b, REQUESTS, device=None))
        timed(f"sim {twin} l2_flush", lambda b=b: l2_flush.run(b, l2, device=None))


if __name__ == "__main__":
    main()
