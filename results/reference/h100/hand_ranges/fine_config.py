"""config/gpu.yaml with an explicit l2 grid around the driver's L2 size: 0.25-MiB steps over
0.40-0.55 and 0.85-1.05 of it (the near-partition step and the whole L2's), a few coarse
footprints between and past, 4096 timed accesses each. Run from the repository root:
python fine_config.py L2_BYTES OUT.yaml"""

import sys

import yaml

l2 = int(sys.argv[1])
q = 1 << 18
fine = set()
for lo, hi in ((0.40, 0.55), (0.85, 1.05)):
    fine |= set(range(int(lo * l2) // q * q, int(hi * l2) + q, q))
coarse = {int(f * l2) // q * q for f in (0.15, 0.2, 0.25, 0.3, 0.35, 0.6, 0.7, 0.8, 1.1, 1.25, 1.5)}
cfg = yaml.safe_load(open("config/gpu.yaml"))
cfg["experiments"]["l2"]["array_bytes"] = sorted(fine | coarse)
cfg["experiments"]["l2"]["record_steps"] = 4096
yaml.safe_dump(cfg, open(sys.argv[2], "w"), sort_keys=False)
print(len(fine | coarse), "footprints")
