"""Outstanding-request handling of one SM from Thread-Latency sweeps (Lashgar, Salehi &
Baniasadi, Sec. 3.2 and 5). Sees only the trace.

1. **Thread-Latency curve.** A run's latency is the mean of its threads' t2 - t1; a point's
   latency is the harmonic mean over runs (the paper's Sec. 4).
2. **Variance curve.** The paper's unbiased variance of each point and its two neighbours,
   ``sum_{i=thd-1}^{thd+1} (Lat_i - mu)^2 / 2``. An isolated step of height h puts h^2 / 3 on the
   two points either side of it.
3. **Spikes.** Maximal runs of the variance curve above the noise floor
   ``(noise_factor x sigma)^2 / 3`` (sigma: 1.4826 x the median absolute deviation of the
   point-to-point latency changes, at least one cycle) are spikes; each sits at the largest
   latency rise inside it and is named, as the paper reads its plots, by the *last thread count
   before the rise* (Fig. 3: "from 128 to 130" is the spike "on 128"). A spike whose rise is at
   least ``min_jump_fraction`` of the unloaded latency (the curve's first point, one round trip)
   is a **saturation** spike: a load that finds no free entry waits for a release, about one more
   round trip. Smaller ones are **serialisation** spikes (issue and write-back, Sec. 3.2). In a
   MergerK sweep a rise at or below K threads is **merge overflow**: the threads sharing one
   block outgrow what an entry can merge. The sweep's saturation point is its first saturation
   spike; a sweep without one reports no saturation, never a forced number.
4. **Scoreboard.** A warp with more independent loads than its scoreboard allows waits for the
   oldest, so the smallest launch needs about two round trips: the limit is the largest N whose
   smallest-launch latency stays below ``scoreboard_ratio`` x that of one load.
5. **MSHR or PRT** (Sec. 5). Each saturated sweep (N within the scoreboard limit, no merge
   overflow) bounds the table: under an MSHR the entries lie between the distinct blocks in flight
   at the saturation point and one less than at the next point, ``N ceil(T / K)``; under a PRT
   between the warp load instructions ``N ceil(T / 32)`` likewise. Unsaturated sweeps give lower
   bounds. The kind is the hypothesis under which more sweeps agree on one table size; the
   estimate is the intersection of the agreeing intervals.
6. **Requests in flight.** Under an MSHR, one per entry. Under a PRT, entries x 32, unless some
   sweeps saturate below the table's warp instructions (inside a warp, as the K20's UNQ sweeps
   of Figs. 9-10 do): then the distinct requests in flight at their saturation points bound a
   per-SM request limit, which all of them must agree on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..exceptions import AnalysisError
from .result import quantity, undetermined

WARP_THREADS = 32
KEYS = ["pattern", "merge_threads", "loads_per_thread"]


# ---------------------------------------------------------------------------------------------
# curves


def thread_latency_table(data: pd.DataFrame) -> pd.DataFrame:
    """One row per (pattern, K, N, threads): ``latency_cycles`` (harmonic mean over runs of each
    run's mean per-thread time), ``runs``, sorted by sweep and thread count."""
    need = {*KEYS, "threads", "run", "elapsed_cycles"}
    if not need <= set(data.columns):
        raise AnalysisError(f"trace lacks columns {sorted(need - set(data.columns))}")
    if data.empty:
        raise AnalysisError("trace has no rows")
    lengths = np.fromiter((len(a) for a in data["elapsed_cycles"]), np.int64, len(data))
    if (lengths == 0).any():
        raise AnalysisError("a launch recorded no thread times")
    flat = np.concatenate([np.asarray(a, dtype=np.float64) for a in data["elapsed_cycles"]])
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    per_run = np.add.reduceat(flat, starts) / lengths
    df = data[[*KEYS, "threads"]].assign(run_latency=per_run)
    g = df.groupby([*KEYS, "threads"], sort=True)["run_latency"]
    out = g.agg(
        latency_cycles=lambda s: float(len(s) / np.sum(1.0 / np.maximum(s.to_numpy(), 1e-9))),
        runs="size",
    )
    return out.reset_index()


def variance3(latency: np.ndarray) -> np.ndarray:
    """The paper's 3-point unbiased variance; NaN at both ends."""
    x = np.asarray(latency, dtype=np.float64)
    v = np.full(x.shape, np.nan)
    if x.size >= 3:
        w = np.stack([x[:-2], x[1:-1], x[2:]])
        v[1:-1] = w.var(axis=0, ddof=1)
    return v


# ---------------------------------------------------------------------------------------------
# spikes of one sweep


@dataclass(frozen=True)
class Spike:
    threads: int  # last thread count before the rise (the paper's reading)
    next_threads: int  # first thread count after it
    jump_cycles: float
    peak_variance: float
    kind: str  # "saturation" | "serialisation" | "merge_overflow"


@dataclass
class SpikeDetector:
    """`fit(threads, latency, merge_threads=1) -> self`; `.spikes`, `.saturation`."""

    min_jump_fraction: float = 0.25
    noise_factor: float = 8.0
    spikes: list[Spike] = field(default_factory=list)
    baseline_cycles: float = float("nan")
    noise_cycles: float = float("nan")

    def fit(self, threads, latency, *, merge_threads: int = 1) -> SpikeDetector:
        x = np.asarray(threads, dtype=np.int64)
        y = np.asarray(latency, dtype=np.float64)
        if x.size != y.size or x.size < 4:
            raise AnalysisError(f"a sweep needs >= 4 thread counts, got {x.size}")
        d = np.diff(y)
        self.baseline_cycles = float(y[0])
        self.noise_cycles = max(1.4826 * float(np.median(np.abs(d - np.median(d)))), 1.0)
        v = variance3(y)
        floor = (self.noise_factor * self.noise_cycles) ** 2 / 3.0
        above = np.nan_to_num(v, nan=0.0) > floor
        self.spikes = []
        i = 0
        while i < x.size:
            if not above[i]:
                i += 1
                continue
            j = i
            while j + 1 < x.size and above[j + 1]:
                j += 1
            # the run covers points i..j; its steps are d[i-1 .. j] (between neighbours)
            lo, hi = max(i - 1, 0), min(j, d.size - 1)
            k = lo + int(np.argmax(d[lo : hi + 1]))
            jump = float(d[k])
            if jump > 0:
                if jump < self.min_jump_fraction * self.baseline_cycles:
                    kind = "serialisation"
                elif x[k + 1] <= merge_threads:
                    kind = "merge_overflow"
                else:
                    kind = "saturation"
                peak = float(np.nanmax(v[i : j + 1]))
                self.spikes.append(Spike(int(x[k]), int(x[k + 1]), jump, peak, kind))
            i = j + 1
        return self

    @property
    def saturation(self) -> Spike | None:
        return next((s for s in self.spikes if s.kind == "saturation"), None)


# ---------------------------------------------------------------------------------------------
# the table


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


def fit_sweeps(table: pd.DataFrame, **detector: Any) -> list[SweepResult]:
    out = []
    for (pattern, k, n), df in table.groupby(KEYS, sort=False):
        det = SpikeDetector(**detector).fit(
            df["threads"].to_numpy(), df["latency_cycles"].to_numpy(), merge_threads=int(k)
        )
        out.append(
            SweepResult(
                str(pattern), int(k), int(n), int(df["threads"].max()), det.baseline_cycles,
                det.noise_cycles, tuple(det.spikes), det.saturation,
            )
        )  # fmt: skip
    return out


def scoreboard_limit(table: pd.DataFrame, *, ratio: float = 1.5) -> dict[str, Any]:
    """Largest N whose smallest launch stays within `ratio` x the one-load latency."""
    first = table[table["threads"] == table["threads"].min()]
    by_n = first.groupby("loads_per_thread")["latency_cycles"].min().sort_index()
    if 1 not in by_n.index or len(by_n) < 2:
        return undetermined("needs sweeps with N = 1 and at least one larger N")
    base = float(by_n.loc[1])
    limit = 0
    for n, lat in by_n.items():
        if lat >= ratio * base:
            break
        limit = int(n)
    ratios = ", ".join(f"N={n}: {lat / base:.2f}" for n, lat in by_n.items())
    if limit == int(by_n.index.max()):
        return undetermined(
            f"no N up to {limit} waits for an earlier load at {int(first['threads'].iloc[0])} "
            f"threads (latency / one-load latency: {ratios}); the limit is at least {limit}"
        ) | {"at_least": limit}
    return quantity(
        limit,
        unit="loads",
        confidence=0.9,
        method=(
            "smallest launch's latency by loads per thread: a load beyond the scoreboard limit "
            f"waits for the oldest (about one more round trip; threshold {ratio} x one load)"
        ),
        evidence=ratios,
    )


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
    if not saturated:
        most_blocks = max((_blocks(s.max_threads, s.loads_per_thread, s.merge_threads)
                           for s in usable if s.merge_threads == 1), default=0)  # fmt: skip
        most_instr = max((_instructions(s.max_threads, s.loads_per_thread) for s in usable),
                         default=0)  # fmt: skip
        top = max((s.max_threads for s in sweeps), default=0)
        why = (
            f"no saturation up to {top} threads in any sweep within the scoreboard limit: one SM "
            f"held at least {most_blocks} distinct requests and {most_instr} warp load "
            "instructions in flight without a stall"
        )
        return {k: undetermined(why) for k in ("kind", "entries", "merge_capacity",
                                               "max_outstanding")}  # fmt: skip
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
    confidence = (agree - votes[other][0]) / total / (1 + contradictions[kind])
    unit_of = {"mshr": "distinct 128-byte blocks", "prt": "warp load instructions"}
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
        f"{votes[other][0]} when it counts {unit_of[other]}; unsaturated sweeps contradicting "
        f"it: {contradictions[kind]}; saturation points: {points}"
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
    value = int(hi) if np.isfinite(hi) else int(lo)
    doc["entries"] = quantity(
        value,
        unit="entries",
        confidence=confidence * (1.0 if hi == lo else 0.8),
        method=(
            "largest table size consistent with every agreeing sweep (last unsaturated point "
            "gives the lower bound, the first saturated point the upper)"
        ),
        evidence=f"consistent sizes [{lo}, {'inf' if not np.isfinite(hi) else int(hi)}]",
    ) | {"range": [int(lo), None if not np.isfinite(hi) else int(hi)]}
    if kind == "mshr":
        doc["merge_capacity"] = _merge_capacity(usable, sweeps, lo, hi)
        doc["max_outstanding"] = quantity(
            value,
            unit="requests",
            confidence=doc["entries"]["confidence"],
            method="one memory request per MSHR entry",
            evidence=f"{value} entries",
        )
    else:
        doc["merge_capacity"] = undetermined(
            "a PRT entry tracks one warp load instruction with all its requests; merging is not "
            "bounded per entry"
        )
        doc["max_outstanding"] = _prt_outstanding(saturated, lo, value, doc["entries"])
    return doc


def _prt_outstanding(saturated, lo, entries: int, entries_q: dict) -> dict[str, Any]:
    """Requests one SM holds in flight under a PRT: entries x 32, unless sweeps saturate before
    the entries run out (their warp instructions bound the table below `lo`). Those then bound a
    request limit by the distinct blocks in flight at their saturation points (all must agree)."""
    early = [s for s in saturated if s.bounds("prt")[1] < lo]
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
                confidence=entries_q["confidence"] * (1.0 if r_hi == r_lo else 0.8),
                method=(
                    "distinct requests in flight where sweeps saturate before the PRT's entries "
                    "run out (a request limit below entries x 32): largest count consistent "
                    "with all of them"
                ),
                evidence=(
                    f"{len(early)} sweeps saturate below {lo} warp instructions and agree on "
                    f"[{r_lo}, {int(r_hi)}] requests ({points}); entries x 32 would be "
                    f"{entries * WARP_THREADS}"
                ),
            ) | {"range": [int(r_lo), int(r_hi)]}
        return undetermined(
            f"sweeps saturate before the PRT's {entries} entries run out but disagree on a "
            f"request limit ({points})"
        )
    return quantity(
        entries * WARP_THREADS,
        unit="requests",
        confidence=entries_q["confidence"],
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


# ---------------------------------------------------------------------------------------------


def analyse(
    data: pd.DataFrame, *, provenance: dict[str, Any], inputs: dict | None = None
) -> dict[str, Any]:
    """The `requests` result document for one device."""
    import json
    from pathlib import Path

    base = {
        "device": provenance["device"],
        "analysis": "requests",
        "trace": {k: provenance.get(k) for k in ("git_commit", "config_hash", "created_utc")},
        "device_info": provenance.get("device_info", {}),
        "clocks_before": provenance.get("clocks_before"),
        "clocks_after": provenance.get("clocks_after"),
        "parameters": provenance.get("config", {}).get("parameters"),
    }
    if data.empty:
        why = "the sweep recorded no launch (the simulated profile has no request table)"
        keys = ("kind", "entries", "merge_capacity", "max_outstanding", "per_warp_limit")
        return base | {
            "elements": {"requests": {k: undetermined(why) for k in keys}},
            "sweeps": [],
            "footprint": {},
        }
    table = thread_latency_table(data)
    sweeps = fit_sweeps(table)
    limit_q = scoreboard_limit(table)
    limit = limit_q.get("value") or limit_q.get("at_least")
    element = classify(sweeps, limit=limit)
    element["per_warp_limit"] = limit_q
    footprint = {"max_footprint_bytes": int(data["footprint_bytes"].max())}
    l2_path = (inputs or {}).get("l2_flush")
    if l2_path and Path(l2_path).is_file():
        l2 = json.loads(Path(l2_path).read_text()).get("elements", {}).get("l2", {})
        size = l2.get("size_bytes", {}).get("value")
        footprint |= {
            "l2_size_bytes": size,
            "below_l2": None if size is None else footprint["max_footprint_bytes"] <= size,
        }
    return base | {
        "elements": {"requests": element},
        "sweeps": [s.as_dict() for s in sweeps],
        "footprint": footprint,
    }
