"""The L2 slice map from the `l2_slices` trace alone (config/README.md, `experiments.l2_slices`).

1. Per SM under test, the lines' first-touch latencies (pass 0, the minimum over repetitions:
   timing outliers are slow, and a median of two keeps half of one; of the
   second helper's phase where the SM was walked again): near and far lines, and the partition
   function over address bits 7-20 solved over GF(2) (`l2_partition`).
2. Which SMs share a near partition (their near sets coincide).
3. Slices: lines whose latency vectors over every SM agree up to the noise belong to one slice.
   Average-linkage clustering of the lines by the mean absolute difference of their vectors,
   cut at `CUT_FACTOR` times the median distance of a line to its nearest neighbour (two lines of
   one slice differ by noise alone); the classes are separated when the closest merge above the
   cut lies at least `MIN_SEPARATION` times above the farthest one below it.
4. The SM x slice matrix (median latency of a class's lines from each SM) and two least-squares
   fits: latency = a_sm + b_slice, and the same + p * [the slice lies in the SM's far set].
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .l2_partition import LINEAR_TOLERANCE, fit_affine, near_groups, split_lines
from .result import header, quantity, undetermined

CUT_FACTOR = 3.0
MIN_SEPARATION = 1.5
MIN_LINES = 16


def first_touch_gap(frame: pd.DataFrame) -> float | None:
    """The far minus the near latency of one SM's first touches (pass 0 of one phase), or None
    where they do not fall into two groups: the sweep's one question (which SM can serve as
    the second helper: the one with the largest gap)."""
    lat = frame[frame["pass"] == 0].groupby("offset_bytes")["cycles"].min().to_numpy()
    if lat.size < MIN_LINES:
        return None
    nf = split_lines(lat.astype(float))
    return None if nf.far is None else float(nf.far_cycles - nf.near_cycles)


# An SM's two latency groups are its near and far partitions only where their gap is at least
# this share of the largest gap any SM shows: the slices of one partition also differ by some
# tens of cycles (an H100 SM that reads every line near splits them 280 / 307 cycles, one of
# the other partition 294 / 471), and Otsu splits those too.
PARTITION_GAP_SHARE = 0.5


def partition_splits(gaps: dict[int, float | None]) -> dict[int, bool]:
    """Which SMs' two groups are near and far partitions (`PARTITION_GAP_SHARE`)."""
    largest = max((g for g in gaps.values() if g is not None), default=None)
    return {
        sm: g is not None and largest is not None and g >= PARTITION_GAP_SHARE * largest
        for sm, g in gaps.items()
    }


def latency_matrix(data: pd.DataFrame, pass_: int = 0) -> pd.DataFrame:
    """Minimum latency over repetitions, SMs (rows) x line offsets (columns), of pass `pass_`;
    an SM walked in both phases keeps the later phase's walk (the helper of the other
    partition)."""
    d = data[data["pass"] == pass_]
    last = d.groupby("sm")["phase"].transform("max")
    d = d[d["phase"] == last]
    return d.pivot_table(index="sm", columns="offset_bytes", values="cycles", aggfunc="min")


def _noise_cycles(data: pd.DataFrame) -> float:
    """Spread of one repetition around the median of its (SM, line, pass): the mean absolute
    deviation (x 1.2533, a normal's SD) of the deviations below their 99th percentile (the
    rare slow outliers left out)."""
    g = data.groupby(["phase", "sm", "pass", "offset_bytes"])["cycles"]
    dev = (data["cycles"].astype(float) - g.transform("median")).abs()
    dev = dev[g.transform("size") > 1]
    if not len(dev):
        return float("nan")
    return 1.2533 * float(dev[dev <= dev.quantile(0.99)].mean())


def slice_classes(matrix: pd.DataFrame) -> dict[str, Any]:
    """Lines clustered by their latency vectors over the SMs (see the module docstring)."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import pdist

    v = matrix.to_numpy(dtype=float).T  # lines x SMs
    dist = pdist(v, "cityblock") / v.shape[1]
    square = np.full((v.shape[0], v.shape[0]), np.inf)
    iu = np.triu_indices(v.shape[0], 1)
    square[iu] = dist
    square.T[iu] = dist
    floor = float(np.median(square.min(axis=1)))
    cut = CUT_FACTOR * max(floor, 0.5)
    z = linkage(dist, "average")
    labels = fcluster(z, cut, "distance") - 1
    heights = z[:, 2]
    below, above = heights[heights <= cut], heights[heights > cut]
    within = float(below.max()) if below.size else 0.0
    between = float(above.min()) if above.size else float("inf")
    return {
        "labels": labels,
        "classes": int(labels.max()) + 1,
        "floor": floor,
        "cut": cut,
        "within": within,
        "between": between,
        "separation": between / max(within, 0.5),
    }


def _additive_residuals(
    y: np.ndarray, f: np.ndarray | None, *, sweeps: int = 200
) -> tuple[np.ndarray, float | None]:
    """Residuals (of the measured cells) and far coefficient of the least-squares fit
    y[i, j] = a_i + b_j (+ p f[i, j]). A complete matrix has the exact solution of the two-way
    layout: double-centre y (and f) and regress; with missing cells, alternate the row means,
    column means and p until they settle (backfitting; the same minimum)."""
    seen = ~np.isnan(y)
    if seen.all():

        def centred(m: np.ndarray) -> np.ndarray:
            return m - m.mean(1, keepdims=True) - m.mean(0, keepdims=True) + m.mean()

        dy = centred(y)
        if f is None:
            return dy.reshape(-1), None
        df = centred(f.astype(float))
        den = float((df * df).sum())
        p = float((dy * df).sum()) / den if den > 0 else 0.0
        return (dy - p * df).reshape(-1), p
    fv = np.zeros_like(y) if f is None else f.astype(float)
    a, b, p = np.zeros((y.shape[0], 1)), np.zeros((1, y.shape[1])), 0.0
    for _ in range(sweeps):
        a = np.nanmean(y - b - p * fv, axis=1, keepdims=True)
        b = np.nanmean(y - a - p * fv, axis=0, keepdims=True)
        if f is not None:
            r = np.where(seen, y - a - b, 0.0)
            den = float((np.where(seen, fv, 0.0) ** 2).sum())
            p = float((r * fv).sum()) / den if den > 0 else 0.0
    res = (y - a - b - p * fv)[seen]
    return res, (p if f is not None else None)


def additive_fits(table: np.ndarray, far: np.ndarray | None) -> dict[str, Any]:
    """Least-squares fits of an SM x slice matrix: a_sm + b_slice, and with a far term."""
    y = np.asarray(table, dtype=float)
    values = y[~np.isnan(y)]
    total = float(((values - values.mean()) ** 2).sum())
    models = {"additive": None}
    if far is not None and 0 < far.sum() < far.size:
        models["additive_far"] = far
    out = {}
    for name, f in models.items():
        res, p = _additive_residuals(y, f)
        out[name] = {
            "r2": round(1 - float((res**2).sum()) / total, 5) if total > 0 else 1.0,
            "residual_sd_cycles": round(float(res.std()), 3),
            "residual_max_cycles": round(float(np.abs(res).max()), 3),
        }
        if p is not None:
            out[name]["far_cycles"] = round(p, 2)
    return out


def _per_sm(matrix: pd.DataFrame) -> tuple[list[dict[str, Any]], dict[int, np.ndarray]]:
    offsets = matrix.columns.to_numpy(dtype=np.int64)
    rows, far_sets = [], {}
    nfs = {int(sm): split_lines(lat.to_numpy(dtype=float)) for sm, lat in matrix.iterrows()}
    gaps = {
        sm: None if nf.far is None else float(nf.far_cycles - nf.near_cycles)
        for sm, nf in nfs.items()
    }
    partitioned = partition_splits(gaps)
    largest = max((g for g in gaps.values() if g is not None), default=0.0)
    for sm, nf in nfs.items():
        row: dict[str, Any] = {"sm": sm, "near_cycles": nf.near_cycles}
        if nf.far is None:
            rows.append(row | {"split": False, "evidence": nf.evidence})
            continue
        if not partitioned[sm]:
            rows.append(
                row
                | {
                    "split": False,
                    "evidence": (
                        f"two groups {nf.near_cycles:.0f} / {nf.far_cycles:.0f} cycles, a gap "
                        f"under {PARTITION_GAP_SHARE:.0%} of the largest SM's ({largest:.0f} "
                        "cycles): slices of one partition, not near and far"
                    ),
                }
            )
            continue
        fit = fit_affine(offsets, nf.far)
        # a linear SM's far set is its function's (the lines noise misplaced put back)
        far_sets[int(sm)] = fit.predict(offsets) if fit.linear else nf.far
        rows.append(
            row
            | {
                "split": True,
                "far_cycles": nf.far_cycles,
                "far_share": round(float(nf.far.mean()), 3),
                "linear": fit.linear,
                "mask": hex(fit.mask),
                "bits": fit.bits,
                "constant": fit.constant,
                "inconsistent_lines": fit.mismatches,
                "runner_up_inconsistent_lines": fit.runner_up_mismatches,
            }
        )
    return rows, far_sets


def _partition_quantities(rows, far_sets, lines: int) -> dict[str, Any]:
    method = (
        "per SM: Otsu split of its lines' first-touch L2-hit latencies into near and far, then "
        "the affine function over GF(2) of address bits 7-20 that misplaces the fewest far "
        "lines (Walsh-Hadamard transform); bits above 20 are constant inside the 2 MiB region "
        "(their share is in the constant)"
    )
    split = [r for r in rows if r["split"]]
    if not split:
        why = "no SM's first-touch latencies split into near and far groups"
        return {"partition_function": undetermined(why), "partitions": undetermined(why)}, []
    masks = {r["mask"] for r in split}
    bad = [r for r in split if not r["linear"]]
    groups = near_groups(far_sets, tolerance=LINEAR_TOLERANCE)
    evidence = (
        f"{len(split)} of {len(rows)} SMs split; masks {sorted(masks)}; inconsistent lines "
        f"per SM {min(r['inconsistent_lines'] for r in split)}-"
        f"{max(r['inconsistent_lines'] for r in split)} of {lines}"
    )
    if bad or len(masks) > 1:
        what = (
            f"not linear: {len(bad)} SMs misplace more than {LINEAR_TOLERANCE:.1%} of the lines "
            f"(up to {max(r['inconsistent_lines'] for r in split)} inconsistent lines)"
            if bad
            else "the SMs' masks differ"
        )
        function = undetermined(f"{what}; {evidence}")
    else:
        worst = max(r["inconsistent_lines"] for r in split)
        runner = min(r["runner_up_inconsistent_lines"] for r in split)
        function = quantity(
            split[0]["bits"],
            unit=None,
            confidence=(1 - worst / lines) * min(1.0, (runner - worst) / (0.25 * lines)),
            method=method,
            evidence=f"partition = XOR of address bits {split[0]['bits']} (mask "
            f"{split[0]['mask']}) plus a constant per SM; {evidence}; the next-best function "
            f"misplaces {runner} lines",
        )
    partitions = quantity(
        len(groups) if len(split) == len(rows) else len(groups) + 1,
        unit=None,
        confidence=len(split) / len(rows),
        method="SMs whose far sets coincide (at most "
        f"{LINEAR_TOLERANCE:.1%} of the lines differ) share a near partition",
        evidence=f"groups of SMs: {groups}"
        + ("" if len(split) == len(rows) else f"; {len(rows) - len(split)} SMs without a split"),
    )
    return {"partition_function": function, "partitions": partitions}, groups


def _columns(matrix: pd.DataFrame, labels: np.ndarray) -> np.ndarray:
    """SM x column medians of the lines of each column label (0..max)."""
    v = matrix.to_numpy(dtype=float)
    return np.vstack([np.median(v[:, labels == k], axis=1) for k in range(labels.max() + 1)]).T


def figure_table(data: pd.DataFrame, doc: dict[str, Any]) -> pd.DataFrame:
    """The heat map's cells: SM x column (a slice class, or a line where the classes are
    undetermined), the median first-touch latency, the far flag of the column from the SM."""
    columns = ["sm", "column", "kind", "cycles", "far"]
    assign = doc.get("columns")
    if data.empty or not assign:
        return pd.DataFrame(columns=columns)
    matrix = latency_matrix(data, 0)[assign["offsets_bytes"]]
    labels = np.asarray(assign["column"])
    table = _columns(matrix, labels)
    far = {r["sm"]: r.get("far_columns") for r in doc.get("sms", [])}
    return pd.DataFrame(
        [
            (int(sm), k, assign["kind"], round(float(table[i, k]), 2), k in (far[sm] or ()))
            for i, sm in enumerate(matrix.index)
            for k in range(table.shape[1])
        ],
        columns=columns,
    )


def analyse(
    data: pd.DataFrame, *, provenance: dict[str, Any], inputs: dict | None = None
) -> dict[str, Any]:
    """The `l2_slices` result document for one device."""
    doc = header("l2_slices", provenance)
    doc["path"] = "cg"
    doc["clocks_before"] = provenance.get("clocks_before")
    doc["clocks_after"] = provenance.get("clocks_after")
    if data.empty:
        why = "the trace is empty: no SM could be walked"
        doc["elements"] = {"l2": {k: undetermined(why) for k in ("slices", "partitions")}}
        return doc
    matrix = latency_matrix(data, 0).dropna(axis=1)
    offsets = matrix.columns.to_numpy(dtype=np.int64)
    lines, sms = len(offsets), len(matrix)
    noise = _noise_cycles(data)
    rows, far_sets = _per_sm(matrix)
    quantities, groups = _partition_quantities(rows, far_sets, lines)
    doc["sms"] = rows
    doc["near_groups"] = groups
    doc["noise_cycles"] = round(noise, 3) if np.isfinite(noise) else None
    helpers = data.groupby("phase")["helper_sm"].first().to_dict()
    doc["helpers"] = {str(k): int(v) for k, v in helpers.items()}
    l2: dict[str, Any] = dict(quantities)
    if lines < MIN_LINES or sms < 2:
        why = f"{lines} lines and {sms} SMs; need >= {MIN_LINES} lines and >= 2 SMs"
        l2["slices"] = undetermined(why)
        doc["elements"] = {"l2": l2}
        return doc
    c = slice_classes(matrix)
    evidence = (
        f"{lines} lines x {sms} SMs; nearest-line distance (median) {c['floor']:.2f} cycles, "
        f"cut {c['cut']:.2f}; merges below the cut up to {c['within']:.2f}, above from "
        f"{c['between']:.2f} (separation {c['separation']:.2f}); repetition noise "
        f"{noise:.2f} cycles"
    )
    method = (
        "average-linkage clustering of the lines by the mean absolute difference of their "
        "first-touch latency vectors over the SMs, cut at 3 x the median nearest-line distance; "
        "slices that differ by less than the noise from every SM merge (a lower bound)"
    )
    separated = c["separation"] >= MIN_SEPARATION and c["classes"] > 1
    if separated:
        l2["slices"] = quantity(
            c["classes"],
            unit=None,
            confidence=1 - 1 / c["separation"],
            method=method,
            evidence=evidence,
        )
        labels, kind = c["labels"], "slice"
    else:
        l2["slices"] = undetermined(f"the latency classes are not separated: {evidence}")
        labels, kind = np.arange(lines), "line"
    table = _columns(matrix, labels)
    far = None
    if len(far_sets) == sms:
        far_lines = np.vstack([far_sets[int(s)] for s in matrix.index]).astype(float)
        far = _columns(pd.DataFrame(far_lines), labels) > 0.5
        for i, row in enumerate(rows):
            row["far_columns"] = np.flatnonzero(far[i]).tolist()
    fits = additive_fits(table, far)
    doc["model"] = {"columns": kind, "fits": fits}
    if "additive_far" in fits:
        f = fits["additive_far"]
        l2["far_penalty_cycles"] = quantity(
            f["far_cycles"],
            unit="cycles",
            confidence=max(0.0, f["r2"]),
            method="least squares of the SM x slice latency matrix: a_sm + b_slice + p * far",
            evidence=f"R^2 {f['r2']} (additive alone {fits['additive']['r2']}), residual SD "
            f"{f['residual_sd_cycles']} cycles",
        )
    doc["columns"] = {
        "kind": kind,
        "lines_per_column": np.bincount(labels).tolist(),
        "offsets_bytes": offsets.tolist(),
        "column": labels.tolist(),
    }
    doc["elements"] = {"l2": l2}
    return doc
