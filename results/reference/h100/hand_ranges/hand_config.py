"""config/gpu.yaml with the l1_size and l2 ranges it set by hand before they became automatic
(c1f8d98, whose parent holds them): l1_size 2048-296960 B in 2048-B steps, l2 8-72 MiB in
2-MiB steps. Run from the repository root: python hand_config.py OUT.yaml"""

import sys

import yaml

cfg = yaml.safe_load(open("config/gpu.yaml"))
cfg["experiments"]["l1_size"]["array_bytes"] = {"start": 2048, "stop": 296960, "step": 2048}
cfg["experiments"]["l2"]["array_bytes"] = [m << 20 for m in range(8, 73, 2)]
yaml.safe_dump(cfg, open(sys.argv[1], "w"), sort_keys=False)
