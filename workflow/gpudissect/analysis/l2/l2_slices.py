"""The L2 slice map from the `l2_slices` trace alone (config/README.md, `experiments.l2_slices`).

1. Per SM under test, the lines' first-touch latencies (pass 0, the minimum over repetitions:
   timing outliers are slow, and a median of two keeps half of one; of the
   second helper's phase where the SM was walked again): near and far lines, and the partition
   function over address bits 7-20 solved over GF(2) (`l2_partition`).
2. Which SMs share a near partition (their near sets coincide).
3. Slices, from the contention phase where the trace has one (phase 2): two lines hammered
   with atomics by every warp of a grid take as long as one line alone when one slice serves
   both, about half as long when two do. A launch's share is its duration over the median of
   the three launches of its class reference beside itself nearest to it; a partner's share is
   the median over its launches (the sweep launches a partner again where its share lay within
   `l2_shares.AMBIGUOUS_BAND` of `SAME_SHARE`); a share above `SAME_SHARE` (halfway between the two
   servers' 0.5 and the one server's 1.0) puts the partner in the reference's slice. The merge
   pass (pass 2, where the trace has one) launches each class's reference beside the references
   of the classes after it: two that contend are one slice the search split, and their classes
   are merged. The classes are the slices of the sampled lines; the count is undetermined
   where no two lines contend, where every line contends with every other (the limit is not a
   slice's), or where too many classes hold a single line for the sample to have met every
   slice, or where over `MAX_CHECK_MISSES` of the check launches (two lines of one class other
   than its reference: they should contend; one beside a line of another class: it should not)
   disagree with the classes.
   Without a contention phase (older traces): lines whose latency vectors over every SM agree
   up to the noise belong to one slice. Average-linkage clustering of the lines by the mean
   absolute difference of their vectors, cut at `CUT_FACTOR` times the median distance of a
   line to its nearest neighbour (two lines of one slice differ by noise alone); the classes are
   separated when the closest merge above the cut lies at least `MIN_SEPARATION` times above
   the farthest one below it.
4. The SM x slice matrix (median latency of a class's lines from each SM) and two least-squares
   fits: latency = a_sm + b_slice, and the same + p * [the slice lies in the SM's far set].
5. From the contention classes: the address-to-slice function and the contiguous-buffer
   capacity its balance allows (slice_function.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..common.result import header, not_applicable, quantity, undetermined
from .l2_partition import LINEAR_TOLERANCE, fit_affine, near_groups, split_lines
from .l2_shares import DISTURBED_SHARE, SAME_SHARE, contention_shares, partner_shares
from .partition_capacity import footprint_by_partition
from .slice_function import add_slice_elements

CUT_FACTOR = 3.0
MIN_SEPARATION = 1.5
MIN_LINES = 16
CONTENTION_PHASE = 2  # experiments.l2_slices.CONTENTION_PHASE (the analysis reads traces only)
DECIDED_SDS = 3.0  # a launch is decided when its share lies this many noise SDs off SAME_SHARE
MAX_CHECK_MISSES = 0.05  # check launches that may disagree with the classes
MAX_SINGLETON_SHARE = 0.05  # classes of one line, as a share of the lines (Good-Turing: the
# chance that a further line falls in a slice the sample has not met)


def first_touch_gap(frame) -> float | None:
    """The far minus the near latency of one SM's first touches (pass 0 of one phase), or None
    where they do not fall into two groups: the sweep's one question (which SM can serve as
    the second helper: the one with the largest gap). `frame`: the rows of those walks, or a
    dict of their columns' arrays (`pass`, `offset_bytes`, `cycles`)."""
    first = np.asarray(frame["pass"]) == 0
    cycles = np.asarray(frame["cycles"])[first]
    # each line's minimum over the repetitions, the lines in the order of their offsets
    lines, line = np.unique(np.asarray(frame["offset_bytes"])[first], return_inverse=True)
    lat = np.full(lines.size, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(lat, line, cycles.astype(np.int64))
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


def walks(data: pd.DataFrame) -> pd.DataFrame:
    """The rows of the timed walks (a trace's contention rows left out)."""
    return data[data["phase"] != CONTENTION_PHASE]


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


def merged_labels(labels: list[int], pairs: list[tuple[int, int]]) -> list[int]:
    """`labels` with every pair of labels in `pairs` made one (transitively), numbered again
    from 0 in order of first appearance: the merge pass's classes (the sweep's question after
    it, and the analysis's answer from the trace)."""
    parent = {k: k for k in labels}

    def root(k: int) -> int:
        while parent[k] != k:
            k = parent[k]
        return k

    for a, b in pairs:
        parent[root(b)] = root(a)
    roots = {r: i for i, r in enumerate(dict.fromkeys(root(k) for k in labels))}
    return [roots[root(k)] for k in labels]


def contention_classes(data: pd.DataFrame) -> dict[str, Any]:
    """The contention phase's classes: labels of the sampled lines (in order of their class's
    search), the shares, the noise of the one-line duration and the evidence numbers."""
    checks = data[data["pass"] == 1]
    merge = data[data["pass"] == 2]
    data = data[data["pass"] == 0]
    offsets: list[int] = []
    labels: list[int] = []
    shares = []
    disturbed = 0
    for k, (ref, frame) in enumerate(data.groupby("reference_offset_bytes", sort=False)):
        other = partner_shares(frame)
        disturbed += int((other > DISTURBED_SHARE).sum())
        shares.append(other.to_numpy(float))
        members = [int(ref)] + [int(o) for o, s in other.items() if s > SAME_SHARE]
        offsets += members
        labels += [k] * len(members)
    # the merge pass: class references that contend are one slice the search split
    label_of = dict(zip(offsets, labels, strict=True))
    pairs = [
        (label_of[int(ref)], label_of[int(o)])
        for ref, frame in merge.groupby("reference_offset_bytes", sort=False)
        for o, s in partner_shares(frame).items()
        if s > SAME_SHARE and int(o) in label_of and int(ref) in label_of
    ]
    labels = merged_labels(labels, pairs)
    merged_pairs = len(pairs)
    share = np.concatenate(shares) if shares else np.zeros(0)
    same, other = share[share > SAME_SHARE], share[share <= SAME_SHARE]
    # the spread of a launch's share around its group's median (robust SD: 1.4826 x MAD);
    # the first launch after the host's pause between searches may run slow, so not the spread
    # of the one-line launches
    dev = np.concatenate([g - np.median(g) for g in (same, other) if g.size])
    noise = 1.4826 * float(np.median(np.abs(dev))) if dev.size else float("nan")
    decided = np.abs(share - SAME_SHARE) > DECIDED_SDS * noise
    # the checks: launch 1 (two lines of one class) should contend, launch 3 (two classes) not
    agree = total = 0
    for _, frame in checks.groupby("repetition"):
        f = contention_shares(frame).sort_values("order")
        partners = f[~f["self"]]["share"].to_numpy(float)
        if partners.size == 2:
            agree += int(partners[0] > SAME_SHARE) + int(partners[1] <= SAME_SHARE)
            total += 2
    sizes = np.bincount(labels) if labels else np.zeros(0, int)
    return {
        "offsets": np.asarray(offsets, np.int64),
        "labels": np.asarray(labels, int),
        "classes": int(sizes.size),
        "sizes": sizes,
        "launches": int(len(data) + len(checks) + len(merge)),  # every launch, one-line too
        "merged": merged_pairs,  # pairs of class references that contend (merge pass)
        "same_median": float(np.median(same)) if same.size else None,
        "other_median": float(np.median(other)) if other.size else None,
        "same_min": float(same.min()) if same.size else None,
        "other_max": float(other.max()) if other.size else None,
        "noise": noise,
        "decided": float(np.mean(decided)) if share.size else 0.0,
        "checks": total,
        "checks_agree": agree,
        "disturbed": disturbed,
    }


def _contention_slices(c: dict[str, Any]) -> dict[str, Any]:
    """The slice count from the contention classes, or undetermined with the reason."""
    lines = int(c["sizes"].sum())
    singles = int((c["sizes"] == 1).sum())
    fmt = lambda v: "none" if v is None else f"{v:.3f}"  # noqa: E731
    evidence = (
        f"{lines} lines in {c['classes']} classes of {int(c['sizes'].min())}-"
        f"{int(c['sizes'].max())} lines ({singles} of one line) from {c['launches']} launches; "
        f"share of the one-line duration: same slice median {fmt(c['same_median'])} (lowest "
        f"{fmt(c['same_min'])}), other slices median {fmt(c['other_median'])} (highest "
        f"{fmt(c['other_max'])}); spread of a share around its group's median {c['noise']:.3f} "
        "(robust SD); "
        f"{c['decided']:.1%} of the launches lie over {DECIDED_SDS:g} SDs from {SAME_SHARE}; "
        f"merge pass: {c.get('merged', 0)} pairs of class references contend (merged); "
        f"checks: {c['checks_agree']} of {c['checks']} launches as the classes predict; "
        f"{c['disturbed']} lines placed on disturbed launches only (over {DISTURBED_SHARE} of "
        "the one-line time)"
    )
    method = (
        "slice contention: every warp of a full grid hammers two lines with atomics; lines "
        f"whose launch takes over {SAME_SHARE} of the time of the reference line alone share "
        "its slice; the count of classes over a random sample of the region's lines"
    )
    if c["same_median"] is None:
        return undetermined(f"no two lines contend: {evidence}")
    if c["classes"] == 1:
        return undetermined(
            "every line contends with every other: what limits the atomics is not a slice's "
            f"unit; {evidence}"
        )
    if c["disturbed"] > MAX_CHECK_MISSES * lines:
        return undetermined(
            f"{c['disturbed']} lines, over {MAX_CHECK_MISSES:.0%}, were placed on disturbed "
            f"launches only: a two-line launch cannot take longer than one line alone; {evidence}"
        )
    if c["checks"] and c["checks_agree"] < (1 - MAX_CHECK_MISSES) * c["checks"]:
        return undetermined(
            f"{c['checks'] - c['checks_agree']} of {c['checks']} check launches disagree with "
            f"the classes (over {MAX_CHECK_MISSES:.0%}): they are not slices; {evidence}"
        )
    if singles > MAX_SINGLETON_SHARE * lines:
        return undetermined(
            f"{singles} classes hold one line, over {MAX_SINGLETON_SHARE:.0%} of the lines: the "
            f"sample may not meet every slice; {evidence}"
        )
    return quantity(
        c["classes"],
        unit=None,
        confidence=c["decided"]
        * (1 - singles / lines)
        * (1 - c["disturbed"] / lines)
        * (c["checks_agree"] / c["checks"] if c["checks"] else 1.0),
        method=method,
        evidence=evidence,
    )


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
    if not split and len(rows) >= 2:
        # first touches after a flush come from each line's home: with two partitions every SM
        # reads the lines of the other one far, so SMs that all read every line at one level
        # (their slices' spread aside) share one partition
        why = (
            f"none of the {len(rows)} SMs' first-touch latencies split into near and far "
            "groups: every SM reads every line near"
        )
        one = quantity(
            1,
            unit=None,
            confidence=0.8,
            method="per SM: Otsu split of its lines' first-touch L2-hit latencies into near and "
            "far; with none split, one partition",
            evidence=why,
        )
        return {
            "partition_function": not_applicable(f"one partition: {why}"),
            "partitions": one,
        }, []
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
    matrix = latency_matrix(walks(data), 0)[assign["offsets_bytes"]]
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


def _classes_by_partition(c: dict[str, Any], function: dict[str, Any] | None) -> dict[str, Any]:
    """How the contention classes fall on the partition function found from the latencies (an
    independent check: a slice lies in one partition): the classes whose lines all give the
    function one value, and how many classes give each value."""
    bits = (function or {}).get("value")
    if bits is None:
        return {}
    mask = sum(1 << b for b in bits)
    parity = np.array([bin(int(o) & mask).count("1") & 1 for o in c["offsets"]])
    labels = np.asarray(c["labels"])
    values = [set(parity[labels == k].tolist()) for k in range(c["classes"])]
    return {
        "classes_in_one_partition": sum(len(v) == 1 for v in values),
        "classes_per_partition": [sum(v == {0} for v in values), sum(v == {1} for v in values)],
    }


def _matrix_and_fits(doc, l2, matrix, labels, kind, rows, far_sets) -> dict[str, Any]:
    """The SM x column matrix (columns: `kind` "slice" classes or single "line"s, `labels` per
    column of `matrix`), the additive fits and the far penalty, into `doc`."""
    sms = len(matrix)
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
        "offsets_bytes": matrix.columns.to_numpy(dtype=np.int64).tolist(),
        "column": np.asarray(labels).tolist(),
    }
    doc["elements"] = {"l2": l2}
    return doc


def analyse(
    data: pd.DataFrame, *, provenance: dict[str, Any], inputs: dict | None = None
) -> dict[str, Any]:
    """The `l2_slices` result document for one device; with the footprint sweep's trace and
    result (`inputs` l2_trace and l2), what a partition holds (`partition_capacity`)."""
    doc = _slice_map(data, provenance)
    l2 = doc["elements"]["l2"]
    l2.update(footprint_by_partition(inputs, l2.get("partition_function")))
    return doc


def _slice_map(data: pd.DataFrame, provenance: dict[str, Any]) -> dict[str, Any]:
    doc = header("l2_slices", provenance)
    doc["path"] = "cg"
    doc["clocks_before"] = provenance.get("clocks_before")
    doc["clocks_after"] = provenance.get("clocks_after")
    contention = data[data["phase"] == CONTENTION_PHASE]
    data = walks(data)
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
    if not contention.empty:
        c = contention_classes(contention)
        l2["slices"] = _contention_slices(c)
        doc["contention"] = {
            "classes": c["classes"],
            "lines_per_class": c["sizes"].tolist(),
            "launches": c["launches"],
        } | _classes_by_partition(c, l2.get("partition_function"))
        if (
            l2["slices"].get("value") is not None
            and "classes_in_one_partition" in doc["contention"]
        ):
            k = doc["contention"]
            l2["slices"]["evidence"] += (
                f"; cross-check with the partition function: {k['classes_in_one_partition']} of "
                f"{c['classes']} classes lie inside one partition ({k['classes_per_partition']})"
            )
        add_slice_elements(l2, c["offsets"], c["labels"], doc["device_info"])
        pos = pd.Index(offsets).get_indexer(c["offsets"])
        if l2["slices"].get("value") is not None and (pos >= 0).all():
            # the matrix of the sampled lines, a column per slice
            far_sets = {sm: f[pos] for sm, f in far_sets.items()}
            sampled = matrix[c["offsets"]]
            return _matrix_and_fits(doc, l2, sampled, c["labels"], "slice", rows, far_sets)
        return _matrix_and_fits(doc, l2, matrix, np.arange(lines), "line", rows, far_sets)
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
        return _matrix_and_fits(doc, l2, matrix, c["labels"], "slice", rows, far_sets)
    l2["slices"] = undetermined(f"the latency classes are not separated: {evidence}")
    return _matrix_and_fits(doc, l2, matrix, np.arange(lines), "line", rows, far_sets)
