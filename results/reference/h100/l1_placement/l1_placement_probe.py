"""Does the L1's first miss depend on where the chase array lies in physical memory?

For each of several placements (the chase array freed, a pad of the given MiB allocated, one
array for every size allocated again: the driver then backs it with other physical pages), the fine-grained
P-chase of `config/gpu.yaml`'s `l1_size` (ld.global.ca, 128-B stride, 1024 timed accesses after
a warm-up pass, two launches per size, 16 KiB shared buffer) runs a dense size sweep at three
carveouts. Per placement and carveout it prints the first size that misses by the analysis's
own first-miss test (`FirstMissDetector`, the two smallest sizes as the reference) and the first
size where half the accesses miss.

Run from the repository root with PYTHONPATH=workflow; arguments: a directory holding
pchase.cubin, the output JSON.
"""

import json
import sys
from dataclasses import replace

import numpy as np

from gpudissect.analysis.misses import FirstMissDetector
from gpudissect.backends.cuda import CudaBackend
from gpudissect.config import load
from gpudissect.experiments.l1_size import _work
from gpudissect.patterns import stride_chain

BUFFER = 16384
SIZES = {
    100: list(range(8192, 36864 + 1, 512)),
    50: list(range(110592, 135168 + 1, 1024)),
    0: list(range(200704, 245760 + 1, 2048)),
}
PADS_MIB = [0, 2, 6, 18, 66, 130, 258, 514, 1026, 2050, 4098, 8194]

sweep = load("config/gpu.yaml").device("gpu0").params["l1_size"]
out = {"buffer_bytes": BUFFER, "sizes": {str(c): s for c, s in SIZES.items()}, "placements": []}
with CudaBackend(index=0, cubin_dir=sys.argv[1]) as b:
    out["gpu"] = b.device_info()
    for pad_mib in PADS_MIB:
        b.release_buffer()
        pad = b.drv.mem_alloc(pad_mib * (1 << 20) + 65536)
        # one array for every size and carveout of this placement (each chase starts at its base)
        b._device_buffer(max(max(s) for s in SIZES.values()), exact=True)
        entry = {"pad_mib": pad_mib, "carveouts": {}}
        for carveout, sizes in SIZES.items():
            groups = []
            for n in sizes:
                # the array copied from the host whole, as l1_size walked it then
                work = replace(_work(sweep, n, BUFFER), array_elements=None, sparse_positions=None,
                               sparse_next=None, chain=stride_chain(array_bytes=n, stride_bytes=128))
                lat = [b.run_chase(work, carveout_pct=carveout, seed=r).latency_cycles for r in (0, 1)]
                groups.append(np.concatenate(lat).astype(np.float64))
            det = FirstMissDetector().fit(sizes, groups)
            first = None if det.result is None else int(det.result.x_after)
            slow = [int((g > det._threshold).sum()) for g in groups]
            half = next((n for n, k, g in zip(sizes, slow, groups) if 2 * k > g.size), None)
            entry["carveouts"][str(carveout)] = {
                "first_miss_bytes": first,
                "half_miss_bytes": half,
                "threshold_cycles": det._threshold,
                "slow": slow,
                "accesses": [int(g.size) for g in groups],
            }
            print(f"pad {pad_mib:5d} MiB  array at {int(b._buffer):#x}  carveout {carveout:3d}: "
                  f"first miss {first}, half the accesses miss from {half}", flush=True)
        entry["array_address"] = int(b._buffer)
        out["placements"].append(entry)
        pad.free()
with open(sys.argv[2], "w") as f:
    json.dump(out, f, indent=1)
