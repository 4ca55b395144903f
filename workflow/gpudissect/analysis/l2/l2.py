"""L2 footprint sweep: where latency steps up, and the levels the L2 serves hits from.

- Steps: change points (Opt + KS test, `changepoint.find_steps`) of the median per-access latency
  against footprint; each is reported with the footprints it lies between.
- Plateaus: the footprints between two steps. Where the sweep shows a near level, one far level
  and a last (DRAM) level, separated by the margins `PartitionLevels` documents, the three are
  read as Hopper's partitioned L2: data one SM uses is kept (replicated) in the near partition
  while it fits there, then served by the far partition until the whole L2 is full, then by
  DRAM. The first step then brackets the near partition's share, the last the L2 size.
- Near and far by address: otherwise, the accesses of the footprints that fit all hit in L2. If
  their latencies fall into two well separated groups (`l2_near_far`: Otsu's split of the 1-D
  distribution, then a separation of at least `min_separation` robust (MAD) standard deviations
  and at least `min_share` of the accesses on each side), the GPU serves L2 hits from two
  distances; otherwise one L2 hit latency is reported.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..common.misses import FirstMiss, FirstMissDetector
from ..common.result import header, no_path_reason, not_applicable, quantity, undetermined
from ..common.sweep_steps import Step, find_steps
from .l2_levels import Levels, PartitionLevels, mib
from .l2_near_far import near_far, one_hit_level

PARTITION_METHOD = (
    "plateaus of median latency against footprint between change points (Opt + KS test), read "
    "as Hopper's partitioned L2 (near partition, far partition, DRAM; the partition reading is "
    "this project's, TPDS Sec. 4.6 is the paper's L2 section)"
)
# the near plateau's median where its hits fall into two address groups
NEAR_MEDIAN = (
    "; the near level is the median over both address groups of the near hits "
    "(near_hit_fast_latency_cycles, near_hit_slow_latency_cycles): it moves with the share of "
    "lines in the slow group"
)
ASSUMES = (
    "assumes the last plateau is DRAM (the sweep reaches past the L2) and one L2 level between "
    "the near hits and it"
)


def _bracket(step: Step, which: str, what: str, method: str, extra: str = "") -> dict[str, Any]:
    lo, hi = int(step.x_before), int(step.x_after)
    return quantity(
        lo,
        unit="bytes",
        confidence=step.confidence,
        method=method,
        evidence=(
            f"{which} step: median latency {step.level_before:.0f} -> {step.level_after:.0f} "
            "cycles between "
            f"{mib(lo)} and {mib(hi)}; {what} is in [{lo}, {hi}) bytes at this sweep's "
            f"resolution" + extra
        ),
    ) | {"bracket_bytes": [lo, hi]}


def partition_quantities(
    lv: Levels, reader: PartitionLevels, stride_bytes: int, first_miss: FirstMiss | None
) -> dict[str, Any]:
    """hit, far and miss latencies, near and L2 sizes from a near/far/DRAM reading."""
    near_c, last_c = lv.near_step.confidence, lv.last_step.confidence
    margins = (
        f"far p{reader.far_quantile * 100:.0f} {lv.far.q(reader.far_quantile):.0f} > near "
        f"p{reader.near_quantile * 100:.0f} {lv.near.q(reader.near_quantile):.0f} cycles "
        f"(nearly every access slower than a near hit); pooled far median {lv.far.q(0.5):.0f} < "
        f"DRAM p25 {lv.dram.q(0.25):.0f} and pooled DRAM median {lv.dram.q(0.5):.0f} > far p75 "
        f"{lv.far.q(0.75):.0f} cycles"
    )
    tlb = (
        f"a TLB miss touches one access in page/{stride_bytes} per pass, so it could make such "
        f"a plateau only with pages of at most {2 * stride_bytes} B"
    )
    transitions = "".join(f"; transition {t.describe()}" for t in lv.transitions)
    ratio = lv.last_step.x_before / max(lv.near_step.x_before, 1)
    early = ""
    if first_miss is not None and first_miss.index < lv.near_step.index:
        early = (
            f"; accesses slower than near hits become significant from "
            f"{mib(first_miss.x_after)} ({first_miss.miss_counts[first_miss.index]}/"
            f"{first_miss.accesses[first_miss.index]} there)"
        )
    halves = near_far(lv.near.samples)
    split = halves.get("far_share")
    near_split = (
        f"; the near hits themselves split into two groups by address ({split['evidence']}): "
        "one near level, the median of both"
        if split
        else ""
    )
    groups = {}
    if split:
        # the two groups themselves: a twin reproduces the near hits' spread from them
        groups = _group_latencies(
            halves["hit_latency_cycles"]["value"], halves["far_hit_latency_cycles"]["value"], split
        ) | {
            "near_hit_groups": quantity(
                [halves["hit_latency_cycles"]["value"], halves["far_hit_latency_cycles"]["value"]],
                unit="cycles",
                confidence=split["confidence"],
                method=split["method"],
                evidence=f"the near hits, fast group and slow group: {split['evidence']}",
            ),
            "near_hit_spread_cycles": _group_spread(
                lv.near.samples,
                halves["hit_latency_cycles"]["value"],
                halves["far_hit_latency_cycles"]["value"],
                split,
            ),
            "near_hit_slow_share": quantity(
                split["value"],
                unit=None,
                confidence=split["confidence"],
                method=split["method"],
                evidence=f"share of the near hits in the slow group: {split['evidence']}",
            ),
        }
    return groups | {
        "hit_latency_cycles": quantity(
            lv.near.level_cycles,
            unit="cycles",
            confidence=near_c,
            method=PARTITION_METHOD + (NEAR_MEDIAN if split else ""),
            evidence=f"first plateau (near partition) {lv.near.describe()}" + near_split,
        ),
        "far_hit_latency_cycles": quantity(
            lv.far.level_cycles,
            unit="cycles",
            confidence=min(near_c, last_c),
            method=PARTITION_METHOD,
            evidence=(
                f"plateau before the last (far partition) {lv.far.describe()}; near "
                f"{lv.near.describe()}; DRAM {lv.dram.describe()}"
                f"; {margins}{transitions}; {ASSUMES}; {tlb}"
            ),
        ),
        "miss_latency_cycles": quantity(
            lv.dram.level_cycles,
            unit="cycles",
            confidence=last_c,
            method=PARTITION_METHOD,
            evidence=f"last plateau (DRAM) {lv.dram.describe()}; {ASSUMES}",
        ),
        "near_size_bytes": _bracket(
            lv.near_step,
            "first (near to far partition)",
            "the footprint where the near partition stops holding the data",
            PARTITION_METHOD,
            early,
        ),
        "size_bytes": _bracket(
            lv.last_step,
            "last (far partition to DRAM)",
            "the L2 size",
            PARTITION_METHOD,
            f"; {ratio:.2g} times the near size (two equal partitions that replicate "
            "what fits in one predict 2)",
        ),
    }


def _group_latencies(fast: float, slow: float, split: dict[str, Any]) -> dict[str, Any]:
    """Each address group's latency of the near hits, with its share of them (`share`)."""
    out = {}
    for name, value, share, which in (
        ("near_hit_fast_latency_cycles", fast, 1.0 - split["value"], "fast"),
        ("near_hit_slow_latency_cycles", slow, split["value"], "slow"),
    ):
        out[name] = quantity(
            value,
            unit="cycles",
            confidence=split["confidence"],
            method="median latency of the near hits in the " + which + " group: " + split["method"],
            evidence=f"{share:.1%} of the near hits in this group: {split['evidence']}",
        ) | {"share": round(share, 4)}
    return out


def _group_spread(samples, fast: float, slow: float, split: dict[str, Any]) -> dict[str, Any]:
    """The near hits' spread within their two groups: the robust standard deviation (1.4826 x
    MAD) of each group, split midway between their medians, pooled (root mean square)."""
    samples = np.asarray(samples, dtype=float)
    cut = (fast + slow) / 2
    sds = [
        1.4826 * float(np.median(np.abs(g - np.median(g))))
        for g in (samples[samples <= cut], samples[samples > cut])
        if g.size
    ]
    spread = float(np.sqrt(np.mean(np.square(sds)))) if sds else 0.0
    return quantity(
        round(spread, 2),
        unit="cycles",
        confidence=split["confidence"],
        method="robust standard deviation (1.4826 x MAD) of each group of the near hits, split "
        "midway between their medians, pooled as a root mean square",
        evidence=f"groups {fast:.0f} / {slow:.0f} cycles, cut {cut:.1f}: SDs "
        + ", ".join(f"{x:.2f}" for x in sds),
    )


# the DRAM-latency share of the DRAM plateau must exceed the far plateau's by this much for the
# share rule to place the L2 size
MIN_SHARE_RISE = 0.2


def dram_share_size(
    sizes: np.ndarray, groups: list[np.ndarray], lv: Levels
) -> dict[str, Any] | None:
    """The L2 size from the share of accesses at DRAM latency (above the midpoint of the far
    and DRAM plateaus): the first footprint from the far plateau on whose share is at least
    halfway from the far plateau's share to the DRAM plateau's, every later one too; the size
    lies between it and the footprint before. The median steps only where more than half the
    accesses of a footprint read DRAM latency, and past an H100's L2 only 57 % do (on walks of
    up to four times the L2, the rest read about 520 cycles): the median step then lands
    footprints past the size. None where the shares do not rise by MIN_SHARE_RISE."""
    cut = (lv.far.level_cycles + lv.dram.level_cycles) / 2
    share = np.array([float(np.mean(g > cut)) for g in groups])
    low = float(np.median(share[lv.far.start : lv.far.stop]))
    high = float(np.median(share[lv.dram.start : lv.dram.stop]))
    if high - low < MIN_SHARE_RISE:
        return None
    mid = (low + high) / 2
    above = share >= mid
    first = next((i for i in range(max(lv.far.start, 1), len(sizes)) if above[i:].all()), None)
    if first is None:
        return None
    lo, hi = int(sizes[first - 1]), int(sizes[first])
    around = ", ".join(
        f"{mib(int(sizes[i]))} {share[i]:.2f}"
        for i in range(max(first - 2, 0), min(first + 2, len(sizes)))
    )
    return quantity(
        lo,
        unit="bytes",
        confidence=float(min(1.0, (share[first] - share[first - 1]) / (high - low))),
        method="share of accesses above the midpoint of the far and DRAM plateaus' latencies, "
        "against footprint: the L2 size lies below the first footprint whose share is halfway "
        "from the far plateau's to the DRAM plateau's (and every later one's)",
        evidence=(
            f"cut {cut:.0f} cycles; share {low:.2f} on the far plateau, {high:.2f} on the DRAM "
            f"plateau, halfway {mid:.2f}; {around}; the L2 size is in [{lo}, {hi}) bytes at "
            "this sweep's resolution"
        ),
    ) | {"bracket_bytes": [lo, hi]}


def first_miss_size(det: FirstMissDetector, sizes: np.ndarray) -> dict[str, Any]:
    """The L2 size as the first footprint whose accesses miss (one L2 level)."""
    hit = det.result
    if not det.reference_ok:
        return undetermined("the smallest footprints already miss")
    if hit is None:
        return undetermined(
            f"no footprint up to {sizes[-1]} bytes misses more often than outliers explain"
        )
    return quantity(
        int(hit.x_before),
        unit="bytes",
        confidence=hit.confidence,
        method="first footprint whose accesses miss (binomial test against the outlier "
        "rate of the smallest footprints)",
        evidence=(
            f"{hit.miss_counts[hit.index]}/{hit.accesses[hit.index]} accesses slower "
            f"than {hit.threshold_cycles:.0f} cycles at {int(hit.x_after)} bytes; "
            f"the size is in [{int(hit.x_before)}, {int(hit.x_after)}) at this "
            "sweep's resolution"
        ),
    ) | {"bracket_bytes": [int(hit.x_before), int(hit.x_after)]}


def one_level_quantities(
    groups: list[np.ndarray],
    sizes: np.ndarray,
    steps: list[Step],
    det: FirstMissDetector,
    reader: PartitionLevels,
) -> dict[str, Any]:
    """No far level by footprint: L2 hits from the footprints that fit (split by Otsu where
    they come at two distances), the L2 size from the first footprint that misses."""
    # Pool only footprints before both the first step and the first significant misses: a
    # footprint past a randomly replaced L2 misses on part of its accesses before the median
    # moves, and those misses would make a second group.
    # Where the smallest footprints already hit at two levels (an L2 that keeps no near copy of
    # a far line serves every footprint from both partitions, by address), a step of the median
    # before the first miss is the median moving between those levels as the far share
    # wavers about one half: the footprints that fit end at the first miss.
    by_address = det.reference_ok and len(det.hit_levels_) > 1
    fits = steps[0].index if steps and not by_address else len(sizes)
    if det.reference_ok and det.result is not None:
        fits = det.result.index if by_address else min(fits, det.result.index)
    if fits == 0:
        l2 = {
            "hit_latency_cycles": undetermined(
                "latency already steps up after the smallest footprint; sweep smaller footprints"
            ),
            "far_hit_latency_cycles": undetermined(f"no far level by footprint: {reader.reason}"),
        }
    else:
        pool = np.concatenate(groups[:fits])
        l2 = near_far(pool)
        far = l2["far_hit_latency_cycles"]
        if far.get("value") is None:
            l2["far_hit_latency_cycles"] = undetermined(
                f"no far level by footprint: {reader.reason}; no two distances by address: "
                + far["undetermined"]
            )
        elif len(reader.plateaus_) >= 3 and not by_address:
            # A slower level past the hits shows in the sweep but fails the margins (blended
            # with near hits, as at a stride that leaves near-hit sectors in every line): a
            # split among the hits before it is then not the far partition (the H100's near
            # hits themselves come at ~280 and ~315 cycles, by address).
            split = l2["far_share"]["evidence"]
            l2 = {
                "hit_latency_cycles": one_hit_level(pool, f"two groups by address: {split}"),
                "far_hit_latency_cycles": undetermined(
                    f"no far level by footprint: {reader.reason}; the hits of the footprints "
                    f"that fit split into two groups ({split}), but the sweep shows a slower "
                    "level past them, so that split is not read as the far partition"
                ),
            }
    l2["size_bytes"] = first_miss_size(det, sizes)
    l2["near_size_bytes"] = undetermined(f"no far level by footprint: {reader.reason}")
    hits = np.concatenate(groups[:fits]) if fits else reader.plateaus_[0].samples
    l2["miss_latency_cycles"] = miss_latency(groups, sizes, steps, reader, hits)
    return l2


def miss_latency(
    groups: list[np.ndarray],
    sizes: np.ndarray,
    steps: list[Step],
    reader: PartitionLevels,
    hits: np.ndarray,
) -> dict[str, Any]:
    """The median latency of the footprints past the last step that miss on nearly every
    access (their p10 above the hits' p90, the margin of `PartitionLevels`): a footprint past a
    randomly replaced L2, or one whose lines keep sectors that still hit, is a blend."""
    if not steps:
        return undetermined(f"no latency step between {sizes[0]} and {sizes[-1]} bytes")
    top = float(np.quantile(hits, reader.near_quantile))
    pq, qq = f"p{reader.far_quantile * 100:.0f}", f"p{reader.near_quantile * 100:.0f}"
    past = range(steps[-1].index, len(sizes))
    low = {i: float(np.quantile(groups[i], reader.far_quantile)) for i in past}
    missing = [i for i in past if low[i] > top]
    if not missing:
        return undetermined(
            f"no footprint past the last step ({mib(sizes[past[0]])}) misses on nearly every "
            f"access: their {pq} ({', '.join(f'{v:.0f}' for v in low.values())} cycles) are "
            f"not above the hits' {qq} of {top:.0f} cycles"
        )
    medians = [float(np.median(groups[i])) for i in missing]
    return quantity(
        float(np.median(medians)),
        unit="cycles",
        confidence=steps[-1].confidence,
        method="median of the per-footprint median latencies past the last step (change "
        "points, Opt + KS test) of the footprints that miss on nearly every access",
        evidence=(
            f"{len(missing)} of {len(past)} footprints from {mib(sizes[past[0]])} have their "
            f"{pq} above the hits' {qq} of {top:.0f} cycles; their medians "
            f"{min(medians):.0f}-{max(medians):.0f} cycles; assumes the largest footprints "
            "miss the L2"
        ),
    )


def _rising_steps(sizes, groups) -> list[Step]:
    return [
        s for s in find_steps(sizes, groups, summary="median", min_relative_step=0.05) if s.rise > 0
    ]


def step_brackets(sizes, groups) -> list[tuple[int, int]]:
    """The decision the adaptive footprint sweep asks for (`sizesearch.refine_steps`): the
    footprints each latency step lies between, by the rule the analysis applies below."""
    if len(sizes) < 3:
        return []
    return [(int(s.x_before), int(s.x_after)) for s in _rising_steps(np.asarray(sizes), groups)]


def analyse(
    data: pd.DataFrame, *, provenance: dict[str, Any], inputs: dict | None = None
) -> dict[str, Any]:
    if data.empty:
        return header("l2", provenance) | {
            "elements": {"l2": {"size_bytes": not_applicable(no_path_reason(provenance))}},
            "steps": [],
            "plateaus": [],
            "median_latency_by_footprint": {},
        }
    by = data.groupby("array_bytes")["latency_cycles"]
    sizes = np.array(sorted(by.groups), dtype=np.int64)
    groups = [by.get_group(n).to_numpy(dtype=float) for n in sizes]
    steps = _rising_steps(sizes, groups)
    step_list = [
        {
            "footprint_before_bytes": int(s.x_before),
            "footprint_after_bytes": int(s.x_after),
            "median_before_cycles": float(s.level_before),
            "median_after_cycles": float(s.level_after),
            "confidence": s.confidence,
        }
        for s in steps
    ]
    det = FirstMissDetector().fit(sizes, groups)
    reader = PartitionLevels().fit(sizes, groups, steps)
    lv = reader.levels
    if lv is not None:
        stride = int(data["stride_bytes"].iloc[0])
        l2 = partition_quantities(lv, reader, stride, det.result if det.reference_ok else None)
        l2["size_bytes"] = dram_share_size(sizes, groups, lv) or l2["size_bytes"]
        roles = lv.roles()
    else:
        l2 = one_level_quantities(groups, sizes, steps, det, reader)
        plats = reader.plateaus_
        roles = [
            (p, "hits" if i == 0 else "dram" if i == len(plats) - 1 else "level")
            for i, p in enumerate(plats)
        ]
    l2["latency_steps_bytes"] = (
        quantity(
            [int(s.x_before) for s in steps],
            unit="bytes",
            confidence=min(s.confidence for s in steps),
            method="change points of median latency against footprint (Opt + KS test)",
            evidence="; ".join(
                f"{int(s.x_before)} -> {int(s.x_after)} B: "
                f"{s.level_before:.0f} -> {s.level_after:.0f} cycles"
                for s in steps
            ),
        )
        if steps
        else undetermined(f"no latency step between {sizes[0]} and {sizes[-1]} bytes")
    )
    near, size = (l2.get(k, {}).get("value") for k in ("near_size_bytes", "size_bytes"))
    if lv is not None and near is not None and size is not None and steps:
        # read as a partitioned L2, the levels change where the near partition stops holding
        # the data and where the L2 does: a change point of the median inside the far level
        # (its share of far hits grows footprint by footprint) or inside the ramp into DRAM is
        # no boundary of a level, and fell at different footprints run by run
        l2["latency_steps_bytes"] = quantity(
            [int(near), int(size)],
            unit="bytes",
            confidence=min(l2["near_size_bytes"]["confidence"], l2["size_bytes"]["confidence"]),
            method="the boundaries of the latency levels read as Hopper's partitioned L2: the "
            "near partition's bound (near_size_bytes) and the L2 size (size_bytes); every change "
            "point of the median is in `steps`",
            evidence="change points of the median: " + l2["latency_steps_bytes"]["evidence"],
        )
    return {
        "device": provenance["device"],
        "analysis": "l2",
        "path": str(data["path"].iloc[0]),
        # the memory walked (experiments.l2): one contiguous physical allocation, or the
        # allocator's pages (traces from before the column: None)
        "placement": sorted(set(data["placement"])) if "placement" in data else None,
        "trace": {k: provenance.get(k) for k in ("git_commit", "config_hash", "created_utc")},
        "device_info": provenance.get("device_info", {}),
        "elements": {"l2": l2},
        "steps": step_list,
        "plateaus": [p.as_dict(role) for p, role in roles],
        "median_latency_by_footprint": {
            str(int(n)): float(np.median(g)) for n, g in zip(sizes, groups, strict=True)
        },
    }
