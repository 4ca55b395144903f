"""The driver's L2 and memory-bus facts and the context's default persisting-L2 limit."""
from cuda.bindings import driver as d

d.cuInit(0)
_, dev = d.cuDeviceGet(0)
_, ctx = d.cuDevicePrimaryCtxRetain(dev)
d.cuCtxSetCurrent(ctx)
A = d.CUdevice_attribute
_, name = d.cuDeviceGetName(128, dev)
print("name", name.split(b"\0")[0].decode())
for key in ("L2_CACHE_SIZE", "MAX_PERSISTING_L2_CACHE_SIZE", "GLOBAL_MEMORY_BUS_WIDTH",
            "MEMORY_CLOCK_RATE", "MULTIPROCESSOR_COUNT"):
    print(key.lower(), d.cuDeviceGetAttribute(getattr(A, f"CU_DEVICE_ATTRIBUTE_{key}"), dev)[1])
print("persisting_l2_limit_bytes", d.cuCtxGetLimit(d.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE)[1])
d.cuDevicePrimaryCtxRelease(dev)
