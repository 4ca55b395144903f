"""The request table of one SM from the sweeps' saturation points (Lashgar, Salehi & Baniasadi,
Sec. 5; steps 5 and 6 of `analysis.requests.requests`): MSHR or PRT, its entries, merge capacity and
the requests in flight. Sees only the fitted sweeps.

Each saturated sweep bounds the table: between the distinct blocks (MSHR) or warp load
instructions (PRT) in flight at its saturation point and one less than at the next point. The
kind is the hypothesis under which more sweeps agree on one size. The entries are the size all
the agreeing sweeps allow; where they allow several sizes alike (their loads per thread all step
over the same sizes), the range is reported, not one end of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..common.result import quantity, undetermined
from .request_spikes import Spike

WARP_THREADS = 32


def _blocks(threads: int, n: int, k: int) -> int:
    return n * -(-threads // k)


def _instructions(threads: int, n: int) -> int:
    return n * -(-threads // WARP_THREADS)


@dataclass(frozen=True)
class SweepResult:
    pattern: str
    merge_threads: int
    loads_per_thread: int
    max_threads: int
    baseline_cycles: float
    noise_cycles: float
    spikes: tuple[Spike, ...]
    saturation: Spike | None

    def bounds(self, kind: str) -> tuple[int, float]:
        """Table sizes this sweep allows under `kind` ("mshr": distinct blocks, "prt": warp
        load instructions): [lo, hi] (hi = inf when unsaturated; lo > hi: contradicts it)."""
        n, k, s = self.loads_per_thread, self.merge_threads, self.saturation
        count = (lambda t: _blocks(t, n, k)) if kind == "mshr" else (lambda t: _instructions(t, n))
        if s is None:
            return count(self.max_threads), float("inf")
        return count(s.threads), count(s.next_threads) - 1

    def as_dict(self) -> dict[str, Any]:
        s = self.saturation
        first = next((p for p in self.spikes if p.kind == "serialisation"), None)
        return {
            "pattern": self.pattern,
            "merge_threads": self.merge_threads,
            "loads_per_thread": self.loads_per_thread,
            "baseline_cycles": round(self.baseline_cycles, 2),
            "noise_cycles": round(self.noise_cycles, 2),
            "saturation_threads": None if s is None else s.threads,
            "saturation_next_threads": None if s is None else s.next_threads,
            "saturation_jump_cycles": None if s is None else round(s.jump_cycles, 2),
            "first_serialisation_threads": None if first is None else first.threads,
            "merge_overflow_threads": [
                p.threads for p in self.spikes if p.kind == "merge_overflow"
            ],
            "spikes": [
                {
                    "threads": p.threads,
                    "next_threads": p.next_threads,
                    "jump_cycles": round(p.jump_cycles, 2),
                    "peak_variance": round(p.peak_variance, 2),
                    "kind": p.kind,
                }
                for p in self.spikes
            ],
            "no_saturation_up_to_threads": self.max_threads if s is None else None,
        }


def _consensus(intervals: list[tuple[int, float]]) -> tuple[int, int, float]:
    """(agreeing intervals, lo, hi) of the table size contained in the most intervals."""
    points = sorted({int(lo) for lo, _ in intervals})
    best = (0, 0, 0.0)
    for e in points:
        agree = [(lo, hi) for lo, hi in intervals if lo <= e <= hi]
        if len(agree) > best[0]:
            best = (len(agree), max(lo for lo, _ in agree), min(hi for _, hi in agree))
    return best


def classify(sweeps: list[SweepResult], *, limit: int | None) -> dict[str, Any]:
    """The `requests` element: kind, entries, merge_capacity, max_outstanding (result contract)."""
    usable = [
        s
        for s in sweeps
        if (limit is None or s.loads_per_thread <= limit)
        and not any(p.kind == "merge_overflow" for p in s.spikes)
    ]
    saturated = [s for s in usable if s.saturation is not None]
    held = [s for s in usable if s.saturation is None]
    most_blocks = max((_blocks(s.max_threads, s.loads_per_thread, s.merge_threads)
                       for s in held if s.merge_threads == 1), default=0)  # fmt: skip
    most_instr = max((_instructions(s.max_threads, s.loads_per_thread) for s in held),
                     default=0)  # fmt: skip
    top = max((s.max_threads for s in sweeps), default=0)

    def unbounded(why: str, at_most: str) -> dict[str, Any]:
        # the held counts bound the table from below; nothing read bounds it from above
        return {
            "kind": undetermined(why),
            "entries": undetermined(why) | {"at_least": {"mshr": most_blocks, "prt": most_instr},
                                            "at_most": None, "at_most_why": at_most},
            "merge_capacity": undetermined(why),
            "max_outstanding": undetermined(why) | {"at_least": most_blocks, "at_most": None,
                                                    "at_most_why": at_most},
        }  # fmt: skip

    if not saturated:
        why = (
            f"no saturation up to {top} threads in any sweep within the scoreboard limit: one "
            f"launch issued up to {most_blocks} distinct requests and {most_instr} warp load "
            "instructions on one SM without a stall"
        )
        # a larger launch, more loads per thread or threads, would bound it from above
        return unbounded(why, f"no sweep saturated up to {top} threads")
    # saturated sweeps vote; unsaturated ones must not contradict the winner (lower bounds)
    votes, contradictions = {}, {}
    for kind in ("mshr", "prt"):
        votes[kind] = _consensus([s.bounds(kind) for s in saturated])
        hi = votes[kind][2]
        contradictions[kind] = sum(
            1 for s in usable if s.saturation is None and s.bounds(kind)[0] > hi
        )
    a_m, a_p = votes["mshr"][0], votes["prt"][0]
    total = len(saturated)
    unit_of = {"mshr": "distinct 128-byte blocks", "prt": "warp load instructions"}
    if all(contradictions.values()):
        # under either hypothesis an unsaturated sweep issued past the size the steps agree on
        why = (
            f"the steps of {total} saturated sweeps agree on no table that the other sweeps "
            f"allow: {contradictions['mshr']} issued more {unit_of['mshr']} than the most "
            f"agreeing steps allow ({int(votes['mshr'][2])}), {contradictions['prt']} more "
            f"{unit_of['prt']} ({int(votes['prt'][2])}), without a stall (up to {top} "
            f"threads: up to {most_blocks} distinct requests and {most_instr} warp load "
            "instructions): the steps are not a table running out"
        )
        return unbounded(why, "the sweeps that saturate contradict the ones that issue more")
    if a_m == a_p:
        why = (
            f"{a_m} of {total} sweeps agree on one table size under either hypothesis; sweeps "
            "that differ in loads per thread or merge factor are needed to separate them"
        )
        return {k: undetermined(why) for k in ("kind", "entries", "merge_capacity",
                                               "max_outstanding")}  # fmt: skip
    kind = "mshr" if a_m > a_p else "prt"
    other = "prt" if kind == "mshr" else "mshr"
    agree, lo, hi = votes[kind]
    if contradictions[kind]:
        # an unsaturated sweep held more in flight than the size the steps agree on, without a
        # stall: that table would have stalled it, so the steps are not a table running out
        why = (
            f"{agree} of {total} saturated sweeps agree on a table of {lo} to {int(hi)} "
            f"{unit_of[kind]}, but {contradictions[kind]} sweeps issued more than {int(hi)} "
            f"without a stall (up to {top} threads: up to {most_blocks} distinct requests and "
            f"{most_instr} warp load instructions), which such a table cannot allow: the steps "
            "are not the table running out"
        )
        return unbounded(why, "the sweeps that saturate contradict the ones that issue more")
    confidence = (agree - votes[other][0]) / total
    points = "; ".join(
        f"{s.pattern} N={s.loads_per_thread}: "
        + (
            f"{s.saturation.threads}->{s.saturation.next_threads} threads"
            if s.saturation
            else f"none up to {s.max_threads}"
        )  # fmt: skip
        for s in usable
    )
    evidence = (
        f"{agree} of {total} sweeps agree when the table counts {unit_of[kind]}, "
        f"{votes[other][0]} when it counts {unit_of[other]}; no unsaturated sweep held more; "
        f"saturation points: {points}"
    )
    doc: dict[str, Any] = {
        "kind": quantity(
            kind,
            unit=None,
            confidence=confidence,
            method=(
                "saturation points against threads x loads / merge factor (MSHR) and warp load "
                "instructions (PRT), Lashgar Sec. 5"
            ),
            evidence=evidence,
        )
    }
    doc["entries"], value = _entries(agree, lo, hi, confidence)
    if kind == "mshr":
        doc["merge_capacity"] = _merge_capacity(usable, sweeps, lo, hi)
        doc["max_outstanding"] = (
            undetermined(f"one request per MSHR entry; {doc['entries']['undetermined']}")
            | {"range": doc["entries"]["range"]}
            if value is None
            else quantity(
                value,
                unit="requests",
                confidence=doc["entries"]["confidence"],
                method="one memory request per MSHR entry",
                evidence=f"{value} entries",
            )
        )
    else:
        doc["merge_capacity"] = undetermined(
            "a PRT entry tracks one warp load instruction with all its requests; merging is not "
            "bounded per entry"
        )
        doc["max_outstanding"] = _prt_outstanding(saturated, lo, value, doc["entries"], confidence)
    return doc


def _entries(
    agree: int, lo: int, hi: float, confidence: float
) -> tuple[dict[str, Any], int | None]:
    """The entries quantity and value: the one size the `agree` sweeps that agree on the most
    all allow ([lo, hi], their intersection); undetermined, with the range, where they allow
    several alike (no size in it is allowed by more sweeps: a sweep that allowed only part of
    it would have been counted where that part begins)."""
    if hi > lo:
        why = (
            f"the {agree} sweeps that agree allow each size from {lo} to {int(hi)} alike: their "
            "saturation points step over these sizes together; sweeps with other loads per "
            "thread or finer thread steps would tell them apart"
        )
        return undetermined(why) | {"range": [int(lo), int(hi)]}, None
    return quantity(
        int(lo),
        unit="entries",
        confidence=confidence,
        method=(
            "the table size every agreeing sweep allows (each allows the sizes from its count "
            "at the last unsaturated point to one less than at the first saturated point)"
        ),
        evidence=f"consistent sizes [{lo}, {int(hi)}]",
    ) | {"range": [int(lo), int(hi)]}, int(lo)


def _prt_outstanding(
    saturated, lo, entries: int | None, entries_q: dict, confidence: float
) -> dict[str, Any]:
    """Requests one SM holds in flight under a PRT: entries x 32, unless sweeps saturate before
    the entries run out (their warp instructions bound the table below `lo`). Those then bound a
    request limit by the distinct blocks in flight at their saturation points (all must agree).
    `confidence`: the classification's (the entries' where they are determined; a range of
    entries carries none)."""
    early = [s for s in saturated if s.bounds("prt")[1] < lo]
    if entries is None:  # the sizes the sweeps allow alike
        named, requests = (
            "-".join(map(str, entries_q["range"])),
            "-".join(str(e * WARP_THREADS) for e in entries_q["range"]),
        )
    else:
        named, requests = str(entries), str(entries * WARP_THREADS)
    if early:
        agree, r_lo, r_hi = _consensus([s.bounds("mshr") for s in early])
        points = "; ".join(
            f"{s.pattern} N={s.loads_per_thread}: {s.saturation.threads}->"
            f"{s.saturation.next_threads} threads, distinct requests "
            f"[{s.bounds('mshr')[0]}, {int(s.bounds('mshr')[1])}]"
            for s in early
        )
        if agree == len(early):
            return quantity(
                int(r_hi),
                unit="requests",
                confidence=confidence * (1.0 if r_hi == r_lo else 0.8),
                method=(
                    "distinct requests in flight where sweeps saturate before the PRT's entries "
                    "run out (a request limit below entries x 32): largest count consistent "
                    "with all of them"
                ),
                evidence=(
                    f"{len(early)} sweeps saturate below {lo} warp instructions and agree on "
                    f"[{r_lo}, {int(r_hi)}] requests ({points}); entries x 32 would be "
                    f"{requests}"
                ),
            ) | {"range": [int(r_lo), int(r_hi)]}
        return undetermined(
            f"sweeps saturate before the PRT's {named} entries run out but disagree on a "
            f"request limit ({points})"
        )
    if entries is None:
        lo_e, hi_e = entries_q["range"]
        return undetermined(
            f"PRT entries x {WARP_THREADS} requests, and the entries are undetermined "
            f"({entries_q['undetermined']})"
        ) | {"range": [lo_e * WARP_THREADS, hi_e * WARP_THREADS]}
    return quantity(
        entries * WARP_THREADS,
        unit="requests",
        confidence=confidence,
        method="PRT entries x 32 requests of a fully uncoalesced warp instruction (Sec. 5.2)",
        evidence=f"{entries} entries x {WARP_THREADS}",
    )


def _merge_capacity(usable, sweeps, lo, hi) -> dict[str, Any]:
    agreeing = [s.merge_threads for s in usable if s.merge_threads > 1 and s.saturation
                and s.bounds("mshr")[0] <= hi and lo <= s.bounds("mshr")[1]]  # fmt: skip
    overflow = [p.threads for s in sweeps for p in s.spikes if p.kind == "merge_overflow"]
    at_least = max(agreeing, default=1)
    if overflow:
        cap = min(overflow)
        return quantity(
            cap,
            unit="thread requests",
            confidence=0.9 if cap >= at_least else 0.5,
            method=(
                "MergerK sweeps saturate where distinct blocks reach the entries (merged); in "
                "patterns with more threads per block the latency jumps once more than the "
                "capacity share one block"
            ),
            evidence=(
                f"Merger{at_least} agrees with the entries; merge overflow after {cap} threads "
                f"share one block (sweeps: {sorted(set(overflow))})"
            ),
        )
    if at_least > 1:
        return quantity(
            at_least,
            unit="thread requests",
            confidence=0.6,
            method="largest MergerK whose saturation agrees with the entries (a lower bound)",
            evidence=f"Merger{at_least} saturates at the entries; no larger K decides more",
        )
    return undetermined("no MergerK sweep saturates consistently with the entries")
