"""The README tables of a hand_ranges folder, read from its analysis documents:
python tables.py results/reference/<gpu>/hand_ranges"""

import json
import sys
from pathlib import Path

an = Path(sys.argv[1]) / "analysis"


def l1_sizes(mode):
    rows = {}
    for f in sorted(an.glob(f"l1_{mode}_*.json")):
        for s in json.loads(f.read_text())["series"]:
            v = s["l1d"]["size_bytes"]
            key = (s["carveout_pct"], s["shared_buffer_bytes"])
            rows.setdefault(key, []).append((v["value"], v["resolution_bytes"]))
    return rows


auto, hand = l1_sizes("auto"), l1_sizes("hand")
print(
    "| carveout | shared buffer | automatic (3 runs) | hand-set (3 runs) "
    "| hand-set bracket | automatic inside |"
)
print("| --- | --- | --- | --- | --- | --- |")
for key in sorted(auto, key=lambda k: (-k[0], k[1])):
    a = [v for v, _ in auto[key]]
    h = [v for v, _ in hand[key]]
    step = hand[key][0][1]
    inside = all(min(h) <= x < max(h) + step for x in a)
    print(
        f"| {key[0]}% | {key[1]} | {', '.join(map(str, a))} | {', '.join(map(str, h))} "
        f"| [{min(h)}, {max(h) + step}) | {'yes' if inside else 'no'} |"
    )
print()
print(
    "| walk | L2 size (bytes) | bracket (MiB) | near partition bracket (MiB) "
    "| near / far / DRAM (cycles) |"
)
print("| --- | --- | --- | --- | --- |")
for name in ("l2_auto_1", "l2_hand_1", "l2_fine_1", "l2_fine_2"):
    e = json.loads((an / f"{name}.json").read_text())["elements"]["l2"]
    mib = lambda b: f"{b / 2**20:.4g}"  # noqa: E731
    size, near = e["size_bytes"], e["near_size_bytes"]
    lat = " / ".join(
        str(e[k]["value"])
        for k in ("hit_latency_cycles", "far_hit_latency_cycles", "miss_latency_cycles")
    )
    print(
        f"| {name} | {size['value']} | [{', '.join(map(mib, size['bracket_bytes']))}) "
        f"| [{', '.join(map(mib, near['bracket_bytes']))}) | {lat} |"
    )
