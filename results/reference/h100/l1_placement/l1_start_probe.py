"""Does the L1's first miss depend on where in its allocation the array starts?

`l1_size`'s walk (a sparse chase of 4-byte elements, 128-B stride, written on the GPU by the
scatter kernel, one warm-up pass, 1024 timed accesses, 16 KiB shared buffer, two launches per
size) over an array that starts `offset` bytes into one allocation of 4 MiB, reserved once so
that every series walks the same memory. Carveout 0: sizes 200704-229376 B in 256-B steps;
carveout 100: 12288-24576 B in 256-B steps. The offset-0 series is walked again last.
Per series: the first-miss bracket (`analysis.misses.FirstMissDetector`, the rule `l1_size`
uses) and the slow accesses per size. Run from the repository root with `workflow/` on
PYTHONPATH: python l1_start_probe.py <cubin dir> <out.json>
"""

import json
import sys
from dataclasses import replace

import numpy as np

from gpudissect.analysis.misses import FirstMissDetector
from gpudissect.backends.cuda import CudaBackend
from gpudissect.experiments.sparse_chase import sequence_work
from gpudissect.patterns import chain_pass_steps

OFFSETS = [0, 128, 512, 2048, 4096, 7680, 8192, 16384, 32768, 65536, 131072, 1 << 20, 0]
GRIDS = {0: range(200704, 229376 + 1, 256), 100: range(12288, 24576 + 1, 256)}


def work(n: int, offset: int):
    steps = chain_pass_steps(array_bytes=n, stride_bytes=128)
    seq = offset // 4 + np.arange(steps, dtype=np.int64) * 32
    w = sequence_work("ca", seq, warmup_steps=steps, record_steps=1024, element_bytes=4)
    return replace(w, shared_buffer_bytes=16384)


def walk(b, carveout: int, offset: int) -> dict:
    sizes = list(GRIDS[carveout])
    groups = [
        np.concatenate(
            [b.run_chase(work(n, offset), carveout_pct=carveout, seed=r).latency_cycles
             for r in (0, 1)]
        ).astype(np.float64)
        for n in sizes
    ]  # fmt: skip
    det = FirstMissDetector().fit(sizes, groups)
    bracket = None if det.result is None else [int(det.result.x_before), int(det.result.x_after)]
    return {
        "carveout_pct": carveout,
        "offset_bytes": offset,
        "first_miss_bracket": bracket,
        "slow": [int((g > det._threshold).sum()) for g in groups],
        "accesses": [int(g.size) for g in groups],
        "hit_cycles": float(np.median(groups[0])),
    }


out = {"grids": {c: list(g) for c, g in GRIDS.items()}, "series": []}
with CudaBackend(index=0, cubin_dir=sys.argv[1]) as b:
    out["gpu"] = b.device_info()
    b.reserve(4 << 20)
    out["buffer_address"] = hex(int(b._buffer))
    print("buffer at", out["buffer_address"], flush=True)
    for carveout in GRIDS:
        for offset in OFFSETS:
            s = walk(b, carveout, offset)
            out["series"].append(s)
            print(f"carveout {carveout:3d} offset {offset:8d}: first miss {s['first_miss_bracket']}"
                  f" hit {s['hit_cycles']:.0f}", flush=True)  # fmt: skip
with open(sys.argv[2], "w") as f:
    json.dump(out, f, indent=1)
