"""What makes the L1's first miss at carveout 100 differ between the dense and sparse chases?

The same walk (every 128-B line of the array, from its base; 1024 timed accesses after a warm-up
pass; two launches per size; carveout 100; 16 KiB shared buffer; sizes 8-36 KiB in 512-B steps)
over an array whose content and upload differ: (full, memcpy) the Mei & Chu chain A[i] = (i + 32)
mod N in every element, copied from the host (l1_size); (visited, memcpy) only the visited
elements hold a value, the rest zeros, copied from the host; (visited, scatter) only the visited
elements written by the scatter kernel (sparse chases); (full, scatter) every element written by
the scatter kernel.
"""

import json
import sys

import numpy as np

from gpudissect.analysis.misses import FirstMissDetector
from gpudissect.backends.base import ChaseWork
from gpudissect.backends.cuda import CudaBackend
from gpudissect.patterns import chain_pass_steps, stride_chain

SIZES = list(range(8192, 36864 + 1, 512))
CARVEOUT = 100


def work(n, variant):
    steps = chain_pass_steps(array_bytes=n, stride_bytes=128)
    full = stride_chain(array_bytes=n, stride_bytes=128)
    common = dict(path="ca", start_index=0, warmup_steps=steps, record_steps=1024, shared_buffer_bytes=16384)
    pos = np.arange(steps, dtype=np.int64) * 32
    if variant == "full_memcpy":
        return ChaseWork(chain=full, **common)
    if variant == "visited_memcpy":
        d = np.zeros_like(full)
        d[pos] = full[pos]
        return ChaseWork(chain=d, **common)
    if variant == "visited_scatter":
        return ChaseWork(chain=None, array_elements=len(full), sparse_positions=pos, sparse_next=full[pos].astype(np.uint32), **common)
    if variant == "full_scatter":
        return ChaseWork(chain=None, array_elements=len(full), sparse_positions=np.arange(len(full), dtype=np.int64), sparse_next=full.astype(np.uint32), **common)
    raise ValueError(variant)


def series(b, variant):
    groups = []
    for n in SIZES:
        groups.append(np.concatenate([b.run_chase(work(n, variant), carveout_pct=CARVEOUT, seed=r).latency_cycles for r in (0, 1)]).astype(np.float64))
    det = FirstMissDetector().fit(SIZES, groups)
    first = None if det.result is None else int(det.result.x_after)
    slow = [int((g > det._threshold).sum()) for g in groups]
    half = next((n for n, s, g in zip(SIZES, slow, groups) if 2 * s > g.size), None)
    return {"first_miss_bytes": first, "half_miss_bytes": half, "slow": slow,
            "accesses": [int(g.size) for g in groups], "hit_cycles": float(np.median(groups[0]))}


out = {"sizes": SIZES, "carveout_pct": CARVEOUT, "rounds": []}
with CudaBackend(index=0, cubin_dir=sys.argv[1]) as b:
    out["gpu"] = b.device_info()
    for rnd in range(3):
        entry = {}
        for variant in ("full_memcpy", "visited_memcpy", "visited_scatter", "full_scatter"):
            b.release_buffer()
            entry[variant] = s = series(b, variant)
            print(f"round {rnd} {variant:16s}: first {s['first_miss_bytes']} half {s['half_miss_bytes']} hit {s['hit_cycles']:.0f}; slow {s['slow'][::4]}", flush=True)
        out["rounds"].append(entry)
with open(sys.argv[2], "w") as f:
    json.dump(out, f, indent=1)
