"""The l1_size sweep (config/gpu.yaml, every carveout and buffer, size search) three times with
its array copied from the host (as committed) and three times written by the scatter kernel
(only the visited elements, a sparse chase): the first miss of each series."""

import json
import sys
from dataclasses import replace

import numpy as np

from gpudissect.analysis.cache_size import CacheSizeEstimator
from gpudissect.backends.cuda import CudaBackend
from gpudissect.config import load
from gpudissect.experiments import l1_size
from gpudissect.patterns import chain_pass_steps, stride_chain

sweep_work = l1_size._work  # the sweep's own work (the sizes, records and buffer)


def dense_work(sweep, array_bytes, buffer_bytes):
    """The array copied from the host whole (Mei & Chu's chain; l1_size before it wrote only
    the visited elements, which is how this output was measured, at commit 427a23c)."""
    return replace(
        sweep_work(sweep, array_bytes, buffer_bytes),
        chain=stride_chain(array_bytes=array_bytes, stride_bytes=sweep.stride_bytes),
        array_elements=None, sparse_positions=None, sparse_next=None,
    )


def sparse_work(sweep, array_bytes, buffer_bytes):
    """Only the visited elements, written on the GPU by the scatter kernel."""
    full = stride_chain(array_bytes=array_bytes, stride_bytes=sweep.stride_bytes)
    s = sweep.stride_bytes // 4
    steps = chain_pass_steps(array_bytes=array_bytes, stride_bytes=sweep.stride_bytes)
    pos = np.arange(steps, dtype=np.int64) * s
    return replace(dense_work(sweep, array_bytes, buffer_bytes), chain=None,
                   array_elements=len(full), sparse_positions=pos,
                   sparse_next=full[pos].astype(np.uint32))


cfg = load("config/gpu.yaml")
device = cfg.device("gpu0")
params = device.params["l1_size"]
out = []
with CudaBackend(index=0, cubin_dir=sys.argv[1]) as b:
    for rnd in range(3):
        for mode, fn in (("copy", dense_work), ("scatter", sparse_work)):
            l1_size._work = fn
            b.release_buffer()
            data = l1_size.run(b, params, device=device)
            est = CacheSizeEstimator().fit(data)
            res = {f"{s.carveout_pct}/{s.shared_buffer_bytes}": s.quantities["size_bytes"].get("value") for s in est.series}
            conf = {f"{s.carveout_pct}/{s.shared_buffer_bytes}": s.quantities["size_bytes"].get("confidence") for s in est.series}
            out.append({"round": rnd, "mode": mode, "sizes": res, "confidence": conf, "launches": int(data["point"].nunique())})
            print(rnd, f"{mode:8s}", res, "launches", int(data["point"].nunique()), flush=True)
            print("   conf", conf, flush=True)
json.dump(out, open(sys.argv[2], "w"), indent=1)
