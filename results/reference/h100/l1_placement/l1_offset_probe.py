"""Is the L1's first miss at carveout 100 set by the physical chunk, or by the chase?

Dense size sweeps at carveout 100 (8-36 KiB, 512-B steps, 128-B stride, 1024 timed accesses
after a warm-up pass, two launches per size, 16 KiB shared buffer) of sparse chases whose array
starts k x 2 MiB into (M8) one physically contiguous mapping of 16 chunks, 8-byte elements;
(A8) the allocator's buffer, 8-byte elements; (A4) the allocator's buffer, 4-byte elements;
k = 0..15. Per series: first miss (FirstMissDetector) and first size where half the accesses miss.
"""

import json
import sys
from dataclasses import replace

import numpy as np

from gpudissect.analysis.misses import FirstMissDetector
from gpudissect.backends.cuda import CudaBackend
from gpudissect.experiments.mapped_chase import MappedChaseWork, PhysicalLayout, ReleaseMapping
from gpudissect.experiments.sparse_chase import sequence_work
from gpudissect.patterns import chain_pass_steps

SIZES = list(range(8192, 36864 + 1, 512))
CARVEOUT = 100
CHUNK = 2 << 20
layout = PhysicalLayout("contiguous", chunks=16, chunk_bytes=CHUNK)


def work(n, k, element_bytes):
    steps = chain_pass_steps(array_bytes=n, stride_bytes=128)
    per_line = 128 // element_bytes
    seq = (k * CHUNK // element_bytes) + np.arange(steps, dtype=np.int64) * per_line
    w = sequence_work("ca", seq, warmup_steps=steps, record_steps=1024, element_bytes=element_bytes)
    return replace(w, shared_buffer_bytes=16384)


def series(run_one):
    groups = [np.concatenate([run_one(n, r) for r in (0, 1)]).astype(np.float64) for n in SIZES]
    det = FirstMissDetector().fit(SIZES, groups)
    first = None if det.result is None else int(det.result.x_after)
    slow = [int((g > det._threshold).sum()) for g in groups]
    half = next((n for n, s, g in zip(SIZES, slow, groups) if 2 * s > g.size), None)
    return {"first_miss_bytes": first, "half_miss_bytes": half, "slow": slow,
            "accesses": [int(g.size) for g in groups], "hit_cycles": float(np.median(groups[0]))}


out = {"sizes": SIZES, "carveout_pct": CARVEOUT, "series": []}
with CudaBackend(index=0, cubin_dir=sys.argv[1]) as b:
    out["gpu"] = b.device_info()
    for k in range(16):
        m = series(lambda n, r: b.run(MappedChaseWork(work(n, k, 8), layout), carveout_pct=CARVEOUT, seed=r).latency_cycles)
        a8 = series(lambda n, r: b.run_chase(work(n, k, 8), carveout_pct=CARVEOUT, seed=r).latency_cycles)
        a4 = series(lambda n, r: b.run_chase(work(n, k, 4), carveout_pct=CARVEOUT, seed=r).latency_cycles)
        out["series"].append({"chunk": k, "M8": m, "A8": a8, "A4": a4})
        print(f"chunk {k:2d}: " + "; ".join(f"{name} first {s['first_miss_bytes']} half {s['half_miss_bytes']} hit {s['hit_cycles']:.0f}"
                                           for name, s in (("M8", m), ("A8", a8), ("A4", a4))), flush=True)
    b.run(ReleaseMapping())
with open(sys.argv[2], "w") as f:
    json.dump(out, f, indent=1)
