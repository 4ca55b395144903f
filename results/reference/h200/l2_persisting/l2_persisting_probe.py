"""Does the context's persisting-L2 set-aside limit change the footprint at which a one-SM walk
over one contiguous allocation starts reading DRAM? Per limit (the context's default, then 0,
then the default again): cyclic walks (128-B stride, 8-byte elements, ld.global.cg) over
footprints around the driver's L2 size; the share of the timed accesses above the DRAM cut."""
import json, sys, time
import numpy as np
from cuda.bindings import driver as drv
from gpudissect.backends.cuda import CudaBackend
from gpudissect.experiments.mapped_chase import MappedChaseWork, PhysicalLayout, ReleaseMapping
from gpudissect.experiments.sparse_chase import sequence_work

cubins, out = sys.argv[1], sys.argv[2]
MiB = 1 << 20
LIM = drv.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE
res = []
with CudaBackend(index=0, cubin_dir=cubins) as b:
    info = b.device_info()
    l2 = info["attributes"]["l2_cache_size"] / MiB
    print("device", info["name"], info.get("uuid"), "L2", l2, "MiB", flush=True)
    err, default = drv.cuCtxGetLimit(LIM)
    print("persisting limit at start", err, default, flush=True)
    foot = [l2 * f for f in (0.85, 0.9, 0.92, 0.9375, 0.95, 0.96, 0.97, 0.98, 0.99, 1.0, 1.02, 1.05)]
    for setting in (default, 0, default):
        print("set limit", setting, drv.cuCtxSetLimit(LIM, setting), drv.cuCtxGetLimit(LIM), flush=True)
        layout = PhysicalLayout("contiguous", chunks=int(2 * l2) // 2, chunk_bytes=2 * MiB, seed=0)
        t0 = time.time()
        for i, f in enumerate(foot):
            n = int(f * MiB) // 128
            seq = np.arange(n, dtype=np.int64) * 16
            w = sequence_work("cg", seq, warmup_steps=2 * n, record_steps=4096, element_bytes=8)
            r = b.run(MappedChaseWork(w, layout), carveout_pct=None, seed=i)
            lat = np.asarray(r.latency_cycles, float)
            res.append(dict(limit=int(drv.cuCtxGetLimit(LIM)[1]), mib=f, med=float(np.median(lat)),
                            dram=float(np.mean(lat > 600))))
            print(f"limit {res[-1]['limit']:9d} {f:6.2f} MiB med {np.median(lat):6.0f} dram {res[-1]['dram']:.3f}", flush=True)
        b.run(ReleaseMapping())
        print(f"  {time.time()-t0:.1f} s", flush=True)
json.dump(res, open(out, "w"), indent=1)
