"""Does the footprint at which an L2 walk starts reading DRAM depend on the physical placement?

Per placement and trial: cyclic walks (128-B stride, 8-byte elements, ld.global.cg, two untimed
passes, 4096 timed accesses) over footprints around the driver's L2 size, on a range mapped
through the CUDA virtual-memory API either from one physical allocation (`contiguous`) or from
2-MiB allocations in a shuffled order (`scattered`, a new seed per trial); per footprint the
median and the shares of timed accesses above 640 cycles (DRAM) and in 420-640 (far).

    PYTHONPATH=workflow python placement_probe.py <cubin dir with pchase.cubin> <out.json>
"""

import json
import sys
import time

import numpy as np

from gpudissect.backends.cuda import CudaBackend
from gpudissect.experiments.mapped_chase import MappedChaseWork, PhysicalLayout, ReleaseMapping
from gpudissect.experiments.sparse_chase import sequence_work

MIB = 1 << 20


def main(cubins: str, out: str) -> None:
    res = []
    with CudaBackend(index=0, cubin_dir=cubins) as b:
        name = b.device_info()["name"]
        print("device", name, b.facts())
        foot = [40, 44, 46, 47, 48, 48.5, 49, 49.5, 50, 50.5, 51, 52, 54]
        if "H200" in name:
            foot = [f * 1.2 for f in foot]
        span = 128 * MIB
        for mode in ["contiguous", "scattered"] * 3:
            trial = len([r for r in res if r["mode"] == mode and r["i"] == 0])
            layout = PhysicalLayout(mode, chunks=span // (2 * MIB), chunk_bytes=2 * MIB, seed=trial)
            t0 = time.time()
            for i, f in enumerate(foot):
                n = int(f * MIB) // 128
                seq = np.arange(n, dtype=np.int64) * 16
                w = sequence_work("cg", seq, warmup_steps=2 * n, record_steps=4096, element_bytes=8)
                r = b.run(MappedChaseWork(w, layout), carveout_pct=None, seed=i)
                lat = np.asarray(r.latency_cycles, float)
                row = {
                    "mode": mode,
                    "trial": trial,
                    "i": i,
                    "mib": f,
                    "med": float(np.median(lat)),
                    "p10": float(np.percentile(lat, 10)),
                    "p90": float(np.percentile(lat, 90)),
                    "dram": float(np.mean(lat > 640)),
                    "far": float(np.mean((lat > 420) & (lat <= 640))),
                }
                res.append(row)
                print(
                    f"{mode:10s} t{trial} {f:6.1f} MiB med {row['med']:6.0f} "
                    f"dram {row['dram']:.3f} far {row['far']:.3f}",
                    flush=True,
                )
            b.run(ReleaseMapping())
            print(f"  {mode} trial {trial}: {time.time() - t0:.1f} s", flush=True)
    with open(out, "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
