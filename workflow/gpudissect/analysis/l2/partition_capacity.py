"""What a partition holds, from the footprint sweep's accesses split by the partition function.

The `l2` footprint sweep reads three plateaus on a partitioned L2 (`analysis.l2.l2`): near hits
while the footprint fits one partition, a far level up to the L2 size, DRAM past it. Its far
and DRAM levels are medians over every access. Split by the partition function `l2_slices`
measured (the XOR of address bits that decides a line's home partition), each plateau's
accesses fall into the lines homed in the walking SM's partition and those homed in the other:

- where the near partition holds its home lines and the copies of the other's in one capacity
  (`home_lines_share_capacity` true), past the near size the lines homed near miss to DRAM at
  once (their far-plateau latency is their DRAM-plateau latency), while the lines homed far
  still hit there (below their own DRAM level) until their half of the footprint outgrows the
  far partition;
- where copies sit in front of the L2 (false), both halves read the same far level.

Where the home lines share the capacity, the footprint sweep's far plateau pools the far-homed
lines' hits with the near-homed lines' DRAM misses, and its DRAM plateau two miss levels: its
medians fall between populations. The L2's far hit latency, miss latency and miss penalty are
then each one population's, from this split (the topology ranks them first).

The split needs the walk's physical address bits below 2 MiB: the sweep's contiguous placement
walks one mapping of 2 MiB-aligned physical chunks (`experiments.l2`), where an element's offset
in the walk is its offset in the chunk. With the allocator's placement the split is
undetermined. Levels agree within 3 %, the topology's reconciliation rule.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..common.result import quantity, undetermined

AGREE_REL = 0.03  # levels this close are one level (the topology's reconciliation rule)
ELEMENT_BYTES = 8  # the contiguous placement's chase elements (experiments.l2)
MIN_ACCESSES = 64  # per partition and plateau
METHOD = (
    "the l2 footprint sweep's accesses split by the home partition of their line (the "
    "partition function of l2_slices over the walk's offsets in its 2 MiB-aligned physical "
    "chunks); per plateau of the l2 analysis (near: up to the near size, far: from it to the "
    "L2 size, DRAM: past it) the median latency of each half"
)
QUANTITIES = (
    "home_lines_share_capacity",
    "near_home_miss_latency_cycles",
    "far_home_hit_latency_cycles",
    "far_home_miss_latency_cycles",
)


def _bracket(entry: dict[str, Any] | None) -> tuple[int, int] | None:
    b = (entry or {}).get("bracket_bytes")
    return (int(b[0]), int(b[1])) if isinstance(b, list) and len(b) == 2 else None


def _all(why: str) -> dict[str, Any]:
    return {q: undetermined(why) for q in QUANTITIES}


def _levels(trace: pd.DataFrame, bits: list[int], near: tuple, size: tuple) -> dict | str:
    """Per home partition (0, 1: the parity of the masked offset) and plateau, the median
    latency and the accesses; or why there are too few."""
    mask = sum(1 << int(b) for b in bits)
    offsets = trace["index"].to_numpy(dtype=np.int64) * ELEMENT_BYTES
    bits_set = np.bitwise_and(offsets, mask)
    parity = np.zeros(len(offsets), dtype=np.int64)
    for b in bits:
        parity ^= (bits_set >> int(b)) & 1
    footprint = trace["array_bytes"].to_numpy(dtype=np.int64)
    latency = trace["latency_cycles"].to_numpy(dtype=float)
    plateaus = {
        "near": footprint <= near[0],
        "far": (footprint >= near[1]) & (footprint <= size[0]),
        "dram": footprint >= size[1],
    }
    out: dict = {}
    for home in (0, 1):
        for name, where in plateaus.items():
            x = latency[where & (parity == home)]
            if x.size < MIN_ACCESSES:
                return (
                    f"{x.size} accesses of partition {home} on the {name} plateau (need >= "
                    f"{MIN_ACCESSES})"
                )
            out[home, name] = (float(np.median(x)), int(x.size))
    out["share"] = float(np.mean(parity[plateaus["far"]]))
    return out


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= AGREE_REL * max(abs(a), abs(b))


def partition_capacity(
    trace: pd.DataFrame | None, l2_doc: dict[str, Any] | None, bits: Any
) -> dict[str, Any]:
    """The quantities of the module docstring, each undetermined with the reason where the
    sweep, its plateaus or the partition function do not decide them."""
    if trace is None or l2_doc is None:
        return _all("the l2 footprint sweep did not run")
    if not isinstance(bits, list) or not bits:
        return _all("no partition function (l2_slices) to split the footprint sweep by")
    l2 = (l2_doc.get("elements") or {}).get("l2") or {}
    near, size = _bracket(l2.get("near_size_bytes")), _bracket(l2.get("size_bytes"))
    if near is None or size is None:
        return _all("the footprint sweep read no near and far plateaus (analysis.l2.l2)")
    if set(trace.get("placement", pd.Series(dtype=str)).unique()) != {"contiguous"}:
        return _all(
            "the footprint sweep walked the allocator's memory: its physical address bits are "
            "not known (placement contiguous knows them)"
        )
    lv = _levels(trace, bits, near, size)
    if isinstance(lv, str):
        return _all(lv)
    text = "; ".join(
        f"home {h}: near {lv[h, 'near'][0]:.0f}, far {lv[h, 'far'][0]:.0f}, DRAM "
        f"{lv[h, 'dram'][0]:.0f} cycles ({lv[h, 'far'][1]} far-plateau accesses)"
        for h in (0, 1)
    )
    evidence = f"{text}; plateaus from near {near} and L2 {size} bytes (l2)"
    # the half that misses past the near size: its far plateau reads its DRAM level
    missing = [h for h in (0, 1) if _close(lv[h, "far"][0], lv[h, "dram"][0])]
    hitting = [
        h
        for h in (0, 1)
        if lv[h, "far"][0] < lv[h, "dram"][0] and not _close(lv[h, "far"][0], lv[h, "dram"][0])
    ]
    if len(missing) == 1 and len(hitting) == 1:
        own, other = missing[0], hitting[0]
        share = lv["share"] if own == 1 else 1 - lv["share"]
        reading = quantity(
            True,
            unit=None,
            confidence=1.0,
            method=METHOD,
            evidence=f"past the near size the lines homed in the walking SM's partition (home "
            f"{own}, {share:.0%} of the far plateau's accesses) read their DRAM level while the "
            f"others still hit: the near partition's capacity holds its home lines and the "
            f"copies alike; {evidence}",
        )
        near_miss = _level(
            lv, own, "far", "dram", evidence, "a line homed in the SM's partition, missed"
        )
        far_hit = _level(
            lv, other, "far", None, evidence, "a line homed in the other partition, a hit"
        )
        return {
            "home_lines_share_capacity": reading,
            "near_home_miss_latency_cycles": near_miss,
            "far_home_hit_latency_cycles": far_hit,
            "far_home_miss_latency_cycles": _level(
                lv, other, "dram", None, evidence, "a line homed in the other partition, missed"
            ),
            **_unpooled(lv, own, near_miss, far_hit),
        }
    if not missing and len(hitting) == 2 and _close(lv[0, "far"][0], lv[1, "far"][0]):
        out = _all(
            "past the near size both partitions' lines hit alike: no partition's home lines "
            f"miss there; {evidence}"
        )
        out["home_lines_share_capacity"] = quantity(
            False,
            unit=None,
            confidence=1.0,
            method=METHOD,
            evidence=f"past the near size both halves read one far level below DRAM: the "
            f"copies do not take the home lines' capacity; {evidence}",
        )
        return out
    return _all(f"the halves fit neither reading; {evidence}")


def _unpooled(lv, own: int, near_miss: dict, far_hit: dict) -> dict[str, Any]:
    """The L2's far hit, miss latency and miss penalty of one population each, where the
    partitions hold their home lines: the footprint sweep's far plateau pools the far-homed
    lines' hits with the near-homed lines' DRAM misses, and its DRAM plateau the near-homed
    lines' misses with the far-homed lines' (which add the far trip), so their medians fall
    wherever the halves' shares and spreads put them, between the populations."""
    pooled = (
        "; the l2 analysis's {} plateau pools this population with the other half's {} "
        "(a median between the two, which moves with their shares)"
    )
    hit = lv[own, "near"][0]
    miss = near_miss["value"]
    return {
        "far_hit_latency_cycles": {
            **far_hit,
            "evidence": far_hit["evidence"] + pooled.format("far", "DRAM misses"),
        },
        "miss_latency_cycles": {
            **near_miss,
            "evidence": near_miss["evidence"] + pooled.format("DRAM", "misses plus the far trip"),
        },
        "miss_penalty_cycles": quantity(
            round(miss - hit, 2),
            unit="cycles",
            confidence=1.0,
            method=METHOD + "; the miss level minus the hit level of the same lines",
            evidence=f"{miss} - {hit:.2f} cycles: the lines homed in the SM's partition (home "
            f"{own}), their DRAM level minus their near-plateau hit",
        ),
    }


def _level(lv, home, plateau, also, evidence, what) -> dict[str, Any]:
    """One half's latency on a plateau (with ``also``, its median over both plateaus' medians
    weighted by their accesses)."""
    value, n = lv[home, plateau]
    if also is not None:
        v2, n2 = lv[home, also]
        value, n = (value * n + v2 * n2) / (n + n2), n + n2
    return quantity(
        round(value, 2),
        unit="cycles",
        confidence=1.0,
        method=METHOD,
        evidence=f"{what}: home {home}, {plateau}{'' if also is None else ' and ' + also} "
        f"plateau ({n} accesses); {evidence}",
    )


def footprint_by_partition(inputs: dict | None, function: dict[str, Any] | None) -> dict:
    """`partition_capacity` from the analysis inputs (l2_trace, l2: the footprint sweep's
    trace and result, absent where it did not run) and the partition function's quantity."""
    from ...traces import read_trace

    inputs = inputs or {}
    if not inputs.get("l2_trace") or not inputs.get("l2"):
        return partition_capacity(None, None, None)
    trace = read_trace(inputs["l2_trace"]).data
    doc = json.loads(Path(inputs["l2"]).read_text())
    return partition_capacity(trace, doc, (function or {}).get("value"))
