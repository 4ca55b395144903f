"""Requests one SM sustains in flight, by Little's law, from the Thread-Latency sweeps read as a
latency-against-throughput sweep (a reading independent of the spike analysis of
`analysis.requests.requests`). Sees only the trace.

A launch configuration sends ``R`` memory requests (its distinct blocks, ``footprint_bytes /
block_bytes``) and completes in ``T`` cycles (per run the slowest thread's time, the median over
runs and repeats): its achieved throughput is ``R / T`` requests per cycle. Every request spends
at least one unloaded round trip ``W0`` in flight (the latency of the trace's fewest-request
launch), so by Little's law the SM held on average at least ``L = R x W0 / T`` requests in
flight over the launch: each ``L`` bounds the SM's limit from below. As launches grow, ``L``
rises while the SM has room and levels off at what it sustains. The **plateau** is reached when
requests grow at least `plateau_requests_ratio`-fold past the first point within
`plateau_tolerance` of the largest ``L`` without raising it: the sustained requests in flight
are then that largest ``L`` (a lower bound on what the SM holds at once, by the argument
above), bounded above by `at_most` where the request table's reading gives one (a table of
``E`` requests holds no more); the plateau's median and least ``L`` go in the evidence (a table
that frees its entries in whole round trips sustains less between its steps). Without a plateau
(throughput still rising at the largest launch) the reading is undetermined, with the reason,
between "at least" the largest ``L`` and `at_most` where given. Bytes in flight are
requests x ``block_bytes``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..common.result import quantity, undetermined

KEYS = ["pattern", "merge_threads", "loads_per_thread"]


def throughput_table(data: pd.DataFrame) -> pd.DataFrame:
    """One row per launch configuration: ``requests`` (distinct blocks), ``completion_cycles``
    (median over runs of each run's slowest thread), ``throughput`` (requests per cycle)."""
    slowest = np.fromiter((np.max(a) for a in data["elapsed_cycles"]), np.float64, len(data))
    df = data[[*KEYS, "threads", "footprint_bytes", "block_bytes"]].assign(slowest=slowest)
    g = df.groupby([*KEYS, "threads"], sort=True)
    out = g.agg(
        footprint_bytes=("footprint_bytes", "first"),
        block_bytes=("block_bytes", "first"),
        completion_cycles=("slowest", "median"),
    ).reset_index()
    out["requests"] = out["footprint_bytes"] // out["block_bytes"]
    out["throughput"] = out["requests"] / np.maximum(out["completion_cycles"], 1.0)
    return out


def sustained_in_flight(
    data: pd.DataFrame,
    *,
    pattern: str = "unq",
    plateau_tolerance: float = 0.05,
    plateau_requests_ratio: float = 2.0,
    at_most: int | None = None,
    at_most_why: str | None = None,
) -> dict[str, Any]:
    """The Little's-law reading of the `pattern` sweeps (one request per thread and load under
    UNQ): the sustained requests in flight of one SM, or a lower bound; `at_most`: an upper
    bound from elsewhere (the request table), `at_most_why` what it is. See the module doc."""
    table = throughput_table(data)
    if table.empty:
        return undetermined("the trace has no launch")
    fewest = table.loc[table["requests"].idxmin()]
    w0 = float(fewest["completion_cycles"])
    mine = table[table["pattern"] == pattern].sort_values("requests", kind="stable")
    if mine.empty:
        return undetermined(f"the trace has no {pattern} sweep")
    in_flight = (mine["throughput"] * w0).to_numpy()
    requests = mine["requests"].to_numpy()
    best = float(in_flight.max())
    block = int(mine["block_bytes"].iloc[0])
    near = np.flatnonzero(in_flight >= (1.0 - plateau_tolerance) * best)
    first = int(near[0])
    past = requests >= requests[first]
    basis = (
        f"unloaded round trip W0 = {w0:.0f} cycles ({int(fewest['requests'])} requests at "
        f"{int(fewest['threads'])} threads); {pattern} launches of {int(requests.min())} to "
        f"{int(requests.max())} requests; the largest R x W0 / T is {best:.0f} requests at "
        f"{int(requests[int(np.argmax(in_flight))])} requests"
    )
    upper = (
        {"at_most": int(at_most), "at_most_bytes": int(at_most) * block, "at_most_why": at_most_why}
        if at_most is not None
        else {"at_most": None, "at_most_why": "the request table gives no upper bound"}
    )
    if requests.max() < plateau_requests_ratio * requests[first]:
        why = (
            f"throughput still rising: R x W0 / T comes within {plateau_tolerance:.0%} of its "
            f"largest value only at {int(requests[first])} requests, and the sweep ends at "
            f"{int(requests.max())} (a plateau needs {plateau_requests_ratio:g}x that); {basis}"
        )
        return (
            undetermined(why)
            | {
                "at_least": round(best, 1),
                "at_least_bytes": round(best * block, 1),
            }
            | upper
        )
    level = in_flight[past]
    return (
        quantity(
            round(best, 1),
            unit="requests",
            confidence=0.8 if at_most is not None and best <= at_most else 0.6,
            method=(
                "Little's law on the latency-against-throughput sweep: requests in flight at least "
                "achieved throughput (requests / completion cycles) x the unloaded round trip; the "
                "largest value once throughput stops rising (plateau within "
                f"{plateau_tolerance:.0%} over {plateau_requests_ratio:g}x the requests)"
            ),
            evidence=(
                f"{basis}; plateau from {int(requests[first])} requests on, {int(past.sum())} "
                f"launches, median {float(np.median(level)):.0f}, least {float(level.min()):.0f} "
                "requests in flight"
            ),
        )
        | {"at_least": round(best, 1), "bytes": round(best * block, 1)}
        | upper
    )
