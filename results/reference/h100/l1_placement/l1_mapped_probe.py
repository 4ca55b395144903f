"""Does the L1's first miss at carveout 100 repeat when the chase array is one mapped 2 MiB chunk?

For each of several placements (mapping released, a pad of the given MiB allocated, the chunk
mapped again: the driver backs it with other physical memory), a dense size sweep at carveout
100 (8-36 KiB, 512-B steps; ld.global.ca, 128-B stride, 1024 timed accesses after a warm-up pass,
two launches per size) over (a) one physically contiguous 2 MiB mapping starting at its base
(`experiments.mapped_chase`, 8-byte elements) and (b) the allocator's buffer as `l1_size` walks
it; 16 and 64 KiB shared buffers. Per series: the first miss by `FirstMissDetector` and the
first size where half the accesses miss.

Run from the repository root with PYTHONPATH=workflow; arguments: a directory holding the
cubins, the output JSON.
"""

import json
import sys

import numpy as np

from gpudissect.analysis.misses import FirstMissDetector
from gpudissect.backends.cuda import CudaBackend
from gpudissect.backends.base import ChaseWork
from gpudissect.experiments.mapped_chase import MappedChaseWork, PhysicalLayout, ReleaseMapping
from gpudissect.experiments.sparse_chase import sequence_work
from gpudissect.patterns import chain_pass_steps, stride_chain

SIZES = list(range(8192, 36864 + 1, 512))
BUFFERS = [16384, 65536]
PADS_MIB = [0, 2, 6, 18, 66, 130, 258, 514, 1026, 2050]
CARVEOUT = 100

layout = PhysicalLayout("contiguous", chunks=1, chunk_bytes=2 << 20)


def dense_work(n, buffer):
    """The array copied from the host whole, as l1_size walked it when this output was measured
    (commit 427a23c; config/gpu.yaml: 128-B stride, 1024 timed accesses)."""
    steps = chain_pass_steps(array_bytes=n, stride_bytes=128)
    return ChaseWork(path="ca", chain=stride_chain(array_bytes=n, stride_bytes=128), start_index=0,
                     warmup_steps=steps, record_steps=1024, shared_buffer_bytes=buffer)


def mapped_work(n, buffer):
    steps = chain_pass_steps(array_bytes=n, stride_bytes=128)
    seq = np.arange(steps, dtype=np.int64) * 16
    w = sequence_work("ca", seq, warmup_steps=steps, record_steps=1024, element_bytes=8)
    from dataclasses import replace
    return MappedChaseWork(replace(w, shared_buffer_bytes=buffer), layout)


def series(run_one):
    groups = []
    for n in SIZES:
        lat = [run_one(n, r) for r in (0, 1)]
        groups.append(np.concatenate(lat).astype(np.float64))
    det = FirstMissDetector().fit(SIZES, groups)
    first = None if det.result is None else int(det.result.x_after)
    slow = [int((g > det._threshold).sum()) for g in groups]
    half = next((n for n, k, g in zip(SIZES, slow, groups) if 2 * k > g.size), None)
    return {"first_miss_bytes": first, "half_miss_bytes": half, "slow": slow,
            "accesses": [int(g.size) for g in groups],
            "hit_cycles": float(np.median(groups[0]))}


out = {"sizes": SIZES, "carveout_pct": CARVEOUT, "placements": []}
with CudaBackend(index=0, cubin_dir=sys.argv[1]) as b:
    out["gpu"] = b.device_info()
    for pad_mib in PADS_MIB:
        b.run(ReleaseMapping())
        b.release_buffer()
        pad = b.drv.mem_alloc(pad_mib * (1 << 20) + 65536)
        entry = {"pad_mib": pad_mib}
        for buffer in BUFFERS:
            m = series(lambda n, r: b.run(mapped_work(n, buffer), carveout_pct=CARVEOUT, seed=r).latency_cycles)
            b._device_buffer(max(SIZES), exact=True)
            a = series(lambda n, r: b.run_chase(dense_work(n, buffer), carveout_pct=CARVEOUT, seed=r).latency_cycles)
            entry[f"mapped_{buffer}"] = m
            entry[f"allocator_{buffer}"] = a
            print(f"pad {pad_mib:5d} MiB buffer {buffer:6d}: mapped first {m['first_miss_bytes']} half {m['half_miss_bytes']} "
                  f"(hit {m['hit_cycles']:.0f}); allocator at {int(b._buffer):#x} first {a['first_miss_bytes']} half {a['half_miss_bytes']}", flush=True)
        out["placements"].append(entry)
        pad.free()
    b.run(ReleaseMapping())
with open(sys.argv[2], "w") as f:
    json.dump(out, f, indent=1)
