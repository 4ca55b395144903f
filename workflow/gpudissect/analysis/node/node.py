"""The node's memory topology from the node trace alone (experiments/node.py).

Per ordered pair (a, b) with peer access:
- latencies: the median of each chase (path x footprint): `hit_latency_cycles` at the L1
  footprint (the nearest place that holds b's line for a), `l2_footprint_latency_cycles`, and
  `miss_latency_cycles` beyond the L2 (b's DRAM over the link);
- caching: a's L1 (L2) keeps b's lines when the peer chase inside the L1 (L2) is as fast as a's
  chase of its own memory at the same footprint and path: within `tolerance` of it, the larger of
  10 % of the local latency and three times the spread (median absolute deviation) of the two;
  where a's own chase shows no such cache on the path (the local L1-footprint latency is not
  below the local L2-footprint one, or that below the beyond-L2 one) the reading is not
  applicable;
- bandwidth: per direction, access size and SM count the median of bytes / elapsed over the
  repetitions; the peak, where it was reached, and per access size the fewest SMs that reach
  95 % of that size's maximum;
- copy bandwidth: the least-squares slope of elapsed time against bytes over every copy (its
  inverse; the intercept is the copy's fixed cost);
- atomic latency: the median of the timed atomics, beside a's atomics on its own memory;
- a chase whose loads did not return the chain's indices (a detail in its rows) is left out of
  every reading and named under the pair's `skipped`;
- TLB reach: over the page-stride series, the largest footprint before the median steps up
  for good by more than three median absolute deviations (a TLB miss may cost less than the
  10 % the caching readings allow: an H100's L1 TLB), beside a's reach on its own memory;
- NVML's facts of the link as the trace recorded them, and what the sweep skipped.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from ..common.result import header, not_applicable, quantity, undetermined

FOOTPRINTS = ("l1", "l2", "beyond")
SATURATION = 0.95
RELATIVE_TOLERANCE = 0.10
SPREAD_TOLERANCE = 3.0
MIN_STEP_CYCLES = 2.0  # a TLB step smaller than this is not told from the timing's resolution
NOT_MEASURED = "not measured (the sweep skipped it or the pair has no rows of it)"


def _mad(x: np.ndarray) -> float:
    return float(np.median(np.abs(x - np.median(x)))) if len(x) else 0.0


def _latency_q(x: np.ndarray, what: str) -> dict[str, Any]:
    med = float(np.median(x))
    spread = _mad(x)
    return quantity(
        round(med, 1),
        unit="cycles",
        confidence=1.0 - min(1.0, spread / max(med, 1.0)),
        method=f"median of the timed {what}",
        evidence=f"{len(x)} loads, median absolute deviation {spread:.1f} cycles",
    )


def _samples(chase: pd.DataFrame, src: int, dst: int, path: str, footprint: str) -> np.ndarray:
    m = (
        (chase["src_gpu"] == src)
        & (chase["dst_gpu"] == dst)
        & (chase["path"] == path)
        & (chase["footprint"] == footprint)
    )
    return chase.loc[m, "latency_cycles"].to_numpy(dtype=np.float64)


def tolerance_cycles(local: np.ndarray, peer: np.ndarray) -> float:
    """How far above the local latency a peer latency may lie and still be a local hit."""
    base = float(np.median(local))
    return max(RELATIVE_TOLERANCE * base, SPREAD_TOLERANCE * max(_mad(local), _mad(peer)), 1.0)


def keeps_peer_lines(
    *, level: str, local: dict[str, np.ndarray], peer: dict[str, np.ndarray], path: str
) -> dict[str, Any]:
    """Whether a's cache `level` (l1 or l2) keeps b's lines on `path`, from a's chases of its
    own memory (`local`) and of b's (`peer`) at each footprint."""
    nxt = {"l1": "l2", "l2": "beyond"}[level]
    if any(len(d.get(f, ())) == 0 for d in (local, peer) for f in (level, nxt)):
        return undetermined(f"{NOT_MEASURED}: the {level} or {nxt} footprint on path {path}")
    here, beyond = float(np.median(local[level])), float(np.median(local[nxt]))
    tol_local = tolerance_cycles(local[level], local[nxt])
    if beyond - here <= tol_local:
        return not_applicable(
            f"on path {path} the local chase inside the {level.upper()} ({here:.0f} cycles) is "
            f"no faster than at the next footprint ({beyond:.0f}): no {level.upper()} on this "
            "path to keep lines"
        )
    p = float(np.median(peer[level]))
    tol = tolerance_cycles(local[level], peer[level])
    kept = p <= here + tol
    margin = abs(p - (here + tol)) / tol
    return quantity(
        bool(kept),
        unit=None,
        confidence=min(1.0, 0.5 + margin / 2),
        method=(
            f"peer chase inside the {level.upper()} against the local one at the same footprint "
            "and path: kept when the peer median is within the tolerance of the local median "
            "(max of 10 % and 3 x the median absolute deviation)"
        ),
        evidence=f"peer {p:.1f} vs local {here:.1f} cycles, tolerance {tol:.1f}",
    )


def tlb_reach(chase: pd.DataFrame, src: int, dst: int) -> dict[str, Any]:
    """The TLB reach src sees on dst's memory: the largest footprint of the page-stride series
    whose median stays within the tolerance of the smallest one's, where a larger one lies
    above it."""
    m = (chase["src_gpu"] == src) & (chase["dst_gpu"] == dst) & (chase["footprint"] == "tlb")
    series = chase[m]
    if series.empty:
        return undetermined(f"{NOT_MEASURED}: the page-stride series")
    by_size = {
        int(k): g.to_numpy(dtype=np.float64)
        for k, g in series.groupby("footprint_bytes")["latency_cycles"]
    }
    sizes = sorted(by_size)
    first = by_size[sizes[0]]
    medians = [float(np.median(by_size[k])) for k in sizes]
    tols = [
        max(SPREAD_TOLERANCE * max(_mad(first), _mad(by_size[k])), MIN_STEP_CYCLES) for k in sizes
    ]
    for i, k in enumerate(sizes[1:], start=1):
        tol = tols[i]
        # a step: this footprint and every larger one above the smallest one's median
        if all(medians[j] > medians[0] + tols[j] for j in range(i, len(sizes))):
            stride = int(series["stride_bytes"].iloc[0])
            return quantity(
                sizes[i - 1],
                unit="bytes",
                confidence=min(1.0, 0.5 + (medians[i] - medians[0] - tol) / (2 * tol)),
                method=(
                    f"P-chase at a {stride}-byte stride over doubling footprints: the largest "
                    "footprint before the median steps, for good, above the smallest one's by "
                    "more than 3 median absolute deviations (at least 2 cycles)"
                ),
                evidence=(
                    f"{medians[i - 1]:.0f} cycles at {sizes[i - 1]} bytes, {medians[i]:.0f} at "
                    f"{k}; {medians[0]:.0f} at {sizes[0]}"
                ),
            )
    return undetermined(
        f"no step over the page-stride series up to {sizes[-1]} bytes ({medians[0]:.0f} to "
        f"{medians[-1]:.0f} cycles): the reach is at least that, or the series starts beyond it"
    )


def _latencies(chase: pd.DataFrame, src: int, dst: int, paths: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in paths:
        s = {f: _samples(chase, src, dst, path, f) for f in FOOTPRINTS}
        names = {
            "l1": "hit_latency_cycles",
            "l2": "l2_footprint_latency_cycles",
            "beyond": "miss_latency_cycles",
        }
        out[path] = {
            names[f]: _latency_q(s[f], f"chase over the {f} footprint on path {path}")
            if len(s[f])
            else undetermined(f"{NOT_MEASURED}: footprint {f}")
            for f in FOOTPRINTS
        }
        fp = chase.loc[chase["path"] == path].groupby("footprint")["footprint_bytes"].first()
        out[path]["footprints_bytes"] = {f: int(fp[f]) for f in FOOTPRINTS if f in fp.index}
    return out


def _caching(chase: pd.DataFrame, src: int, dst: int, paths: list[str]) -> dict[str, Any]:
    out = {}
    for path in paths:
        local = {f: _samples(chase, src, src, path, f) for f in FOOTPRINTS}
        peer = {f: _samples(chase, src, dst, path, f) for f in FOOTPRINTS}
        out[path] = {
            f"{lvl}_keeps_peer_lines": keeps_peer_lines(
                level=lvl, local=local, peer=peer, path=path
            )
            for lvl in ("l1", "l2")
        }
        out[path].update(_capacities(chase, src, dst, path, out[path]))
    return out


def latency_steps(samples: dict[int, np.ndarray]) -> list[tuple[int, int, float, float]]:
    """(last size below, first size above, median below, median above) of every step up of a
    size series: a footprint whose median lies above the current plateau's first one by more
    than the tolerance starts a new plateau."""
    sizes = sorted(samples)
    medians = [float(np.median(samples[k])) for k in sizes]
    steps, base = [], 0
    for i in range(1, len(sizes)):
        if medians[i] > medians[base] + tolerance_cycles(samples[sizes[base]], samples[sizes[i]]):
            steps.append((sizes[i - 1], sizes[i], medians[i - 1], medians[i]))
            base = i
    return steps


def _capacity_q(step: tuple[int, int, float, float], cache: str, path: str) -> dict[str, Any]:
    below, above, m_below, m_above = step
    return quantity(
        below,
        unit="bytes",
        confidence=0.8,
        method=(
            f"peer P-chase on path {path} over footprints growing by sqrt(2): the largest "
            f"footprint before the step up that the {cache} holding the peer's lines ends "
            "(a step: the median above the plateau's first by more than the tolerance)"
        ),
        evidence=f"{m_below:.0f} cycles at {below} bytes, {m_above:.0f} at {above}",
    )


def _capacities(
    chase: pd.DataFrame, src: int, dst: int, path: str, caching: dict[str, Any]
) -> dict[str, Any]:
    """The capacity of src's L1 and L2 for dst's lines on `path`: the steps of the capacity
    series, the first one the L1's where it keeps them, the next (or the first) the L2's."""
    m = (
        (chase["src_gpu"] == src)
        & (chase["dst_gpu"] == dst)
        & (chase["path"] == path)
        & (chase["footprint"] == "capacity")
    )
    series = chase[m]
    keys = ("l1_peer_capacity_bytes", "l2_peer_capacity_bytes")
    if series.empty:
        return {k: undetermined(f"{NOT_MEASURED}: the capacity series on {path}") for k in keys}
    samples = {
        int(k): g.to_numpy(dtype=np.float64)
        for k, g in series.groupby("footprint_bytes")["latency_cycles"]
    }
    steps = latency_steps(samples)
    out: dict[str, Any] = {}
    for key, level in zip(keys, ("l1", "l2"), strict=True):
        kept = caching[f"{level}_keeps_peer_lines"]
        if kept.get("value") is None:
            out[key] = {k: v for k, v in kept.items() if k in ("value", "undetermined")}
            if "not_applicable" in kept:
                out[key] = not_applicable(kept["not_applicable"])
            continue
        if kept["value"] is False:
            out[key] = not_applicable(f"the {level.upper()} keeps no lines of the peer's memory")
            continue
        first_l1 = caching["l1_keeps_peer_lines"].get("value") is True
        index = 1 if level == "l2" and first_l1 else 0
        if index < len(steps):
            out[key] = _capacity_q(steps[index], level.upper(), path)
        else:
            top = max(samples)
            out[key] = undetermined(
                f"the capacity series on {path} has {len(steps)} step(s) up to {top} bytes: "
                f"the {level.upper()}'s capacity for peer lines lies beyond it"
            )
    return out


def stream_points(stream: pd.DataFrame) -> pd.DataFrame:
    """Median GB/s of every (src, dst, direction, access size, SM count)."""
    if stream.empty:
        return pd.DataFrame(
            columns=["src_gpu", "dst_gpu", "direction", "access_bytes", "sms", "gbps", "n"]
        )
    d = stream.assign(gbps=stream["bytes_moved"] / stream["elapsed_ns"])
    keys = ["src_gpu", "dst_gpu", "direction", "access_bytes", "sms"]
    return d.groupby(keys, as_index=False).agg(gbps=("gbps", "median"), n=("gbps", "size"))


def _bandwidth(points: pd.DataFrame, src: int, dst: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    mine = points[(points["src_gpu"] == src) & (points["dst_gpu"] == dst)]
    for direction in ("read", "write"):
        d = mine[mine["direction"] == direction]
        if d.empty:
            out[direction] = {"peak_gbps": undetermined(f"{NOT_MEASURED}: {direction} streams")}
            continue
        best = d.loc[d["gbps"].idxmax()]
        saturate = {}
        for access, g in d.groupby("access_bytes"):
            g = g.sort_values("sms")
            top = g["gbps"].max()
            saturate[str(int(access))] = int(g.loc[g["gbps"] >= SATURATION * top, "sms"].iloc[0])
        out[direction] = {
            "peak_gbps": quantity(
                round(float(best["gbps"]), 3),
                unit="GB/s",
                confidence=1.0,
                method=(
                    "maximum over SM count and access size of the median bytes / elapsed of "
                    "SM-driven streams over the link"
                ),
                evidence=(
                    f"{int(best['sms'])} SMs, {int(best['access_bytes'])}-byte accesses; "
                    f"{len(d)} points"
                ),
            ),
            "sms_to_saturate": quantity(
                saturate,
                unit="SMs",
                confidence=0.9,
                method=f"per access size, the fewest SMs reaching {SATURATION:.0%} of its maximum",
                evidence=f"SM counts swept: {sorted(int(x) for x in d['sms'].unique())}",
            ),
        }
    return out


def copy_fit(copies: pd.DataFrame) -> tuple[float, float, float] | None:
    """(GB/s, fixed ns, relative rms residual) of elapsed = fixed + bytes / GB/s, or None."""
    if copies["bytes_moved"].nunique() < 2:
        return None
    x = copies["bytes_moved"].to_numpy(dtype=np.float64)
    y = copies["elapsed_ns"].to_numpy(dtype=np.float64)
    slope, intercept = np.polyfit(x, y, 1)
    if slope <= 0:
        return None
    resid = y - (slope * x + intercept)
    return 1.0 / slope, float(intercept), float(np.sqrt(np.mean(resid**2)) / np.mean(y))


def _copy(copy: pd.DataFrame, src: int, dst: int) -> dict[str, Any]:
    c = copy[(copy["src_gpu"] == src) & (copy["dst_gpu"] == dst)]
    fit = copy_fit(c) if not c.empty else None
    if fit is None:
        reason = NOT_MEASURED if c.empty else "fewer than two sizes, or time not growing with bytes"
        return {"bandwidth_gbps": undetermined(reason)}
    gbps, fixed, rel = fit
    sizes = sorted(int(b) for b in c["bytes_moved"].unique())
    api = ", ".join(sorted(set(c["detail"]) - {""})) or "copy"
    method = "least-squares slope of elapsed time against bytes copied (its inverse)"
    return {
        "bandwidth_gbps": quantity(
            round(gbps, 3),
            unit="GB/s",
            confidence=1.0 - min(1.0, 10 * rel),
            method=f"copy engine ({api}), {method}",
            evidence=f"{len(c)} copies of {sizes} bytes",
        ),
        "fixed_ns": quantity(
            round(fixed, 1),
            unit="ns",
            confidence=1.0 - min(1.0, 10 * rel),
            method="intercept of the same fit",
            evidence=f"relative rms residual {rel:.4f}",
        ),
    }


def _atomic(atomic: pd.DataFrame, src: int, dst: int) -> dict[str, Any]:
    a = atomic[(atomic["src_gpu"] == src) & (atomic["dst_gpu"] == dst)]
    if a.empty:
        return undetermined(f"{NOT_MEASURED}: atomics")
    return _latency_q(a["latency_cycles"].to_numpy(dtype=np.float64), "atomics (atomicAdd)")


def _link(row: pd.Series) -> dict[str, Any]:
    return {
        "kind": row["link_kind"],
        "nvlink_count": int(row["nvlink_count"]),
        "nvlink_version": int(row["nvlink_version"]) or None,
        "common_ancestor": row["common_ancestor"] or None,
    }


def analyse(
    data: pd.DataFrame, *, provenance: dict[str, Any], inputs: dict | None = None
) -> dict[str, Any]:
    doc = header("node", provenance)
    links = data[data["kind"] == "link"]
    if links.empty:
        doc["node"] = undetermined("the trace holds no link rows: the node sweep did not run")
        return doc
    chase = data[(data["kind"] == "chase") & (data["detail"] == "")]
    astray = data[(data["kind"] == "chase") & (data["detail"] != "")]
    stream = data[data["kind"] == "stream"]
    planned = set(data.loc[data["kind"].isin(["chase", "skipped"]), "path"])
    paths = [p for p in ("ca", "cg", "nc") if p in planned]
    points = stream_points(stream)
    names = {
        **dict(zip(links["src_gpu"], links["src_name"], strict=True)),
        **dict(zip(links["dst_gpu"], links["dst_name"], strict=True)),
    }
    skipped = data[data["kind"] == "skipped"]
    gpus = sorted(int(g) for g in names)
    local = {
        str(g): {
            "latency": _latencies(chase, g, g, paths),
            "atomic_latency_cycles": _atomic(data[data["kind"] == "atomic"], g, g),
            "tlb_reach_bytes": tlb_reach(chase, g, g),
        }
        for g in gpus
    }
    pairs = []
    for _, row in links.sort_values(["src_gpu", "dst_gpu"]).iterrows():
        s, d = int(row["src_gpu"]), int(row["dst_gpu"])
        pair: dict[str, Any] = {
            "src": s,
            "dst": d,
            "src_name": names[s],
            "dst_name": names[d],
            "peer_access": bool(row["peer_access"]),
            "link": _link(row),
        }
        if pair["peer_access"]:
            pair["latency"] = _latencies(chase, s, d, paths)
            pair["caching"] = _caching(chase, s, d, paths)
            pair["bandwidth"] = _bandwidth(points, s, d)
            pair["copy"] = _copy(data[data["kind"] == "copy"], s, d)
            pair["atomic_latency_cycles"] = _atomic(data[data["kind"] == "atomic"], s, d)
            pair["tlb_reach_bytes"] = tlb_reach(chase, s, d)
        mine = skipped[(skipped["src_gpu"] == s) & (skipped["dst_gpu"] == d)]
        if len(mine):
            pair["skipped"] = list(mine["detail"])
        lost = astray[(astray["src_gpu"] == s) & (astray["dst_gpu"] == d)]
        if len(lost):
            # left out of every reading: its loads did not return the chain's indices
            # (a chase row's detail is empty unless the sweep found its walk astray)
            walks = lost.groupby(["path", "footprint", "footprint_bytes", "detail"]).size().index
            pair["skipped"] = pair.get("skipped", []) + [
                f"chase {p} {f} {b} B: {why}" for p, f, b, why in walks
            ]
        pairs.append(pair)
    identities = {
        int(r.src_gpu): json.loads(r.detail) for r in data[data["kind"] == "gpu"].itertuples()
    }
    doc["node"] = {
        "gpus": [{"gpu": g, "name": names[g], "device": identities.get(g, {})} for g in gpus],
        "paths": paths,
        "local": local,
        "pairs": pairs,
    }
    return doc
