"""Does the constant L1's first miss depend on how its array was written?

The constant-path P-chase (ld.const through the constant caches, 32-B stride, 2048 timed
accesses after a warm-up pass, two launches per size; sizes 1024-3072 B in 32-B steps) with the
chain copied into the constant bank from the host (as the backend does) or written there by the
scatter kernel (an SM store to the bank's global address); three rounds each. Per series: the
first miss (FirstMissDetector), and the slow accesses per size.
"""

import json
import sys

import numpy as np

from gpudissect.analysis.misses import FirstMissDetector
from gpudissect.backends.base import ChaseWork
from gpudissect.backends.cuda import CudaBackend
from gpudissect.patterns import chain_pass_steps, stride_chain

SIZES = list(range(1024, 3072 + 1, 32))
STRIDE = 32


def work(n):
    return ChaseWork(path="const", chain=stride_chain(array_bytes=n, stride_bytes=STRIDE), start_index=0,
                     warmup_steps=chain_pass_steps(array_bytes=n, stride_bytes=STRIDE), record_steps=2048,
                     shared_buffer_bytes=16384)


def run(b, n, mode, seed):
    w = work(n)
    if mode == "copy":
        return b.run_chase(w, carveout_pct=0, seed=seed).latency_cycles
    # write the bank by the scatter kernel, then launch the constant chase without copying
    ptr, _ = b._modules["pchase"].get_global("c_chain") if "pchase" in b._modules else (None, None)
    if ptr is None:
        b.function("pchase", "pchase_const", "IIIPP")
        ptr, _ = b._modules["pchase"].get_global("c_chain")
    scatter = b.function("pchase", "scatter_u32", "PPPI")
    pos = b.drv.to_device(np.arange(len(w.chain), dtype=np.uint64))
    val = b.drv.to_device(np.ascontiguousarray(w.chain))
    scatter.prepared_call(((len(w.chain) + 255) // 256, 1), (256, 1, 1), np.uintp(int(ptr)), pos, val, np.uint32(len(w.chain)))
    b.context.synchronize()
    pos.free(); val.free()
    fn = b.function("pchase", "pchase_const", "IIIPP")
    b._set_shared(fn, dynamic_bytes=w.shared_buffer_bytes, carveout_pct=0)
    lat, idx = b._records(w, fn, (np.uint32(0), np.uint32(w.warmup_steps), np.uint32(w.record_steps)))
    expected = w.walk(w.warmup_steps + w.record_steps + 1)[w.warmup_steps + 1:]
    if idx.tolist() != (expected % 2**32).tolist()[: len(idx)]:
        WRONG.append(n)
    return lat


WRONG = []
out = {"sizes": SIZES, "rounds": []}
with CudaBackend(index=0, cubin_dir=sys.argv[1]) as b:
    out["gpu"] = b.device_info()
    for rnd in range(3):
        entry = {}
        for mode in ("copy", "scatter"):
            groups = [np.concatenate([run(b, n, mode, r) for r in (0, 1)]).astype(np.float64) for n in SIZES]
            det = FirstMissDetector().fit(SIZES, groups)
            first = None if det.result is None else int(det.result.x_after)
            slow = [int((g > det._threshold).sum()) for g in groups]
            entry[mode] = {"first_miss_bytes": first, "slow": slow, "hit_cycles": float(np.median(groups[0]))}
            entry[mode]["walks_not_as_written"] = sorted(set(WRONG)); WRONG.clear()
            print(f"round {rnd} {mode:7s}: wrong walks {entry[mode]['walks_not_as_written'][:5]} first {first} hit {np.median(groups[0]):.0f}; slow {slow}", flush=True)
        out["rounds"].append(entry)
json.dump(out, open(sys.argv[2], "w"), indent=1)
