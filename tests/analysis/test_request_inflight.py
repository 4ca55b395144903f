"""Little's-law reading of the requests sweeps (analysis/requests/request_inflight.py) on synthetic
traces whose completion times follow a hand-written table of E requests."""

import numpy as np
import pandas as pd

from gpudissect.analysis.requests.request_inflight import sustained_in_flight

W0 = 300  # one round trip, cycles


def trace(completion, *, threads=range(32, 2049, 32), loads=(1, 2, 4)):
    """UNQ launches of T threads x N loads (R = N x T distinct 128-byte blocks), every thread of
    a run seeing `completion(R)` cycles."""
    rows = []
    for n in loads:
        for t in threads:
            r = n * t
            for run in range(3):
                rows.append(
                    {
                        "pattern": "unq",
                        "merge_threads": 1,
                        "loads_per_thread": n,
                        "threads": t,
                        "run": run,
                        "block_bytes": 128,
                        "footprint_bytes": 128 * r,
                        "elapsed_cycles": np.full(t, completion(r), np.uint32),
                    }
                )
    return pd.DataFrame(rows)


def test_a_table_of_e_requests_is_the_plateau_and_an_upper_bound_closes_it():
    # E = 2560 requests: a launch of R needs ceil(R / E) round trips, so R x W0 / T = R /
    # ceil(R / E), at most E (reached at R = 2560 = 2 x 1280 threads), and larger launches
    # (up to 8192 requests, 3.2 E) never exceed it
    e = 2560
    doc = sustained_in_flight(trace(lambda r: W0 * -(-r // e)), at_most=e, at_most_why="table")
    assert doc["value"] == e and doc["at_least"] == e and doc["at_most"] == e
    assert doc["bytes"] == e * 128


def test_throughput_still_rising_is_a_lower_bound_never_a_plateau():
    # no limit within the sweep: every launch takes one round trip, so R x W0 / T = R grows to
    # the largest launch (4 x 2048 requests) and no plateau is read
    doc = sustained_in_flight(trace(lambda r: W0))
    assert doc["value"] is None and "still rising" in doc["undetermined"]
    assert doc["at_least"] == 4 * 2048 and doc["at_most"] is None
    # an upper bound from the request table closes the interval: never a bare "at least"
    closed = sustained_in_flight(trace(lambda r: W0), at_most=10_000, at_most_why="table")
    assert closed["value"] is None and (closed["at_least"], closed["at_most"]) == (8192, 10_000)
