"""The `caches` result document: per memory element, stage 1's size, line, sector and latencies
(from `cache_stage1.json`) with stage 2's sets, ways, set-index bits and replacement policy
(from this trace, rules in `cache_structure` and `replacement`). Sees only traces and the
stage-1 result."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from ..common.result import not_applicable, quantity, undetermined
from . import cache_structure as cs
from . import replacement as rp
from .level_size import Classifier

STAGE1_KEYS = (
    "size_bytes",
    "line_bytes",
    "fetch_granularity_bytes",
    "sector_bytes",
    "hit_latency_cycles",
    "miss_latency_cycles",
    "miss_penalty_cycles",
)
STAGE2_KEYS = ("sets", "ways_per_set", "set_index_bits", "policy", "way_replacement_freq")
SETS_METHOD = (
    "fine-grained P-chase stage 2 (TPDS Sec. 4.2 step 3): arrays of C + k b bytes at stride b; "
    "the lines that start missing together at one k are one set (ways + 1 lines)"
)


def with_miss_band(c: Classifier, latency: np.ndarray) -> Classifier:
    """Add the upper edge of the miss band (outliers above it are not misses)."""
    slow = latency[c.slow(latency)]
    if slow.size < 8:
        return c
    level = float(np.median(slow))
    spread = 1.4826 * float(np.median(np.abs(slow - level)))
    ceiling = level + max(6.0 * spread, 0.25 * (level - c.hit_latency_cycles), 8.0)
    return Classifier(c.hit_latency_cycles, c.threshold_cycles, c.outlier_rate, ceiling)


def analyse_element(rows: pd.DataFrame) -> tuple[dict[str, Any], dict[str, Any]]:
    """(quantities, details for figures) of one cache from its stage-2 rows."""
    ref = rows[rows["phase"] == "reference"]
    sets_rows = rows[rows["phase"] == "sets"]
    b = int(ref["stride_bytes"].iloc[0])
    c_bytes = int(ref["array_bytes"].iloc[0])
    classifier = cs.reference_classifier(ref["latency_cycles"].to_numpy())
    classifier = with_miss_band(classifier, sets_rows["latency_cycles"].to_numpy(np.float64))
    q: dict[str, Any] = {}
    details: dict[str, Any] = {}
    table = cs.line_miss_table(sets_rows, classifier, b)
    details["misses_per_k"] = (
        table.assign(rate=table["sum"] / table["size"])
        .groupby("k")
        .agg(missing_lines=("missing", "sum"), lines=("line", "size"))
        .reset_index()
        .to_dict("list")
    )
    s = cs.find_sets(table, base_lines=c_bytes // b)
    ways = s.ways
    evidence = (
        f"C = {c_bytes} B, b = {b} B, k = 1..{s.last_k}; bursts (k: lines) "
        + ", ".join(f"{k}: {len(lines)}" for k, lines in s.bursts[:12])
        + (" ..." if len(s.bursts) > 12 else "")
        + f"; {len(s.joined)} new lines joined an overflowing set"
        + (f"; anomalies: {'; '.join(s.anomalies[:3])}" if s.anomalies else "")
    )
    if not s.complete:
        reason = (
            f"the sweep stopped at k = {s.last_k} before every line missed "
            f"({len(s.bursts)} sets found so far): raise max_extra_lines"
        )
        q["sets"] = q["ways_per_set"] = q["set_index_bits"] = undetermined(reason)
    elif sum(ways) * b != c_bytes or s.anomalies:
        reason = (
            f"the bursts do not make a set-associative cache of C: {sum(ways)} ways x {b} B "
            f"= {sum(ways) * b} B against C = {c_bytes} B ({evidence})"
        )
        q["sets"] = q["ways_per_set"] = q["set_index_bits"] = undetermined(reason)
    else:
        q["sets"] = quantity(
            len(ways), unit=None, confidence=1.0, method=SETS_METHOD, evidence=evidence
        )
        q["ways_per_set"] = quantity(
            ways,
            unit=None,
            confidence=1.0,
            method=SETS_METHOD + "; ways = burst size - 1 (unequal sets give unequal bursts)",
            evidence=evidence + f"; ways x b sum to {sum(ways) * b} B = C",
        )
        q["set_index_bits"] = _index_quantity(s, b, len(ways))
    details["bursts"] = [(k, list(lines)) for k, lines in s.bursts]
    policy, freq, det = _policy(rows, classifier, b)
    q["policy"], q["way_replacement_freq"] = policy, freq
    details |= det
    return q, details


def _index_quantity(s: cs.SetStructure, b: int, sets: int) -> dict[str, Any]:
    ib = cs.index_bits(s.labels, line_bytes=b, sets=sets)
    method = (
        "flip each address bit of every labelled line: a bit-defined index has exactly "
        "log2(sets) bits that always change the set and none that sometimes do"
    )
    ev = (
        f"bits tested {ib.tested_bits[0]}-{ib.tested_bits[-1]}; always change the set: "
        f"{ib.always}; sometimes: {sorted(set(ib.relevant) - set(ib.always))}"
    )
    if ib.bits is not None:
        return quantity(ib.bits, unit=None, confidence=1.0, method=method, evidence=ev)
    kind = {
        True: "the partition is XOR-linear: a hash (XOR) of address bits",
        False: "the partition is not XOR-linear: a table or non-linear mapping",
        None: "too few lines to test XOR linearity",
    }[ib.xor_linear]
    return undetermined(
        f"not bit-defined: the set depends on address bits {ib.relevant} ({len(ib.relevant)} "
        f"bits for {sets} sets); {kind} ({ev})"
    )


def _walks(rows: pd.DataFrame, classifier: Classifier, b: int, phase: str) -> list[rp.Walk]:
    out = []
    for _, grp in rows[rows["phase"] == phase].groupby("point", sort=True):
        grp = grp.sort_values("step")
        lat = grp["latency_cycles"].to_numpy()
        # served by a faster cache in front: this set never saw the access
        seen = lat >= 2 * classifier.hit_latency_cycles - classifier.threshold_cycles
        grp, lat = grp[seen], lat[seen]
        out.append(
            rp.Walk(
                lines=grp["address_bytes"].to_numpy() // b,
                missed=classifier.miss(lat),
                outlier=lat > classifier.ceiling_cycles,
            )
        )
    return out


def _policy(rows: pd.DataFrame, classifier: Classifier, b: int):
    a, bw = _walks(rows, classifier, b, "policy_a"), _walks(rows, classifier, b, "policy_b")
    if not a:
        reason = "no policy walk: stage 2 found no set of two or more ways"
        return undetermined(reason), undetermined(reason), {}
    ways = len(np.unique(a[0].lines)) - 1
    # premise: ways + 1 lines of one set walked cyclically miss at least once per cycle under
    # any policy (one of them is always absent); lines that mostly hit are not one set
    cycle = ways + 1
    after = np.concatenate([w.missed[cycle:] for w in a]) if a else np.zeros(0, bool)
    if after.size and after.mean() < 0.5 / cycle:
        reason = (
            f"the {cycle} lines the sets sweep grouped as one set do not overflow when walked "
            f"alone: {after.mean():.1%} of the accesses after the first cycle miss, where a set "
            f"of {ways} ways walked by {cycle} lines misses at least once a cycle "
            f"({1 / cycle:.1%}); they are not one set"
        )
        return undetermined(reason), undetermined(reason), {"ways": ways}
    checks = {}
    for name in rp.candidates(ways):
        ok_a, bad_a, n_a = rp.consistent(a, ways, name)
        ok_b, bad_b, n_b = rp.consistent(bw, ways, name)
        checks[name] = (ok_a and ok_b, bad_a + bad_b, n_a + n_b)
    fits = [n for n, (ok, _, _) in checks.items() if ok]
    summary = "; ".join(
        f"{n}: {bad}/{total} accesses disagree" for n, (_, bad, total) in checks.items()
    )
    period = rp.periodic(a[0].missed | a[0].outlier, ways + 1)
    rec = rp.reconstruct(a, ways)
    details = {"replaced_ways": rec.replaced[:96], "ways": ways, "period": period}
    method = (
        "cyclic walk over one set's ways + 1 lines and a walk re-reading its first line, from "
        "cold (TPDS Sec. 4.2 step 4); candidate policies run as hypotheses on the same line "
        "sequence"
    )
    freq = undetermined(
        f"{rec.misses} reconstructed replacements ({rec.inconsistent} contradicting accesses); "
        f"need >= {rp.MIN_MISSES} and at most {rp.MAX_INCONSISTENT:.0%} contradictions"
    )
    consistent_rec = rec.misses >= rp.MIN_MISSES and rec.inconsistent <= rp.MAX_INCONSISTENT * (
        rec.misses + rec.inconsistent
    )
    p_uniform = rp.uniform_p_value(rec.counts)
    if consistent_rec:
        n = rec.misses
        se = np.sqrt(rec.frequencies * (1 - rec.frequencies) / n)
        freq = quantity(
            [round(float(f), 4) for f in rec.frequencies],
            unit=None,
            confidence=float(1.0 - 2.0 * se.max()),
            method="TPDS Fig. 11: each miss's victim is the next missed line (one of the ways + 1 "
            "lines is absent at a time); ways labelled in cold-fill order",
            evidence=f"{n} replacements over {len(a)} cold walks; counts {rec.counts.tolist()}; "
            f"chi-square against uniform p={p_uniform:.2g}; {rec.inconsistent} contradicting "
            "accesses",
        )
    evidence = f"{ways} ways; {summary}; cyclic walk " + (
        f"periodic (period {period} accesses)" if period else "aperiodic"
    )
    if len(fits) == 1:
        q = quantity(fits[0], unit=None, confidence=1.0, method=method, evidence=evidence)
        return q, freq, details
    if len(fits) > 1:
        return (
            undetermined(f"the walks cannot separate {fits} ({evidence})"),
            freq,
            details,
        )
    if period is not None:
        return (
            quantity("non-lru", unit=None, confidence=0.9, method=method, evidence=evidence),
            freq,
            details,
        )
    if not consistent_rec:
        return (
            undetermined(
                f"aperiodic, no candidate fits, and too few consistent replacements to "
                f"estimate way frequencies ({evidence})"
            ),
            freq,
            details,
        )
    kind = "random" if p_uniform > 0.01 else "non-lru"
    return (
        quantity(
            kind,
            unit=None,
            confidence=float(1 - p_uniform) if kind == "non-lru" else float(p_uniform),
            method=method + "; aperiodic misses: per-way replacement frequencies, chi-square "
            "against uniform",
            evidence=evidence + f"; uniform p={p_uniform:.2g}",
        ),
        freq,
        details,
    )


def analyse(data: pd.DataFrame, *, provenance: dict, inputs: dict | None = None) -> dict:
    """The `caches` result document for one device."""
    stage1: dict = {}
    source = (inputs or {}).get("cache_stage1")
    if source:
        with open(source) as f:
            stage1 = json.load(f)
    elements: dict[str, Any] = {}
    details: dict[str, Any] = {}
    measured = set()
    if len(data):
        for (path, level, element), rows in data.groupby(["path", "level", "element"], sort=False):
            q, det = analyse_element(rows)
            elements[element] = {"path": path, "level": int(level)} | q
            details[element] = det
            measured.add(element)
    for name, el in stage1.get("elements", {}).items():
        entry = elements.setdefault(name, {"path": el.get("path"), "level": el.get("level")})
        for k in STAGE1_KEYS:
            if k in el:
                entry[k] = el[k]
        if el.get("served_by"):
            entry["served_by"] = el["served_by"]
        if name not in measured:
            reason = el.get("note") or (
                "stage 2 did not run on this cache (its path is disabled in caches.paths, or "
                "stage 1 left its size or line undetermined)"
            )
            unset = not_applicable if el.get("served_by") else undetermined
            for k in STAGE2_KEYS:
                entry.setdefault(k, unset(reason))
    for el in elements.values():
        if el.get("served_by"):  # stage 1 found no cache of its own on the path
            for k in STAGE1_KEYS:
                lacks = f"the {el.get('path')} path has no cache of its own"
                el.setdefault(k, not_applicable(lacks))
        for k in STAGE1_KEYS:
            el.setdefault(k, undetermined("not in the stage-1 result"))
    return {
        "device": provenance["device"],
        "analysis": "caches",
        "trace": {k: provenance.get(k) for k in ("git_commit", "config_hash", "created_utc")},
        "device_info": provenance.get("device_info", {}),
        "backend": provenance.get("backend"),
        "carveout_pct": stage1.get("carveout_pct"),
        "elements": elements,
        "details": details,
        "naming_rule": stage1.get("naming_rule"),
    }
