"""How the chase array is written, against the L1's first miss at carveout 0.

`cache_stage1`'s L1 walk (dense stride chain, 32-B stride, `ld.global.ca`, one warm-up pass,
2048 timed accesses, 16 KiB shared buffer, carveout 0; 212992-229376 B in 256-B steps, two
launches per size), its array written four ways, two rounds each (the chase buffer freed
between rounds):
  copy       copied from the host (the backend's dense path);
  sparse     the visited elements only, by the scatter kernel (`l1_size`'s way);
  scatter    every element by the scatter kernel, its positions and values in device buffers
             allocated for the launch and freed after it;
  kept       the same, the positions and values allocated once, for the largest array, and
             kept across launches.
Per series: the first-miss bracket (`analysis.misses.FirstMissDetector`) and the slow accesses
per size. Run from the repository root with `workflow/` on PYTHONPATH:
python l1_writer_probe.py <cubin dir> <out.json>
"""

import json
import sys

import numpy as np

from gpudissect.analysis.misses import FirstMissDetector
from gpudissect.backends.base import ChaseWork
from gpudissect.backends.cuda import CudaBackend
from gpudissect.patterns import chain_pass_steps, stride_chain, stride_cycle

SIZES = list(range(212992, 229376 + 1, 256))
STRIDE, RECORD, BUFFER, CARVEOUT = 32, 2048, 16384, 0


def dense(n: int) -> ChaseWork:
    return ChaseWork(
        path="ca",
        chain=stride_chain(array_bytes=n, stride_bytes=STRIDE),
        start_index=0,
        warmup_steps=chain_pass_steps(array_bytes=n, stride_bytes=STRIDE),
        record_steps=RECORD,
        shared_buffer_bytes=BUFFER,
    )


def sparse(n: int) -> ChaseWork:
    positions, values = stride_cycle(array_bytes=n, stride_bytes=STRIDE)
    w = dense(n)
    return ChaseWork(
        path="ca",
        chain=None,
        start_index=0,
        warmup_steps=w.warmup_steps,
        record_steps=RECORD,
        shared_buffer_bytes=BUFFER,
        array_elements=n // 4,
        sparse_positions=positions,
        sparse_next=values,
    )


class Scatter:
    """Dense chains written by the scatter kernel; `keep`: its buffers outlive the launch."""

    def __init__(self, b: CudaBackend, keep: bool):
        self.b, self.keep, self.bufs = b, keep, None
        self.fn = b.function("pchase", "scatter_u32", "PPPI")

    def __call__(self, n: int, seed: int) -> np.ndarray:
        b, drv, w = self.b, self.b.drv, dense(n)
        buf = b._device_buffer(w.elements * 4)
        k = SIZES[-1] // 4 if self.keep else w.elements
        if self.bufs is None:
            self.bufs = (drv.to_device(np.arange(k, dtype=np.uint64)), drv.mem_alloc(4 * k))
        pos, val = self.bufs
        drv.memcpy_htod(val, np.ascontiguousarray(w.chain))
        self.fn.prepared_call(
            ((w.elements + 255) // 256, 1), (256, 1, 1), buf, pos, val, np.uint32(w.elements)
        )
        b.context.synchronize()
        if not self.keep:
            pos.free()
            val.free()
            self.bufs = None
        lat, _ = b.launch_chase(w, buf, carveout_pct=CARVEOUT)
        return lat


def series(run_one) -> dict:
    groups = [np.concatenate([run_one(n, r) for r in (0, 1)]).astype(np.float64) for n in SIZES]
    det = FirstMissDetector().fit(SIZES, groups)
    bracket = None if det.result is None else [int(det.result.x_before), int(det.result.x_after)]
    return {
        "first_miss_bracket": bracket,
        "slow": [int((g > det._threshold).sum()) for g in groups],
        "accesses": [int(g.size) for g in groups],
        "hit_cycles": float(np.median(groups[0])),
    }


out = {"sizes": SIZES, "series": []}
with CudaBackend(index=0, cubin_dir=sys.argv[1]) as b:
    out["gpu"] = b.device_info()
    ways = {
        "copy": lambda n, r: b.run_chase(dense(n), carveout_pct=CARVEOUT, seed=r).latency_cycles,
        "sparse": lambda n, r: b.run_chase(sparse(n), carveout_pct=CARVEOUT, seed=r).latency_cycles,
        "scatter": Scatter(b, keep=False),
        "kept": Scatter(b, keep=True),
    }
    for rnd in range(2):
        for name, run_one in ways.items():
            b.release_buffer()
            s = {"way": name, "round": rnd, **series(run_one)}
            out["series"].append(s)
            print(
                f"round {rnd} {name:8s}: first miss {s['first_miss_bracket']} "
                f"hit {s['hit_cycles']:.0f}",
                flush=True,
            )
with open(sys.argv[2], "w") as f:
    json.dump(out, f, indent=1)
