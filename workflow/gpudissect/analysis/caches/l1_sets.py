"""Ways, sets, index function and replacement policy of the L1 from eviction-set tests
(`experiments.l1_sets`), and the capacity of a cyclic walk at every stride predicted from them
beside the one measured.

Every decision is taken again from the trace: the hit/miss threshold from the calibration walk;
an access missed when its latency is above it; an eviction-set or membership test overloaded a
set when every timed pass of its cyclic walk missed (`l1_decisions.overloaded`; a trace of the
older form, one timed target per test, reads as that target's miss). The index function is solved as
a linear map over GF(2) (Maurice et al., RAID 2015): each probe vector v says "x0 ^ v is in x0's
set" (M v = 0) or not (M v != 0). The members span a kernel K; the map is linear when no
non-member lies in K (each one that does is an inconsistent equation); then the index matrix is
a basis of K's annihilator over the window's address bits above the line (unique up to an
invertible relabelling of the set bits), and the sets are 2^rank.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from ..common import gf2
from ..common.result import header, quantity, undetermined
from .l1_decisions import evicted, hit_threshold, walk_hits

REDUCTION = ("pool", "reduce", "confirm")
VERIFY = (
    "the whole set, walked cyclically, misses in every timed pass in every test; the set minus "
    "any one line never does"
)


def test_decisions(data: pd.DataFrame) -> pd.Series:
    """Per test (of the rows given, with `evicted`): overloaded, i.e. every timed pass of
    `set_lines` records has a miss (`l1_decisions.overloaded`, vectorised); a test of one timed
    access reads as that access's miss."""
    if data.empty:
        return pd.Series(dtype=bool)
    lines = data["set_lines"].clip(lower=1).astype(np.int64)
    passes = data["access"].astype(np.int64) // lines
    per_pass = data["evicted"].groupby([data["test"], passes]).any()
    return per_pass.groupby(level=0).all()


def _threshold(data: pd.DataFrame) -> float | None:
    """From the calibration: second touches (`detail` 0, L1 hits) against the same lines after
    a walk larger than the L1 (`detail` 1, L1 misses the L2 serves). A trace with one
    calibration test only (its first touches against its second) is read the way it was
    taken."""
    cal = data[data["kind"] == "calibrate"]
    if cal.empty:
        return None
    if set(cal["detail"].astype(int)) == {0, 1}:
        hits = cal.loc[cal["detail"] == 0, "latency_cycles"].to_numpy()
        misses = cal.loc[cal["detail"] == 1, "latency_cycles"].to_numpy()
        return hit_threshold(hits, misses)
    n = int(cal["set_lines"].iloc[0])
    lat = cal.sort_values("access")["latency_cycles"].to_numpy()
    return hit_threshold(lat[n:], lat[:n])


def eviction_sets(data: pd.DataFrame) -> list[dict[str, Any]]:
    """Per target: the lines of its reduced set, the ways they show (a minimal overloaded set
    holds W + 1 lines; an eviction set of the older form, timed target apart, W) and whether
    the verification held."""
    out = []
    for j, rows in data[data["kind"].isin(["verify_full", "verify_drop"])].groupby("subject"):
        full = rows[rows["kind"] == "verify_full"]
        drop = rows[rows["kind"] == "verify_drop"]
        decided = test_decisions(rows)
        lines = int(full["set_lines"].iloc[0]) if len(full) else None
        walked = bool(len(full)) and full.groupby("test").size().min() >= lines
        out.append(
            {
                "target": int(j),
                "address_bytes": int(full["address_bytes"].iloc[0]) if len(full) else None,
                "lines": lines,
                "ways": None if lines is None else lines - int(walked),
                "verified": bool(
                    len(full)
                    and decided[full["test"].unique()].all()
                    and not decided[drop["test"].unique()].any()
                ),
                "reduction_tests": int(
                    data.loc[
                        (data["subject"] == j) & data["kind"].isin(REDUCTION), "test"
                    ].nunique()
                ),
            }
        )
    return out


def _ways(sets: list[dict[str, Any]]) -> dict[str, Any]:
    sizes = [s["ways"] for s in sets if s["verified"]]
    if not sizes:
        return undetermined("no eviction set passed its verification (" + VERIFY + ")")
    values, counts = np.unique(sizes, return_counts=True)
    w = int(values[np.argmax(counts)])
    return quantity(
        [w],
        unit="lines",
        confidence=float(counts.max()) / len(sets),
        method="minimal sets whose cyclic walk overloads one set (W + 1 lines), found by group "
        "testing (Vila et al., S&P 2019); " + VERIFY,
        evidence=f"verified sets showing {sizes} ways at {len(sizes)} of {len(sets)} targets",
    )


def equations(data: pd.DataFrame) -> pd.DataFrame:
    """One row per probe vector and target: member when every test of it overloaded a set."""
    rows = data[data["kind"].isin(["member", "member_check"])]
    if rows.empty:
        return pd.DataFrame(columns=["subject", "vector", "member", "tests"])
    decided = test_decisions(rows)
    tests = rows.groupby("test")[["subject", "detail"]].first()
    tests["member"] = decided.reindex(tests.index).to_numpy()
    g = tests.groupby(["subject", "detail"])["member"]
    out = pd.DataFrame({"member": g.all(), "tests": g.size()}).reset_index()
    return out.rename(columns={"detail": "vector"})


def solve(eq: pd.DataFrame, bits: list[int]) -> dict[str, Any]:
    """The linear map over `bits` that the equations allow, and how many contradict it."""
    kernel = gf2.Basis(int(v) for v in eq.loc[eq["member"], "vector"])
    outside = eq[~eq["member"]]
    inconsistent = int(sum(kernel.contains(int(v)) for v in outside["vector"]))
    rank = len(bits) - kernel.dim
    return {
        "kernel": kernel,
        "rank": rank,
        "masks": gf2.annihilator(kernel.vectors, bits),
        "inconsistent": inconsistent,
        "equations": len(eq),
        "non_members": len(outside),
    }


def _bit_list(masks: list[int]) -> list[int] | None:
    """The address bits of the index when each row (reduced) is a single bit; else None."""
    if all(m & (m - 1) == 0 for m in masks):
        return sorted(m.bit_length() - 1 for m in masks)
    return None


def linear_labels(masks: list[int]):
    return lambda addresses: gf2.labels(masks, addresses)


def modulo_labels(sets: int, line_bytes: int):
    return lambda addresses: (np.asarray(addresses) // line_bytes) % sets


def predict_capacity(labels, ways: int, stride_lines: int, line_bytes: int, top: int) -> int:
    """Largest N <= top such that a cyclic walk of N lines at `stride_lines` from the window's
    first line puts at most `ways` lines in every set (`labels`: addresses -> set labels)."""
    addresses = np.arange(top + 1, dtype=np.int64) * stride_lines * line_bytes
    lab = labels(addresses)
    seen: dict[int, int] = {}
    for i, s in enumerate(lab.tolist()):
        seen[s] = seen.get(s, 0) + 1
        if seen[s] > ways:
            return i
    return top


def stride_table(data: pd.DataFrame, threshold: float, tolerance: int) -> pd.DataFrame:
    """Per stride: the largest footprint measured to hit (every larger one tested missed)."""
    rows = []
    walks = data[data["kind"] == "stride"]
    for k, g in walks.groupby("subject"):
        hits = {
            int(n): walk_hits(t["latency_cycles"], threshold, tolerance)
            for n, t in g.groupby("detail")
        }
        top = max(hits)
        missing = [n for n, h in hits.items() if not h]
        below = [n for n, h in hits.items() if h and (not missing or n < min(missing))]
        monotone = all(not h for n, h in hits.items() if missing and n >= min(missing))
        rows.append(
            {
                "stride_lines": int(k),
                "measured_lines": max(below) if below else 0,
                "top_lines": top,
                "walks": len(hits),
                "monotone": monotone,
            }
        )
    return pd.DataFrame(rows)


def _policy(data: pd.DataFrame) -> dict[str, Any]:
    rows = data[data["kind"] == "policy"]
    if rows.empty:
        return undetermined("no policy test ran (too few lines of one set known)")
    ways = int(rows["set_lines"].iloc[0])
    frac = rows.groupby(["subject", "detail"])["evicted"].mean()
    victims = {}
    for seq in (0, 1):
        f = frac.loc[seq] if seq in frac.index.get_level_values(0) else pd.Series(dtype=float)
        # the victim is gone in at least 3 of 4 repeats, every other line in at most 1 of 4:
        # one timing outlier (a hit read above the threshold) does not hide the victim
        strong = f[f >= 0.75]
        victims[seq] = (
            int(strong.index[0]) if len(strong) == 1 and (f <= 0.25).sum() == len(f) - 1 else None
        )
    per_test = rows.groupby("test")["evicted"].first()
    # sequence 2 (where run): the share of tests in which a_0, hit once, was gone after W new
    # lines; None, or None when it is neither clearly gone nor clearly kept
    scan = float(frac.loc[(2, 0)]) if (2, 0) in frac.index else None
    evidence = (
        "fraction of tests in which a_i was gone, by position: fill "
        f"{frac.loc[0].round(2).tolist()}"
        f"; fill with a_0 hit again {frac.loc[1].round(2).tolist()}"
        + ("" if scan is None else f"; a_0 hit again, then W new lines: gone in {scan:.2f}")
        + f" ({len(per_test)} tests)"
    )
    method = (
        "flush the set with W lines (twice), fill a_0..a_{W-1} (again a_0 in the second "
        "sequence), bring a_W, time one a_i: LRU loses a_0 then a_1; FIFO a_0 both times; "
        "tree-PLRU a_0 then the line its tree points to; random: no fixed victim. Third "
        "sequence: fill, a_0 again, W new lines, time a_0: LRU, FIFO and tree-PLRU lose it; "
        "SRRIP with hit priority (Jaleel et al., ISCA 2010), which loses a_0 then a_1 in the "
        "first two, keeps it"
    )
    if victims[0] is None or victims[1] is None:
        spread = frac.loc[0]
        # share of the fill tests that lost some line, spread over the positions
        conf = float(min(spread.sum(), 1.0))
        if spread.sum() >= 0.5 and spread.max() < 0.75:
            return quantity("random", unit=None, confidence=conf, method=method, evidence=evidence)
        return quantity("non-lru", unit=None, confidence=conf, method=method, evidence=evidence)
    if victims[0] == 0 and victims[1] == 1:
        name = "lru"
    elif victims[0] == 0 and victims[1] == 0:
        name = "fifo"
    elif victims == {0: 0, 1: _plru_victim(ways)}:
        name = "plru"
    else:
        name = "non-lru"
    kept = scan is not None and scan <= 0.25
    if kept:
        name = "srrip" if name == "lru" else "non-lru"
    elif scan is not None and scan < 0.75 and name != "non-lru":
        name = "non-lru"  # a_0 neither clearly kept nor clearly lost after the new lines
    # how sharply the tests single out the victims: 1 - mean distance from the 0/1 pattern
    expect = pd.Series(
        [float(not kept) if seq == 2 else float(i == victims[seq]) for seq, i in frac.index],
        index=frac.index,
        dtype=float,
    )
    conf = 1 - float((frac - expect).abs().mean())
    return quantity(name, unit=None, confidence=conf, method=method, evidence=evidence)


def _plru_victim(ways: int) -> int | None:
    """The line tree-PLRU replaces in the second sequence (a_0..a_{W-1} filled in ways 0..W-1,
    a_0 hit again), or None for a way count that is not a power of two."""
    if ways < 2 or ways & (ways - 1):
        return None
    bits = [0] * ways  # node i's bit: 0 = the victim is on the left

    def touch(way: int) -> None:
        node, lo, hi = 1, 0, ways
        while hi - lo > 1:
            mid = (lo + hi) // 2
            left = way < mid
            bits[node] = 1 if left else 0  # point away from the way used
            node, lo, hi = (2 * node, lo, mid) if left else (2 * node + 1, mid, hi)

    for w in range(ways):
        touch(w)
    touch(0)
    node, lo, hi = 1, 0, ways
    while hi - lo > 1:
        mid = (lo + hi) // 2
        node, lo, hi = (2 * node, lo, mid) if bits[node] == 0 else (2 * node + 1, mid, hi)
    return lo


def analyse(
    data: pd.DataFrame, *, provenance: dict[str, Any], inputs: dict | None = None
) -> dict[str, Any]:
    """The `l1_sets` result document for one device."""
    doc = header("l1_sets", provenance)
    doc["path"] = "ca"
    carve = sorted(set(data["carveout_pct"].astype(int))) if "carveout_pct" in data else []
    doc["carveout_pct"] = None if not carve or carve == [-1] else carve
    threshold = _threshold(data)
    l1: dict[str, Any] = {}
    doc["elements"] = {"l1d": l1}
    if threshold is None:
        reason = "no calibration walk separates L1 hits from misses" if len(data) else "empty trace"
        for q in ("ways_per_set", "sets", "set_index_bits", "index_kind", "index_masks", "policy"):
            l1[q] = undetermined(reason)
        doc["stride_validation"] = undetermined(reason)
        return doc
    data = data.assign(evicted=evicted(data["latency_cycles"], threshold))
    line_bytes = int(data["line_bytes"].iloc[0])
    window = int(data["window_bytes"].iloc[0])
    bits = list(range(line_bytes.bit_length() - 1, window.bit_length() - 1))
    doc["probed_bits"] = probed_bits(data, bits, provenance)
    doc["threshold_cycles"] = quantity(
        threshold,
        unit="cycles",
        confidence=1.0,
        method="midpoint of the median L1 hit (a line's second touch) and L1 miss served by "
        "the L2 (the line again after a walk larger than the L1) of the calibration lines",
        evidence=f"{int((data['kind'] == 'calibrate').sum())} timed loads",
    )
    sets = eviction_sets(data)
    doc["eviction_sets"] = sets
    l1["ways_per_set"] = ways_q = _ways(sets)
    eq = equations(data)
    model = None
    if ways_q["value"] is None or eq.empty:
        why = ways_q.get("undetermined") or "no membership probes in the trace"
        for q in ("sets", "set_index_bits", "index_kind", "index_masks"):
            l1[q] = undetermined(why)
        doc["index_function"] = undetermined(why)
    else:
        model = _index(doc, l1, solve(eq, bits), bits, ways_q["value"][0], data, eq)
    l1["policy"] = _policy(data) if ways_q["value"] is not None else undetermined("no ways")
    params = provenance.get("config", {}).get("parameters", {})
    tolerance = int(params.get("miss_tolerance", 2))
    data_lines = _data_lines(inputs, doc["carveout_pct"], params.get("shared_buffer_bytes"))
    doc["stride_validation"] = _validation(
        data,
        threshold,
        tolerance,
        model,
        line_bytes,
        data_lines,
        float(params.get("capacity_tolerance", 0.05)),
        l1.get("sets", {}).get("value"),
    )
    doc["tests"] = {k: int(v) for k, v in data.groupby("kind")["test"].nunique().items()}
    doc["launches"] = int(data["point"].nunique())
    return doc


def probed_bits(data: pd.DataFrame, bits: list[int], provenance: dict) -> dict[str, Any]:
    """The address bits the probes and stride walks reached (those of the window's offsets)
    and why the ones above were not (from the config the trace carries): a window aligned to
    its size W takes 2 W of memory to place."""
    window = 1 << (bits[-1] + 1)
    params = provenance.get("config", {}).get("parameters", {})
    bound = params.get("max_probe_window_bytes")
    if params.get("probe_window_bytes") != "auto":
        why = (
            f"the window of {window} bytes the config fixed (window_bytes or "
            "probe_window_bytes; probe_window_bytes: auto sizes it from the device's memory)"
        )
    elif bound is not None and window >= int(bound):
        why = f"the window of {window} bytes is bounded by max_probe_window_bytes ({bound})"
    else:
        reserve = params.get("memory_reserve_bytes")
        why = (
            f"a window of {2 * window} bytes, aligned to its size, takes {4 * window} bytes to "
            f"place: more than the device's memory less memory_reserve_bytes ({reserve}), or "
            "the device reports no memory size (probe_window_bytes: auto)"
        )
    return {
        "value": [bits[0], bits[-1]],
        "unit": "address bits",
        "not_probed": f"bits {bits[-1] + 1} and above: {why}",
    }


def modulo_fit(data: pd.DataFrame, eq: pd.DataFrame) -> dict[str, Any] | None:
    """The set as the line number modulo S: S is the gcd of the distances (in lines) from each
    probed member to its target; None when the members give no S > 1."""
    line_bytes = int(data["line_bytes"].iloc[0])
    full = data[data["kind"] == "verify_full"].groupby("subject")["address_bytes"].first()
    probes = data[data["kind"].isin(["member", "member_check"])]
    probes = probes.groupby(["subject", "detail"])["address_bytes"].first().reset_index()
    probes = probes.merge(eq, left_on=["subject", "detail"], right_on=["subject", "vector"])
    probes = probes[probes["subject"].isin(full.index)]
    if probes.empty:
        return None
    dist = (probes["address_bytes"] - probes["subject"].map(full)) // line_bytes
    s = (
        int(np.gcd.reduce(np.abs(dist[probes["member"]].to_numpy())))
        if probes["member"].any()
        else 0
    )
    if s <= 1:
        return None
    bad = int(((dist % s == 0) & ~probes["member"]).sum())
    return {
        "sets": s,
        "inconsistent": bad,
        "members": int(probes["member"].sum()),
        "non_members": int((~probes["member"]).sum()),
    }


def _modulo(doc, l1, data, eq, ways, reason):
    fit = modulo_fit(data, eq)
    if fit is None or fit["inconsistent"]:
        why = (
            "no modulus fits either"
            if fit is None
            else (
                f"nor does line mod {fit['sets']} ({fit['inconsistent']} non-members at a multiple)"
            )
        )
        for q in ("sets", "set_index_bits", "index_kind", "index_masks"):
            l1[q] = undetermined(f"{reason}; {why}")
        return None
    s = fit["sets"]
    evidence = (
        f"gcd of the distances (lines) of {fit['members']} probed members from their "
        f"targets is {s}; none of {fit['non_members']} non-members lies at a multiple"
    )
    method = "set = line number mod S, S the gcd of member distances"
    # the gcd of m random multiples of S is a multiple p S with probability about p^-m
    conf = 1 - sum(p ** -float(fit["members"]) for p in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29))
    doc["index_function"]["modulo"] = quantity(
        s, unit="sets", confidence=conf, method=method, evidence=evidence
    )
    l1["sets"] = quantity(s, unit="sets", confidence=conf, method=method, evidence=evidence)
    l1["set_index_bits"] = undetermined(f"not bit-defined: the set is the line number mod {s}")
    l1["index_kind"] = quantity(
        "modulo", unit=None, confidence=conf, method=method, evidence=evidence
    )
    l1["index_masks"] = undetermined(f"not linear: the set is the line number mod {s}")
    return modulo_labels(s, int(data["line_bytes"].iloc[0])), ways


def _index(doc, l1, sol, bits, ways, data, eq):
    n_eq, bad = sol["equations"], sol["inconsistent"]
    masks = [f"{m:#x}" for m in sol["masks"]]
    evidence = (
        f"{n_eq} probe equations over address bits {bits[0]}-{bits[-1]}: "
        f"{n_eq - sol['non_members']} members spanning a kernel of dimension "
        f"{sol['kernel'].dim}; {sol['non_members']} non-members, {bad} of them in that span"
    )
    method = "x0 ^ v in x0's set iff M v = 0 (Maurice et al., RAID 2015), solved over GF(2)"
    if bad:
        reason = f"not linear: {bad} of {sol['non_members']} non-member equations lie in the "
        reason += "span of the members (a linear map would put them in the set)"
        doc["index_function"] = {"linear": False, **undetermined(reason), "evidence": evidence}
        return _modulo(doc, l1, data, eq, ways, reason)
    rank = sol["rank"]
    # a missed kernel dimension would have made each random non-member a member with
    # probability 2^-rank; the chance that all of them missed it
    conf = 1 - (1 - 2.0**-rank) ** max(sol["non_members"], 0) if rank < 60 else 0.0
    doc["index_function"] = {
        "linear": True,
        "masks": quantity(
            masks,
            unit="address masks",
            confidence=conf,
            method=method + ": a basis of the kernel's annihilator, unique up to relabelling",
            evidence=evidence,
        ),
        "rank": rank,
        "kernel": [f"{v:#x}" for v in sol["kernel"].vectors],
    }
    l1["sets"] = quantity(
        2**rank, unit="sets", confidence=conf, method=method + ": 2^rank", evidence=evidence
    )
    listed = _bit_list(sol["masks"])
    # the index in the topology's terms (a profile's `index:`): its kind and its XOR masks
    l1["index_kind"] = quantity(
        "bits" if listed is not None else "xor",
        unit=None,
        confidence=conf,
        method=method + ": bits when every mask is one bit, else xor",
        evidence=evidence,
    )
    l1["index_masks"] = quantity(
        masks,
        unit="address masks",
        confidence=conf,
        method=method + ": a basis of the kernel's annihilator, unique up to relabelling",
        evidence=evidence,
    )
    if listed is None:
        l1["set_index_bits"] = undetermined(
            f"not bit-defined: the index is hashed (XOR of several bits), masks {masks} "
            "(index_function)"
        )
    else:
        l1["set_index_bits"] = quantity(
            listed, unit="address bits", confidence=conf, method=method, evidence=evidence
        )
    return linear_labels(sol["masks"]), ways


def _data_lines(inputs, carveout, shared_buffer_bytes) -> dict[str, Any] | None:
    """The L1 size `l1_size` measured at this sweep's carveout and shared buffer, in bytes, with
    where it comes from; None without that document or series."""
    source = (inputs or {}).get("l1_size")
    if not source:
        return None
    with open(source) as f:
        doc = json.load(f)
    want = None if carveout is None else carveout[0]
    for series in doc.get("series", []):
        c = series.get("carveout_pct")
        if want is not None and c is not None and c != want:
            continue
        if shared_buffer_bytes is not None and series.get("shared_buffer_bytes") not in (
            None,
            shared_buffer_bytes,
        ):
            continue
        size = (series.get("l1d") or {}).get("size_bytes") or {}
        if size.get("value") is not None:
            return {
                "bytes": int(size["value"]),
                "carveout_pct": c,
                "shared_buffer_bytes": series.get("shared_buffer_bytes"),
            }
    return None


def _validation(
    data,
    threshold,
    tolerance,
    model,
    line_bytes,
    data_lines=None,
    capacity_tolerance=0.05,
    sets=None,
) -> dict[str, Any]:
    """Per stride the measured capacity beside the prediction: the first walk that puts more
    than W lines in one set (exact), or, where no set overflows before the L1's data array is
    full (`data_lines`, the L1 size `l1_size` measured at the same carveout and buffer), that
    size (within `capacity_tolerance` of it, at most `tolerance` lines above)."""
    table = stride_table(data, threshold, tolerance)
    if table.empty:
        return undetermined("no stride walks in the trace")
    cap = None if data_lines is None else data_lines["bytes"] // line_bytes
    rows = []
    for r in table.itertuples():
        pred, limit, agree = None, None, None
        if model is not None:
            pred = predict_capacity(model[0], model[1], r.stride_lines, line_bytes, r.top_lines)
            limit = "set"
            agree = pred == r.measured_lines
            if cap is not None and pred > cap:
                pred, limit = cap, "data"
                agree = cap * (1 - capacity_tolerance) <= r.measured_lines <= cap + tolerance
        rows.append(
            {
                "stride_lines": r.stride_lines,
                "stride_bytes": r.stride_lines * line_bytes,
                "measured_lines": r.measured_lines,
                "predicted_lines": pred,
                "limited_by": limit,
                "top_lines": r.top_lines,
                "monotone": bool(r.monotone),
                "agree": agree,
            }
        )
    out: dict[str, Any] = {"strides": rows, "miss_tolerance": tolerance}
    if data_lines is not None:
        out["data_lines"] = {**data_lines, "lines": cap, "source": "l1_size"}
    if model is None:
        out["agree"] = undetermined("no index model (linear or modulo) to predict from")
    else:
        good = sum(r["agree"] for r in rows)
        by = {k: [r for r in rows if r["limited_by"] == k] for k in ("set", "data")}
        evidence = (
            f"{good} of {len(rows)} strides agree; {sum(r['agree'] for r in by['set'])} of "
            f"{len(by['set'])} where a set overflows first (exact)"
        )
        if by["data"]:
            got = [r["measured_lines"] for r in by["data"]]
            evidence += (
                f"; {sum(r['agree'] for r in by['data'])} of {len(by['data'])} where no set "
                f"overflows before the data array holds the L1 size l1_size measured ({cap} "
                f"lines): {min(got)}-{max(got)} lines, within {capacity_tolerance:.0%} "
                f"below it and {tolerance} above"
            )
        sets_ways = "" if sets is None else f" (sets x ways: {sets * model[1]} lines)"
        out["agree"] = quantity(
            good == len(rows),
            unit=None,
            confidence=good / len(rows),
            method="largest cyclic walk that hits at each stride (bisection, at most "
            f"{tolerance} misses in the timed pass) against the first walk that puts more "
            "than W lines in one set under the index map, or the L1 size where the data "
            f"array fills first{sets_ways}",
            evidence=evidence,
        )
    return out


def figure_table(data: pd.DataFrame, doc: dict[str, Any]) -> pd.DataFrame:
    """Predicted beside measured capacity per stride (the figure draws it)."""
    v = doc.get("stride_validation") or {}
    rows = v.get("strides") or []
    cols = ["stride_lines", "measured_lines", "predicted_lines", "top_lines"]
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})
    t = pd.DataFrame(rows)[cols]
    return t.astype({"predicted_lines": "float64"})
