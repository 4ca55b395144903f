"""The twin's `carveout` block: the L1 of a measured GPU per carveout and shared buffer
(`l1_size`'s series, the topology's `l1d.size_bytes.by_carveout`) read through the driver's
partition rule of `sim/carveout.py`.

The shared partitions the driver may choose are not a driver attribute: they are the CUDA
Programming Guide's per compute capability ("Shared Memory" of each compute capability
section), as is the 1 KB of shared memory the driver reserves per block from compute capability
8.0. The block is made only where the largest partition is the shared memory per SM the driver
reported and one constant (the median of every measured size plus the partition the rule gives
it) predicts each measured size within the sweep's resolution or the topology's agreement rule
(3%), whichever is wider; otherwise the twin's L1 keeps one size, and says why. (The rule is
exact on the hand-set H100 runs; on another H100 unit the 50% points read two lines above it.)
"""

from __future__ import annotations

from statistics import median
from typing import Any

from ..sim.carveout import CarveoutSpec
from ..topology.reconcile import AGREE_REL
from .reading import TopologyReader

KIB = 1024
# CUDA C++ Programming Guide, Compute Capabilities: "Shared Memory" of 8.x, 9.0 and 10.x/12.x
SHARED_STEPS_KIB = {
    "8.0": (0, 8, 16, 32, 64, 100, 132, 164),
    "8.7": (0, 8, 16, 32, 64, 100, 132, 164),
    "8.6": (0, 8, 16, 32, 64, 100),
    "8.9": (0, 8, 16, 32, 64, 100),
    "9.0": (0, 8, 16, 32, 64, 100, 132, 164, 196, 228),
    "10.0": (0, 8, 16, 32, 64, 100, 132, 164, 196, 228),
    "12.0": (0, 8, 16, 32, 64, 100),
}
BLOCK_RESERVED_BYTES = 1024  # the same Guide: 1 KB per thread block, compute capability >= 8.0
GUIDE = "CUDA C++ Programming Guide, Compute Capabilities, Shared Memory of compute capability"


def carveout_block(b: TopologyReader) -> tuple[dict[str, Any] | None, str]:
    """The block, or None with the reason the twin's L1 keeps one size."""
    entry = (b.elements.get("l1d") or {}).get("size_bytes") or {}
    points = [
        p
        for p in entry.get("by_carveout") or ()
        if p.get("value") is not None and p.get("carveout_pct") is not None
    ]
    if len({(p["carveout_pct"], p.get("shared_buffer_bytes")) for p in points}) < 2:
        return None, "the run measured the L1 at fewer than two carveouts"
    cc = str(b.driver.get("compute_capability") or b.topo.get("gpu", {}).get("compute_capability"))
    steps = SHARED_STEPS_KIB.get(cc)
    if steps is None:
        return None, f"no shared partitions known for compute capability {cc}"
    per_sm = b.driver.get("shared_memory_per_sm_bytes")
    if per_sm != steps[-1] * KIB:
        return None, (
            f"the driver's shared memory per SM ({per_sm} B) is not the largest partition of "
            f"compute capability {cc} ({steps[-1]} KiB)"
        )
    spec = CarveoutSpec(
        cache="l1d",
        shared_steps_bytes=tuple(s * KIB for s in steps),
        data_plus_shared_bytes=steps[-1] * KIB + 1,
        block_reserved_bytes=BLOCK_RESERVED_BYTES,
    )
    totals = [
        p["value"]
        + spec.shared_partition_bytes(p["carveout_pct"], int(p.get("shared_buffer_bytes") or 0))
        for p in points
    ]
    resolution = max(int(p.get("resolution_bytes") or 0) for p in points)
    total = int(median(totals))
    # each point's miss of the size the constant predicts for it, and what that point allows
    misses = [abs(t - total) for t in totals]
    allowed = [max(resolution, AGREE_REL * p["value"]) for p in points]
    if any(m > a for m, a in zip(misses, allowed, strict=True)):
        return None, (
            f"the measured sizes plus the partitions the rule gives them differ by "
            f"{max(totals) - min(totals)} B ({min(totals)} to {max(totals)}): the constant "
            f"{total} B misses a size by more than the sweep's {resolution} B and "
            f"{AGREE_REL:.0%} of it, so the driver's partitions do not explain them"
        )
    cite_points = ", ".join(
        f"{p['carveout_pct']}%/{p.get('shared_buffer_bytes')} B: {p['value']}" for p in points
    )
    return {
        "cache": "l1d",
        "shared_steps_bytes": list(spec.shared_steps_bytes),
        "data_plus_shared_bytes": total,
        "block_reserved_bytes": BLOCK_RESERVED_BYTES,
        "cite": {
            "shared_steps_bytes": b.assume(
                "carveout.shared_steps_bytes",
                f"the partitions of the {GUIDE} {cc} (no driver attribute gives them); the "
                f"largest is the driver's shared_memory_per_sm_bytes = {per_sm}",
            ),
            "block_reserved_bytes": b.assume(
                "carveout.block_reserved_bytes",
                f"1 KB reserved per thread block, as the {GUIDE} {cc} says",
            ),
            "data_plus_shared_bytes": (
                f"derived: measured l1d.size_bytes by carveout (l1_size, {len(points)} series: "
                f"{cite_points}) plus the shared partition of each; the median of "
                f"{sorted(set(totals))}, which predicts every size within {max(misses)} B"
            ),
        },
    }, ""
