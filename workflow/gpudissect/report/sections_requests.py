"""Report sections of the outstanding-request families (Lashgar et al.): numbers from the result
document; the paper's values (config/papers/lashgar.yaml) only as the comparison column."""

from __future__ import annotations

import itertools
from functools import cache
from typing import Any

from gpudissect import yamlio

from ..datafiles import paper_file
from .sections import conf

PAPER_FILE = paper_file("lashgar.yaml")


@cache
def _paper() -> dict[str, Any]:
    if not PAPER_FILE.is_file():
        return {}
    return yamlio.safe_load(PAPER_FILE.read_text()) or {}


def paper_values(doc: dict[str, Any]) -> dict[str, Any]:
    """The paper's values for the document's GPU (by device name), or {}."""
    name = doc.get("device_info", {}).get("name")
    return _paper().get("gpus", {}).get(name, {})


def _q(q: dict[str, Any] | None) -> str:
    if not q:
        return "—"
    if q.get("value") is None:
        return f"undetermined: {q.get('undetermined', 'no reason recorded')}{_bounds(q)}"
    v = q["value"]
    rng = q.get("range")
    extra = f" (consistent: {rng[0]}–{rng[1]})" if rng and rng[0] != rng[1] else ""
    if q.get("at_most") is not None and not extra:
        extra = f" (at least {q.get('at_least', v)}, at most {q['at_most']})"
    return f"**{v}**{extra}"


def _bounds(q: dict[str, Any]) -> str:
    """' (at least X, at most Y)' of a quantity that carries bounds; '' without."""
    if "at_least" not in q:
        return ""
    low = q["at_least"]
    if isinstance(low, dict):  # by table model
        low = ", ".join(f"{v} under {k.upper()}" for k, v in low.items())
    high = q.get("at_most")
    return f" (at least {low}; at most {high if high is not None else 'not bounded'})"


def _cite(p: dict[str, Any] | None) -> str:
    if not p:
        return "—"
    return f"{p['value']} ({p['cite']})"


PATTERN_ORDER = ("unq", "merger2", "merger4", "merger8", "merger16", "merger32")


def _spike_verdict(sat: int | None, paper: dict[str, Any] | None) -> str:
    """The measured saturation against the paper's spike: agrees within two threads (the
    paper reads "from 128 to 130 threads" off its plots), or differs, and by how much."""
    if paper is None:
        return ""
    if paper.get("threads") is None:
        return "agrees" if sat is None else f"**differs**: saturates at {sat}, the paper sees none"
    if sat is None:
        return f"**differs**: no saturation, the paper's spike is at {paper['threads']}"
    diff = sat - paper["threads"]
    return "agrees" if abs(diff) <= 2 else f"**differs**: {diff:+d} threads"


def requests_section(doc: dict[str, Any], figures: list[str]) -> list[str]:
    el = doc["elements"]["requests"]
    paper = paper_values(doc)
    pr = paper.get("requests", {})
    lines = [
        "### Outstanding memory requests (Lashgar et al., Thread-Latency plots)",
        "",
        "| quantity | measured | confidence | paper |",
        "| --- | --- | --- | --- |",
    ]
    keys = ("kind", "entries", "merge_capacity", "max_outstanding", "per_warp_limit",
            "sustained_in_flight")  # fmt: skip
    for key in keys:
        q = el.get(key, {})
        lines.append(f"| {key} | {_q(q)} | {conf(q)} | {_cite(pr.get(key))} |")
    lines.append("")
    if el.get("kind", {}).get("evidence"):
        lines += [f"Evidence: {el['kind']['evidence']}.", ""]
    spikes = {(s["pattern"], s.get("loads_per_thread")): s for s in paper.get("spikes", [])}
    lines += [
        "Saturation spike per sweep (the last thread count before the large rise, as the paper "
        "reads its plots; smaller rises are issue and write-back serialisation):",
        "",
        "| pattern | N | saturation (threads) | repeats agreeing | rise (cycles) | "
        "first serialisation spike | paper | verdict |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    order = {p: k for k, p in enumerate(PATTERN_ORDER)}
    sweeps = sorted(
        doc.get("sweeps", []), key=lambda s: (order.get(s["pattern"], 99), s["loads_per_thread"])
    )
    for s in sweeps:
        p = spikes.get((s["pattern"], s["loads_per_thread"])) or spikes.get((s["pattern"], None))
        if p is None:
            paper_cell = "—"
        elif p.get("threads") is None:
            paper_cell = f"no spike ({p['cite']})"
        else:
            paper_cell = f"{p['threads']} ({p['cite']})"
        sat = s["saturation_threads"]
        sat_cell = (
            f"{sat} → {s['saturation_next_threads']}"
            if sat is not None
            else f"none up to {s['no_saturation_up_to_threads']}"
        )
        if s.get("merge_overflow_threads"):
            sat_cell += f"; merge overflow after {s['merge_overflow_threads']}"
        rep = s.get("repeats") or {}
        if s.get("too_few_thread_counts") is not None:
            sat_cell = f"not read: {s['undetermined']}"
        elif s.get("undetermined"):
            sat_cell = f"does not repeat: {', '.join(rep.get('readings', []))}"
        lines.append(
            f"| {s['pattern']} | {s['loads_per_thread']} | {sat_cell} | "
            f"{rep.get('text', '—')} | "
            f"{s['saturation_jump_cycles'] if sat is not None else '—'} | "
            f"{s['first_serialisation_threads'] or '—'} | {paper_cell} | "
            f"{_spike_verdict(sat, p)} |"
        )
    lines.append("")
    rep = doc.get("repeats") or {}
    if rep.get("repeats"):
        ran = rep.get("sweeps_by_repeat") or []
        whole = sum(1 for _ in itertools.takewhile(lambda n: n == max(ran), ran))
        partial = (
            f" (the first {whole} over every sweep, then only what was not yet settled: "
            f"{', '.join(map(str, ran[whole:]))} of {max(ran)} sweeps)"
            if ran[whole:]
            else ""
        )
        lines += [
            f"The sweep ran {rep['repeats']} times{partial}; {rep['sweeps_repeating']} sweeps "
            "read one saturation reading in a majority of the repeats that ran them (the weakest: "
            f"{rep.get('weakest_agreement') or '—'}), {rep['sweeps_not_repeating']} did not and "
            "are left out of the classification.",
            "",
        ]
    fp = doc.get("footprint", {})
    if fp:
        text = f"Largest footprint {fp['max_footprint_bytes'] / 1024:g} KiB"
        if fp.get("l2_size_bytes"):
            verdict = "below" if fp.get("below_l2") else "NOT below"
            text += f", {verdict} the measured L2 ({fp['l2_size_bytes'] / 1024:g} KiB)"
        lines += [text + ": the loads hit the L2, as in the paper (Sec. 3.3).", ""]
    return lines


def l2_flush_section(doc: dict[str, Any], figures: list[str]) -> list[str]:
    q = doc["elements"]["l2"]["size_bytes"]
    paper = paper_values(doc).get("l2_size_bytes")
    measured = f"**{q['value'] / 1024:g} KiB**" if q.get("value") is not None else _q(q)
    lines = [
        "### L2 size from a flushed and unflushed copy (Lashgar et al., Sec. 3.3)",
        "",
        "| quantity | measured | confidence | paper |",
        "| --- | --- | --- | --- |",
        f"| l2 size | {measured} | {conf(q)} | "
        + (f"{paper['value'] / 1024:g} KiB ({paper['cite']})" if paper else "—")
        + " |",
        "",
    ]
    if q.get("evidence"):
        lines += [f"Evidence: {q['evidence']}.", ""]
    return lines
