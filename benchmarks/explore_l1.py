"""Exploration on a GPU host: mean P-chase latency against array size at several carveouts and
shared buffers, printed as a table (used to choose the sweep range of config/gpu.yaml)."""

import sys
import time

import numpy as np

from gpudissect.backends.base import ChaseWork
from gpudissect.backends.cuda import CudaBackend
from gpudissect.patterns import chain_pass_steps, stride_chain

cubin_dir = sys.argv[1]
with CudaBackend(index=0, cubin_dir=cubin_dir) as b:
    print(b.device_info())
    t = time.time()
    for path, carveouts, sizes, stride in (
        ("ca", (100, 0, 50), range(8 << 10, 300 << 10, 8 << 10), 128),
        ("cg", (100,), [1 << k for k in range(14, 27)], 128),
    ):
        for c in carveouts:
            for buf in (16384, 65536):
                row = []
                for size in sizes:
                    chain = stride_chain(array_bytes=size, stride_bytes=stride)
                    steps = chain_pass_steps(array_bytes=size, stride_bytes=stride)
                    w = ChaseWork(
                        path=path,
                        chain=chain,
                        start_index=0,
                        warmup_steps=steps,
                        record_steps=min(steps, 2048),
                        shared_buffer_bytes=buf,
                    )
                    r = b.run_chase(w, carveout_pct=c)
                    row.append(f"{size >> 10}K:{np.mean(r.latency_cycles):.0f}")
                print(path, f"carveout={c}", f"buf={buf >> 10}K", " ".join(row), flush=True)
    print("elapsed", time.time() - t, "clocks", b.clocks())
