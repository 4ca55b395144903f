"""Streaming read and write bandwidth per memory level (`bandwidth` traces).

A launch's throughput is the bytes it read (or wrote) over its elapsed time. Per level and
direction, a point (one CTA count) is summarised by the median over its repetitions and their
interquartile range; the level's reading is the point with the highest median ("peak
sustained"), with the spread of that point's repetitions and the CTAs per SM where it peaks.

The L2 is read twice: `l2` (a footprint above the near partition: both partitions) and
`l2_near` (a footprint every SM's own partition holds, where the run knew the near size): the
latter's readings are `l2.near_read_bandwidth_*` and `l2.near_write_bandwidth_*`.

A level's footprint is isolated when its reads (writes) are faster than those of the next
level's footprint beyond both points' spread (the L1's against the L2's, either L2's against
DRAM's): the lower quartile of the level's peak above the
upper quartile of the next level's peak, by more than `DISTINCT_REL`. Otherwise the reading
is undetermined (the footprint was served by the next level as well, or the level is no faster
than it). DRAM has no level below it: its reading is checked against the theoretical bandwidth
recorded in the trace (memory clock x bus width x DDR factor); above it by more than
`DISTINCT_REL`, the footprint did not stream from DRAM. No L1 or L2 ceiling is known from the
driver: their entries say so.

GB/s are 10^9 bytes per second, GiB/s 2^30 (MT4G reports GiB/s). Sees only the trace.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..common.result import header, not_applicable, quantity, undetermined

GIB = 2**30
DISTINCT_REL = 0.05  # levels closer than this (beyond the spread) are not told apart
ELEMENTS = {"l1": "l1d", "l2_near": "l2", "l2": "l2", "dram": "dram"}
PREFIX = {"l2_near": "near_"}  # l2.near_read_bandwidth_gbps ...
NEXT = {"l1": "l2", "l2_near": "dram", "l2": "dram"}
CAPACITY = "l1_capacity"
# a capacity footprint is held while its reads stay within this of the L1's rate: a stream of
# one warp per SM waits the L2's latency (6-7 times the L1's on Hopper) on every miss, so 2%
# lets through a miss share of about 0.3%, a line or two of an L1 of a few thousand lines
INSIDE_REL = 0.1  # footprints up to 90 % of stage 1's L1 give the L1's own rate
CAPACITY_REL = 0.02
NEAR_FAR = (
    "no footprint within the near L2 partition was run: the sweep knew no near partition size "
    "(neither the l2 footprint sweep's near_size_bytes nor a cache_stage1 L2 reading below 3/4 "
    "of the L2), so near and far reads are not told apart"
)


def point_table(data: pd.DataFrame) -> pd.DataFrame:
    """One row per point: level, direction, CTAs per SM, footprint and the median, quartiles
    and extremes of its repetitions' GB/s (the table the figure draws)."""
    d = data.assign(gbps=data["bytes_moved"] / data["elapsed_ns"])
    keys = ["point", "level", "direction", "ctas_per_sm", "ctas", "footprint_bytes"]
    keys += ["footprint_bytes_per_sm"]
    out = d.groupby(keys, as_index=False).agg(
        gbps=("gbps", "median"),
        gbps_q25=("gbps", lambda s: float(np.percentile(s, 25))),
        gbps_q75=("gbps", lambda s: float(np.percentile(s, 75))),
        gbps_min=("gbps", "min"),
        gbps_max=("gbps", "max"),
        repetitions=("gbps", "size"),
        sm_clock_mhz=("sm_clock_mhz", "median"),
    )
    out["gibps"] = out["gbps"] * 1e9 / GIB
    return out.sort_values(["level", "direction", "ctas_per_sm"]).reset_index(drop=True)


def figure_table(data: pd.DataFrame, doc: dict[str, Any]) -> pd.DataFrame:
    return point_table(data) if not data.empty else pd.DataFrame()


def _peak(points: pd.DataFrame) -> pd.Series:
    return points.loc[points["gbps"].idxmax()]


def _confidence(p: pd.Series) -> float:
    """1 / (1 + relative IQR of the peak's repetitions)."""
    return 1.0 / (1.0 + (p["gbps_q75"] - p["gbps_q25"]) / p["gbps"]) if p["gbps"] > 0 else 0.0


def _evidence(level: str, p: pd.Series, n_points: int) -> str:
    where = (
        f"{int(p['footprint_bytes_per_sm'])} B per SM"
        if level == "l1"
        else f"{int(p['footprint_bytes'])} B over the grid"
    )
    return (
        f"peak at {int(p['ctas_per_sm'])} CTAs per SM ({int(p['ctas'])} CTAs), footprint "
        f"{where}; {int(p['repetitions'])} repetitions, median {p['gbps']:.1f} GB/s, IQR "
        f"{p['gbps_q25']:.1f}-{p['gbps_q75']:.1f}, range {p['gbps_min']:.1f}-{p['gbps_max']:.1f}"
        f"; {n_points} CTA counts"
    )


def _isolation(level: str, p: pd.Series, peaks: dict[tuple[str, str], pd.Series], direction: str):
    """None when the level's footprint is isolated, else the reason it is not."""
    below = NEXT.get(level)
    if below is None:
        return None
    q = peaks.get((below, direction))
    if q is None:
        return None  # nothing below measured: nothing to tell it from
    if p["gbps_q25"] > q["gbps_q75"] * (1 + DISTINCT_REL):
        return None
    return (
        f"{direction}s at the {level} footprint ({p['gbps']:.1f} GB/s, IQR {p['gbps_q25']:.1f}-"
        f"{p['gbps_q75']:.1f}) do not exceed those at the {below} footprint ({q['gbps']:.1f} "
        f"GB/s, IQR {q['gbps_q25']:.1f}-{q['gbps_q75']:.1f}) by more than "
        f"{DISTINCT_REL:.0%} beyond the spread: the footprint was not isolated in the {level}"
    )


def _ceiling(level: str, p: pd.Series, theoretical_gbps: float) -> tuple[dict, str | None]:
    """The ceiling entry of a reading, and a reason to refuse it (DRAM above its ceiling)."""
    if level != "dram":
        name = "L1" if level == "l1" else "L2"
        return {"ceiling": f"none known: the driver reports no {name} bandwidth"}, None
    if theoretical_gbps <= 0:
        return {"ceiling": "none known: the device reports no memory clock or bus width"}, None
    extra = {
        "ceiling_gbps": round(theoretical_gbps, 3),
        "ceiling": "theoretical: memory clock x bus width x DDR factor (device facts)",
        "fraction_of_ceiling": round(float(p["gbps"]) / theoretical_gbps, 4),
    }
    if p["gbps"] > theoretical_gbps * (1 + DISTINCT_REL):
        return extra, (
            f"{p['gbps']:.1f} GB/s exceeds the theoretical DRAM bandwidth "
            f"{theoretical_gbps:.1f} GB/s: the footprint did not stream from DRAM"
        )
    return extra, None


def _readings(points: pd.DataFrame, theoretical_gbps: float) -> dict[str, dict[str, Any]]:
    points = points[points["level"] != CAPACITY]
    peaks = {k: _peak(df) for k, df in points.groupby(["level", "direction"])}
    elements: dict[str, dict[str, Any]] = {}
    for (level, direction), p in sorted(peaks.items()):
        n = int(((points["level"] == level) & (points["direction"] == direction)).sum())
        extra, refused = _ceiling(level, p, theoretical_gbps)
        reason = _isolation(level, p, peaks, direction) or refused
        el = elements.setdefault(ELEMENTS[level], {})
        name = f"{PREFIX.get(level, '')}{direction}_bandwidth"
        if reason is not None:
            for unit in ("gbps", "gibps"):
                el[f"{name}_{unit}"] = undetermined(reason)
            continue
        method = (
            f"streaming {direction}s of 16-byte vectors (kernels/bandwidth.cu), bytes / elapsed "
            "(CUDA events) per launch; the highest median over the CTA counts"
        )
        evidence = _evidence(level, p, n)
        common = {
            "ctas_per_sm_at_peak": int(p["ctas_per_sm"]),
            "spread_gbps": [round(float(p["gbps_q25"]), 3), round(float(p["gbps_q75"]), 3)],
            "repetitions": int(p["repetitions"]),
            **extra,
        }
        for unit, scale, label in (("gbps", 1.0, "GB/s"), ("gibps", 1e9 / GIB, "GiB/s")):
            q = quantity(
                round(float(p["gbps"]) * scale, 3),
                unit=label,
                confidence=_confidence(p),
                method=method,
                evidence=evidence,
            )
            el[f"{name}_{unit}"] = {**q, **common}
    return elements


def l1_capacity(points: pd.DataFrame, *, l1_bytes: int, carveout_pct: int) -> dict[str, Any]:
    """`l1d.size_bytes` from the capacity series: the largest per-SM footprint whose reads
    stay at the L1's bandwidth - within `CAPACITY_REL` below the lowest quartile of the
    footprints well inside `l1_bytes` (cache_stage1's L1, which a kernel without shared memory
    holds at least; well inside: up to `1 - INSIDE_REL` of it) - with every smaller one; the
    next footprint falls below. A rate that falls by `l1_bytes` does not give the L1: the
    streams miss before the capacity the P-chase holds (conflicts of an index that spreads the
    footprint unevenly), so the reading is undetermined with `l1_bytes` as its lower bound."""
    cap = points[points["level"] == CAPACITY].sort_values("footprint_bytes_per_sm")
    inside = cap[cap["footprint_bytes_per_sm"] <= (1 - INSIDE_REL) * l1_bytes]
    if inside.empty:
        return undetermined(
            f"no footprint of the series lies well inside the measured L1 ({l1_bytes} B; up to "
            f"{1 - INSIDE_REL:.0%} of it) to give the L1's own bandwidth"
        )
    floor = float(inside["gbps_q25"].min()) * (1 - CAPACITY_REL)
    held = cap["gbps"].to_numpy() >= floor
    first_out = int(np.argmin(held)) if not held.all() else None
    sizes = cap["footprint_bytes_per_sm"].astype(int).to_numpy()
    if first_out is None:
        return {
            **undetermined(
                f"the L1 streamed every footprint of the series at its bandwidth, up to "
                f"{sizes[-1]} B per SM: the L1 is at least that"
            ),
            "lower_bound": int(sizes[-1]),
        }
    if first_out == 0:
        return undetermined("the series' smallest footprint is already below the L1's bandwidth")
    size, above = int(sizes[first_out - 1]), int(sizes[first_out])
    median = float(inside["gbps"].median())
    rates = (
        f"L1 bandwidth {median:.0f} GB/s (floor {floor:.0f}) over {len(inside)} footprints up "
        f"to {1 - INSIDE_REL:.0%} of {l1_bytes} B; {size} B per SM at "
        f"{cap['gbps'].iloc[first_out - 1]:.0f} GB/s, {above} B at "
        f"{cap['gbps'].iloc[first_out]:.0f} GB/s"
    )
    if above <= l1_bytes:
        return {
            **undetermined(
                f"the streaming rate falls from {above} B per SM, below the {l1_bytes} B "
                "cache_stage1's P-chase holds beside its shared buffer: the streams miss before "
                f"the L1 is full, so this series does not give its size ({rates})"
            ),
            "lower_bound": int(l1_bytes),
        }
    carveout = "none set" if carveout_pct < 0 else f"carveout {carveout_pct}%"
    q = quantity(
        size,
        unit="bytes",
        confidence=1.0 / (1.0 + (float(inside["gbps_q75"].max()) - floor) / median),
        method=(
            "the largest per-SM footprint streamed through the L1 (16-byte ld.global.ca, every "
            f"CTA of an SM on its slice, no shared memory, {carveout}) at the L1's bandwidth: "
            f"within {CAPACITY_REL:.0%} below the lowest quartile of the footprints well inside "
            "cache_stage1's L1 size, as every smaller footprint (a footprint that misses on a "
            "line or two still reads so: the L1 holds the value to within a few lines)"
        ),
        evidence=rates,
    )
    return {**q, "resolution_bytes": above - size, "bracket_bytes": [size, above]}


def analyse(
    data: pd.DataFrame, *, provenance: dict[str, Any], inputs: dict | None = None
) -> dict[str, Any]:
    doc = header("bandwidth", provenance)
    if data.empty:
        reason = "the sweep ran no launch (the device has no throughput description)"
        doc["elements"] = {
            e: {f"read_bandwidth_{u}": undetermined(reason) for u in ("gbps", "gibps")}
            for e in ELEMENTS.values()
        }
        return doc
    points = point_table(data)
    theoretical = float(data["theoretical_gbps"].median())
    elements = _readings(points, theoretical)
    measured = set(points["level"])
    for level, element in ELEMENTS.items():
        if level in measured or level == "l2_near":  # l2_near: below, NEAR_FAR
            continue
        why = (
            "no L1 footprint was run: the sweep had no L1 size measured (cache_stage1) to size it"
            if level == "l1"
            else f"no {level} footprint was run (not in the sweep's levels)"
        )
        elements.setdefault(element, {})["read_bandwidth_gibps"] = undetermined(why)
    if "l2" in measured and "l2_near" not in measured:
        for direction in ("read", "write"):
            elements["l2"][f"near_{direction}_bandwidth_gibps"] = undetermined(NEAR_FAR)
    if "l1" in measured:
        elements["l1d"]["write_bandwidth_gibps"] = not_applicable(
            "not measured: stores write through the L1 to the L2, so a write stream is the L2's"
        )
    if CAPACITY in measured:
        elements["l1d"]["size_bytes"] = l1_capacity(
            points,
            l1_bytes=int(data["l1_bytes"].max()),
            carveout_pct=int(data["carveout_pct"].iloc[0]),
        )
    doc["elements"] = elements
    doc["shared_buffer_bytes"] = 0  # the kernels use no shared memory
    doc["footprints"] = {
        "l1_bytes": int(data["l1_bytes"].max()),
        "l2_bytes": int(data["l2_bytes"].max()),
        "l2_bytes_source": str(data["l2_bytes_source"].iloc[0]),
        "l2_near_bytes": int(data["l2_near_bytes"].max()),
        "carveout_pct": int(data["carveout_pct"].iloc[0]),
    }
    doc["carveout_pct"] = int(data["carveout_pct"].iloc[0])
    doc["dram_theoretical_gbps"] = round(theoretical, 3) if theoretical > 0 else None
    doc["points"] = [
        {k: _plain(r[k]) for k in ("level", "direction", "ctas_per_sm", "gbps", "gibps")}
        for _, r in points.iterrows()
    ]
    return doc


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    return round(v, 3) if isinstance(v, float) else v
