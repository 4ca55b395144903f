"""Outstanding-request handling of one SM from Thread-Latency sweeps (Lashgar, Salehi &
Baniasadi, Sec. 3.2 and 5). Sees only the trace.

1. **Thread-Latency curve.** A run's latency is the mean of its threads' t2 - t1 (with
   several blocks on the SM, the slowest block's mean); a point's latency is the harmonic mean
   over runs (the paper's Sec. 4).
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
7. **In flight by Little's law** (`request_inflight`): independently of steps 3-6, the UNQ
   sweeps read as latency against achieved throughput give the requests (and bytes) one SM
   sustains in flight: the plateau of throughput x unloaded latency, with its range, or a lower
   bound while throughput still rises. Where no sweep saturates, step 5 gives lower bounds
   (`at_least`) and says why no upper bound follows.
8. **Repeats** (`request_repeats`). Steps 1-4 run on each repeat of the sweep alone; a sweep's
   saturation reading, and the scoreboard limit, count only where more than half of the repeats
   read them alike. Steps 5-6 use those readings; a sweep without a majority is undetermined,
   with its readings, and the document says how many repeats agreed.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ...exceptions import AnalysisError
from ..common.result import quantity, undetermined
from .request_inflight import sustained_in_flight
from .request_repeats import LIMIT, Agreement, agree, limit_reading, sweep_reading
from .request_spikes import MIN_COUNTS, Spike, SpikeDetector, variance3
from .request_table import WARP_THREADS, SweepResult, classify

KEYS = ["pattern", "merge_threads", "loads_per_thread"]
__all__ = [
    "Spike",
    "SpikeDetector",
    "SweepResult",
    "analyse",
    "classify",
    "figure_table",
    "fit_sweeps",
    "repeat_readings",
    "scoreboard_limit",
    "thread_latency_table",
    "variance3",
]


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
    # a trace without the column (one block per launch) times each launch as one block
    per_block = data["block_threads"] if "block_threads" in data.columns else lengths
    per_run = _run_latencies(data["elapsed_cycles"], lengths, np.asarray(per_block, np.int64))
    blocks = data["blocks"] if "blocks" in data.columns else np.ones(len(data), np.int64)
    df = data[[*KEYS, "threads"]].assign(run_latency=per_run, blocks=np.asarray(blocks))
    g = df.groupby([*KEYS, "threads"], sort=True)
    out = g.agg(runs=("run_latency", "size"), blocks=("blocks", "max"))
    out.insert(0, "latency_cycles", _harmonic_means(per_run, g.ngroup().to_numpy(), len(out)))
    return out.reset_index()


def _harmonic_means(values: np.ndarray, group: np.ndarray, groups: int) -> np.ndarray:
    """Per group (numbered 0..groups-1), len / sum(1 / max(value, 1e-9)) over its values in
    row order, summed as `np.sum` sums them, to the last bit: one value after another below 8
    values (here a step per position across all groups at once, without a Python call per
    group: a requests sweep reads 13824 groups after every repeat), by np.sum itself in the
    groups of 8 or more (which it sums in another order)."""
    order = np.argsort(group, kind="stable")
    inverse = 1.0 / np.maximum(values[order], 1e-9)
    starts = np.flatnonzero(np.r_[True, np.diff(group[order]) != 0])
    sizes = np.diff(np.r_[starts, len(order)])
    if len(starts) != groups:
        raise AnalysisError(f"{groups} groups expected, {len(starts)} found")
    sums = np.zeros(groups)
    for j in range(min(int(sizes.max(initial=0)), 7)):
        has = sizes > j
        sums[has] += inverse[starts[has] + j]
    for i in np.flatnonzero(sizes >= 8):
        sums[i] = np.sum(inverse[starts[i] : starts[i] + sizes[i]])
    return sizes / sums


def _segments(df: pd.DataFrame) -> list[pd.DataFrame]:
    """A sweep's runs of thread counts launched as the same number of blocks: where the count
    changes (one block to two past 1024 threads) the launch itself changes, so a latency step
    there is no saturation of the table (an H200 sweep steps 1417 -> 1470 cycles from 1022
    threads in one block to 1056 in two, then falls to 1100 at 1088)."""
    if "blocks" not in df.columns:
        return [df]
    edges = [0, *(np.flatnonzero(np.diff(df["blocks"].to_numpy())) + 1), len(df)]
    return [df.iloc[a:b] for a, b in zip(edges, edges[1:], strict=False) if b > a]


def _run_latencies(elapsed, lengths: np.ndarray, block_threads: np.ndarray) -> np.ndarray:
    """`_run_latency` of every run at once: the runs' blocks summed in one pass over all their
    thread times (integer cycles: exact sums, whatever the order, so each value is the one
    `_run_latency` gives). Runs of other numbers than integers go one at a time."""
    parts = [np.asarray(a) for a in elapsed]
    flat = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    if flat.dtype.kind not in "iub" or (block_threads <= 0).any():
        return np.fromiter(map(_run_latency, parts, block_threads), np.float64, len(parts))
    # run r holds ceil(L / B) blocks (one when L <= B): B threads each, the last the rest
    blocks = np.maximum(-(-lengths // block_threads), 1)
    first = np.r_[0, np.cumsum(blocks)[:-1]]  # each run's first block
    size = np.repeat(block_threads, blocks)
    last = first + blocks - 1
    size[last] = lengths - (blocks - 1) * block_threads
    starts = np.r_[0, np.cumsum(size)[:-1]]
    sums = np.add.reduceat(flat, starts, dtype=np.int64) if len(flat) else flat[:0]
    means = sums.astype(np.float64) / size
    return np.maximum.reduceat(means, first) if len(means) else means


def _run_latency(elapsed, block_threads: int) -> float:
    """A run's latency: the mean of its threads' times; with several blocks on the SM (thread t
    in block t // `block_threads`, the trace's column) the slowest block's mean, when the SM's
    last load completes."""
    a = np.asarray(elapsed)
    # integer cycles: every sum is exact in float64 (below 2^53), whatever the order
    if a.size <= block_threads:
        return float(a.sum(dtype=np.float64)) / a.size
    return max(
        float(a[i : i + block_threads].sum(dtype=np.float64)) / a[i : i + block_threads].size
        for i in range(0, a.size, block_threads)
    )


def figure_table(data: pd.DataFrame, doc: dict[str, Any]) -> pd.DataFrame:
    """The Thread-Latency table the figures draw: `thread_latency_table` and, per sweep, the
    3-point variance of its latency (`variance_cycles2`; NaN at both ends)."""
    cols = [*KEYS, "threads", "latency_cycles", "runs", "variance_cycles2"]
    if data.empty:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})
    table = thread_latency_table(data)
    variance = table.groupby(KEYS, sort=False)["latency_cycles"].transform(
        lambda s: pd.Series(variance3(s.to_numpy()), index=s.index)
    )
    return table.assign(variance_cycles2=variance)[cols]


def short_sweeps(table: pd.DataFrame) -> dict[tuple, int]:
    """The sweeps of `table` too short to fit: fewer than `MIN_COUNTS` thread counts in their
    first launch geometry (one block), each with that count. `fit_sweeps` leaves them out."""
    out = {}
    for key, df in table.groupby(KEYS, sort=False):
        first = len(_segments(df)[0])
        if first < MIN_COUNTS:
            out[(str(key[0]), int(key[1]), int(key[2]))] = first
    return out


def fit_sweeps(table: pd.DataFrame, **detector: Any) -> list[SweepResult]:
    """Each sweep's spikes and saturation, but those too short to fit (`short_sweeps`)."""
    out = []
    short = short_sweeps(table)
    for (pattern, k, n), df in table.groupby(KEYS, sort=False):
        if (str(pattern), int(k), int(n)) in short:
            continue
        # each launch geometry on its own, the first that saturates read; the baseline and
        # noise are the first one's
        fits = []
        for part in _segments(df):
            if len(part) < MIN_COUNTS and fits:
                break
            fits.append(
                SpikeDetector(**detector).fit(
                    part["threads"].to_numpy(),
                    part["latency_cycles"].to_numpy(),
                    merge_threads=int(k),
                )
            )
            if fits[-1].saturation is not None:
                break
        spikes = tuple(s for det in fits for s in det.spikes)
        out.append(
            SweepResult(
                str(pattern), int(k), int(n), int(df["threads"].max()), fits[0].baseline_cycles,
                fits[0].noise_cycles, spikes, fits[-1].saturation,
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
        keys = ("kind", "entries", "merge_capacity", "max_outstanding", "per_warp_limit",
                "sustained_in_flight")  # fmt: skip
        return base | {
            "elements": {"requests": {k: undetermined(why) for k in keys}},
            "sweeps": [],
            "footprint": {},
        }
    agreement = _agreement(data)
    short = short_sweeps(thread_latency_table(data))
    if not agreement.sweeps:
        why = _too_short(short) or "no repeat measured any sweep in full"
        keys = ("kind", "entries", "merge_capacity", "max_outstanding", "sustained_in_flight")
        element = {k: undetermined(why) for k in keys} | {"per_warp_limit": agreement.limit}
        return base | {
            "elements": {"requests": element},
            "sweeps": _short_dicts(short),
            "repeats": _repeats_block(agreement, data),
            "footprint": {"max_footprint_bytes": int(data["footprint_bytes"].max())},
        }
    limit_q, limit = agreement.limit, agreement.limit_value
    element = classify(agreement.repeating, limit=limit)
    _note_repeats(element, agreement)
    element["per_warp_limit"] = limit_q
    element["sustained_in_flight"] = _in_flight(data, element["max_outstanding"])
    _bound_by_in_flight(element)
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
        "sweeps": _sweep_dicts(agreement) + _short_dicts(short),
        "repeats": _repeats_block(agreement, data),
        "footprint": footprint,
    }


def _too_short(short: dict[tuple, int]) -> str:
    """Why the `short_sweeps` are not read ('' when there are none)."""
    if not short:
        return ""
    named = ", ".join(f"{p} N={n} ({c})" for (p, _, n), c in short.items())
    return (
        f"{len(short)} sweeps have fewer than {MIN_COUNTS} thread counts in one block, too few "
        f"for the variance curve to tell a spike from noise: {named}; sweep more thread counts "
        "(experiments.requests.threads)"
    )


def _short_dicts(short: dict[tuple, int]) -> list[dict[str, Any]]:
    """The `short_sweeps` as entries of the document's sweeps, undetermined with the reason."""
    return [
        _unread_sweep(
            pattern,
            k,
            n,
            too_few_thread_counts=counts,
            undetermined=(
                f"{counts} thread counts in one block; the spike analysis needs at least "
                f"{MIN_COUNTS}"
            ),
        )
        for (pattern, k, n), counts in short.items()
    ]


def _unread_sweep(pattern: str, k: int, loads: int, **why: Any) -> dict[str, Any]:
    """A sweep's entry of the document's sweeps with no reading, and why (`why`'s keys)."""
    return {
        "pattern": pattern,
        "merge_threads": k,
        "loads_per_thread": loads,
        "saturation_threads": None,
        "saturation_next_threads": None,
        "saturation_jump_cycles": None,
        "first_serialisation_threads": None,
        "merge_overflow_threads": [],
        "spikes": [],
        "no_saturation_up_to_threads": None,
        **why,
    }


# Little's law reading under this share of a launch's issued requests: the launch was bound by
# the issue rate, and its requests were not in flight at once
ISSUE_BOUND_SHARE = 0.5


def _bound_by_in_flight(element: dict[str, Any]) -> None:
    """Where no table was read, its lower bounds (step 5) are the requests one launch issued
    without a stall; they were all in flight at once only if the last left before the first
    came back. Little's law (step 7) tells how many were in flight: where that is under half
    of them (the launch was bound by the issue rate, as on Hopper: 335 of 16384; a launch whose
    loads all leave at once reads within the clock's noise of its count, 5924 of 6144 on a
    simulated table), the table is bounded below by it, and the issued counts stay beside it as
    `issued_without_stall`."""
    out, flight = element["max_outstanding"], element["sustained_in_flight"]
    issued, held = out.get("at_least"), flight.get("at_least")
    if out.get("value") is not None or issued is None or held is None:
        return
    if held >= ISSUE_BOUND_SHARE * issued:
        return
    requests = math.ceil(held)
    instructions = math.ceil(held / WARP_THREADS)
    note = (
        f"; a launch's requests were not all in flight at once: by Little's law "
        f"(sustained_in_flight) at least {held:g} were, so the table holds at least {requests} "
        f"requests ({instructions} warp load instructions of {WARP_THREADS})"
    )
    for q in ("kind", "entries", "merge_capacity", "max_outstanding"):
        if element[q].get("value") is None and "undetermined" in element[q]:
            element[q]["undetermined"] += note
    entries = element["entries"]
    if isinstance(entries.get("at_least"), dict):
        entries["issued_without_stall"] = entries["at_least"]
        entries["at_least"] = {"mshr": requests, "prt": instructions}
    out["issued_without_stall"] = issued
    out["at_least"] = requests


def _in_flight(data: pd.DataFrame, outstanding: dict[str, Any]) -> dict[str, Any]:
    """The Little's-law reading, bounded above by the request table's requests in flight (its
    value, or the top of its range) where the table reading gives them."""
    top = outstanding.get("value")
    if top is None and outstanding.get("range"):
        top = outstanding["range"][1]
    why = None if top is None else "the request table's requests in flight (max_outstanding)"
    return sustained_in_flight(data, at_most=top, at_most_why=why)


# ---------------------------------------------------------------------------------------------
# repeats


def _repeats(data: pd.DataFrame) -> list[pd.DataFrame]:
    """The trace's repeats in order (a trace without a `repeat` column is one repeat)."""
    if "repeat" not in data.columns:
        return [data]
    return [df for _, df in data.groupby("repeat", sort=True)]


def _measured(data: pd.DataFrame, reference: pd.DataFrame) -> tuple[list[tuple], bool]:
    """What one repeat measured in full: the sweeps whose every thread count (as in `reference`,
    a whole pass or the whole trace) it ran, and whether it ran every sweep's first launch, which
    the scoreboard limit compares. A repeat after the first ones runs only the sweeps not yet
    settled, and the first launches when the limit is not."""
    expected = reference.groupby(KEYS, sort=False)["threads"].nunique()
    got = data.groupby(KEYS, sort=False)["threads"].nunique()
    full = [k for k, n in got.items() if expected.get(k) == n]
    first = int(reference["threads"].min())
    firsts = data.loc[data["threads"] == first, KEYS].drop_duplicates()
    return full, len(firsts) == len(expected)


def _fit_repeat(
    data: pd.DataFrame, reference: pd.DataFrame | None = None
) -> tuple[dict[tuple, SweepResult], dict[str, Any] | None]:
    """One repeat's fits of the sweeps it measured in full, and its scoreboard limit (None when
    it did not run every sweep's first launch)."""
    full, has_limit = _measured(data, data if reference is None else reference)
    table = thread_latency_table(data)
    mine = table[pd.MultiIndex.from_frame(table[KEYS]).isin(full)]
    fits = {(s.pattern, s.merge_threads, s.loads_per_thread): s for s in fit_sweeps(mine)}
    return fits, scoreboard_limit(table) if has_limit else None


def repeat_readings(data: pd.DataFrame, reference: pd.DataFrame | None = None) -> dict[Any, Any]:
    """The readings of one repeat (one pass of the sweep, or of its unsettled sweeps): each
    sweep's saturation reading and the scoreboard limit, of what it measured in full against
    `reference` (a whole pass; default `data` itself). The sweep repeats until these agree
    (`request_repeats.unsettled`)."""
    fits, limit = _fit_repeat(data, reference)
    out: dict[Any, Any] = {key: sweep_reading(s) for key, s in fits.items()}
    if limit is not None:
        out[LIMIT] = limit_reading(limit)
    return out


def _agreement(data: pd.DataFrame) -> Agreement:
    fitted = [_fit_repeat(df, data) for df in _repeats(data)]
    return agree([f for f, _ in fitted], [q for _, q in fitted])


def _note_repeats(element: dict[str, Any], agreement: Agreement) -> None:
    """Say in every determined quantity how many repeats its sweeps agree in (the smallest
    share), and scale its confidence by that share; name the sweeps left out for not
    repeating."""
    agreed, of = agreement.weakest(agreement.repeating)
    left_out = "; ".join(
        f"{s.key[0]} N={s.key[2]} ({', '.join(s.as_dict()['readings'])})"
        for s in agreement.not_repeating
    )
    for q in element.values():
        if q.get("value") is None:
            if left_out:
                q["undetermined"] += f"; sweeps whose readings do not repeat: {left_out}"
            continue
        q["confidence"] = round(q["confidence"] * agreed / of, 4)
        q["evidence"] += f"; every reading used repeats in at least {agreed} of {of} repeats"
        if left_out:
            q["evidence"] += f"; left out, not repeating: {left_out}"


def _sweep_dicts(agreement: Agreement) -> list[dict[str, Any]]:
    """`SweepResult.as_dict` of each sweep's majority reading, with how many repeats read it; a
    sweep without a majority reports no saturation point, undetermined, with the readings."""
    out = []
    for s in agreement.sweeps:
        info = s.as_dict()
        if s.fit is not None:
            out.append(s.fit.as_dict() | {"repeats": info})
            continue
        pattern, k, loads = s.key
        out.append(
            _unread_sweep(
                pattern,
                k,
                loads,
                undetermined=(
                    f"the saturation reading does not repeat: no reading holds a majority of "
                    f"{s.of} repeats ({', '.join(info['readings'])})"
                ),
                repeats=info,
            )
        )
    return out


def _repeats_block(agreement: Agreement, data: pd.DataFrame) -> dict[str, Any]:
    """How many repeats ran and how many sweeps each measured, how many sweeps repeat, and each
    repeat's SM clock range."""
    clocks, measured = [], []
    for df in _repeats(data):
        sm = df["sm_clock_mhz"].to_numpy(dtype=float)
        sm = sm[np.isfinite(sm)]
        clocks.append(None if sm.size == 0 else [float(sm.min()), float(sm.max())])
        measured.append(sum(1 for s in agreement.sweeps if len(measured) in s.ran))
    agreed, of = agreement.weakest(agreement.repeating)
    return {
        "repeats": agreement.repeats,
        "sweeps_by_repeat": measured,
        "sweeps_repeating": len(agreement.repeating),
        "sweeps_not_repeating": len(agreement.not_repeating),
        "weakest_agreement": f"{agreed} of {of} repeats" if agreement.repeating else None,
        "sm_clock_mhz_range_by_repeat": clocks,
    }
