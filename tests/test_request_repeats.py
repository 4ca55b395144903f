"""Repeats of the requests sweep: only saturation readings that a majority of repeats read alike
are classified; synthetic traces whose repeats agree or disagree, the stopping rule, and a
simulated profile whose repeats differ by noise seed and agree."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_requests import mshr_curve, synthetic_trace

from gpudissect.analysis.requests.request_repeats import majority, settled, unsettled
from gpudissect.analysis.requests.requests import analyse
from gpudissect.exceptions import ConfigError
from gpudissect.experiments.requests import (
    Repeats,
    RequestsSweep,
    ThreadRange,
    parse_params,
    run,
)

REPO = Path(__file__).resolve().parents[1]
SWEEPS = [("unq", 1), ("unq", 2), ("merger2", 1), ("merger4", 2)]


def repeated(curves, **kw):
    """One synthetic trace of len(curves) repeats, repeat r drawn from curves[r]."""
    frames = [
        synthetic_trace(c, sweeps=SWEEPS, seed=r, **kw).assign(repeat=r)
        for r, c in enumerate(curves)
    ]
    return pd.concat(frames, ignore_index=True)


def by_sweep(doc):
    return {(s["pattern"], s["loads_per_thread"]): s for s in doc["sweeps"]}


def test_majority_needs_more_than_half():
    assert majority(["a", "a", "b"]) == ("a", 2)
    assert majority(["a", "b", "a", "b"]) is None  # 2 of 4 is no majority
    assert majority(["a", "b", "c"]) is None
    assert settled([{"x": 1, "y": 2}, {"x": 1, "y": 3}, {"x": 1, "y": 2}])
    assert not settled([{"x": 1}, {"x": 2}])


def test_repeating_stops_once_no_further_repeat_can_make_a_reading_repeat():
    # x repeats; y reads anew each time. Of at most 7 repeats, y's best reading held by 2 of 6
    # could reach 3 of 7 at most: no majority whatever the 7th reads, so the 7th is not run
    seen = [1, 2, 3, 2, 4, 5]
    readings = [{"x": 0, "y": v} for v in seen]
    for done in (3, 4, 5):  # with 4 or 3 repeats left, y could still reach 4 of 7
        assert not settled(readings[:done], max_repeats=7)
    assert settled(readings, max_repeats=7)
    assert not settled(readings)  # without a most, only a majority settles
    # the same count with more repeats to come is not hopeless: 2 of 6 may become 5 of 9
    assert not settled(readings, max_repeats=9)
    # a sweep that has a majority settles as before, whatever the most
    assert settled([{"x": 0, "y": 1}] * 2 + [{"x": 0, "y": 2}], max_repeats=7)


def test_repeats_that_agree_are_classified_and_the_document_says_how_many():
    # three repeats of an MSHR of 128 entries: UNQ N=1 at 128, N=2 at 64, Merger2 N=1 and
    # Merger4 N=2 at 256 (test_requests' hand-derived points), each read by all three
    doc = analyse(repeated([mshr_curve()] * 3), provenance={"device": "m"})
    el = doc["elements"]["requests"]
    assert el["kind"]["value"] == "mshr" and el["entries"]["value"] == 128
    assert "at least 3 of 3 repeats" in el["entries"]["evidence"]
    sweeps = by_sweep(doc)
    assert sweeps[("unq", 1)]["saturation_threads"] == 128
    assert all(s["repeats"]["text"] == "3 of 3 repeats" for s in doc["sweeps"])
    assert doc["repeats"]["repeats"] == 3 and doc["repeats"]["sweeps_not_repeating"] == 0


def test_a_reading_of_two_repeats_in_three_counts_with_less_confidence():
    one = analyse(repeated([mshr_curve()]), provenance={"device": "m"})
    # repeat 2 reads a table of 64 entries: every UNQ and Merger sweep moves, 2 of 3 still agree
    curves = [mshr_curve(), mshr_curve(), mshr_curve(64)]
    doc = analyse(repeated(curves), provenance={"device": "m"})
    el = doc["elements"]["requests"]
    assert el["entries"]["value"] == 128
    assert by_sweep(doc)[("unq", 1)]["repeats"]["text"] == "2 of 3 repeats"
    assert by_sweep(doc)[("unq", 1)]["repeats"]["readings"][2] == "64->66 threads"
    conf = one["elements"]["requests"]["kind"]["confidence"]
    assert el["kind"]["confidence"] == pytest.approx(conf * 2 / 3, abs=1e-4)


def test_repeats_that_disagree_leave_the_table_undetermined_with_the_readings():
    # 128, 96 and 64 entries: UNQ N=1 saturates at 128, 96 and 64 threads - no majority for
    # any sweep, so nothing is classified and every sweep lists its three readings
    doc = analyse(
        repeated([mshr_curve(128), mshr_curve(96), mshr_curve(64)]), provenance={"device": "x"}
    )
    el = doc["elements"]["requests"]
    assert el["kind"]["value"] is None and el["entries"]["value"] is None
    assert "do not repeat" in el["kind"]["undetermined"]
    unq1 = by_sweep(doc)[("unq", 1)]
    assert unq1["saturation_threads"] is None and "does not repeat" in unq1["undetermined"]
    assert unq1["repeats"]["readings"] == ["128->130 threads", "96->98 threads", "64->66 threads"]
    assert unq1["repeats"]["text"] == "no majority"
    assert doc["repeats"]["sweeps_repeating"] == 0


def test_repeats_config_is_checked():
    section = {
        "enabled": True, "path": "ca", "patterns": ["unq"], "loads_per_thread": [1],
        "threads": {"start": 2, "stop": 64, "step": 2}, "runs": 1, "warmup_launches": 0,
        "block_bytes": 128, "repeats": {"min": 5, "max": 3},
    }  # fmt: skip
    with pytest.raises(ConfigError, match=r"x\.repeats\.max: 3 is below min 5"):
        parse_params(section, "x")


def test_simulated_repeats_differ_by_seed_agree_and_stop_at_min():
    from gpudissect.backends.sim import SimBackend

    sweep = RequestsSweep(
        True, "ca", ("unq", "merger2"), (1, 2), ThreadRange(2, 320, 2), 3, 1, 128, Repeats(3, 7)
    )
    backend = SimBackend(profile_path=REPO / "config/devices/tesla_m2070.yaml", seed=1)
    data = run(backend, sweep, device=None)
    assert sorted(data["repeat"].unique()) == [0, 1, 2]  # agreed at min: no fourth repeat
    a, b = (np.concatenate(data[data["repeat"] == r]["elapsed_cycles"].tolist()) for r in (0, 1))
    assert not np.array_equal(a, b)  # the noise differs between repeats
    doc = analyse(data, provenance={"device": "tesla_m2070"})
    sat = {(s["pattern"], s["loads_per_thread"]): s["saturation_threads"] for s in doc["sweeps"]}
    # Lashgar Sec. 5.1: UNQ N=1 at 128, N=2 at 64, Merger2 N=1 at 256 (within 4 threads)
    assert abs(sat[("unq", 1)] - 128) <= 4 and abs(sat[("merger2", 1)] - 256) <= 4
    assert all(s["repeats"]["text"] == "3 of 3 repeats" for s in doc["sweeps"])
    assert doc["repeats"]["weakest_agreement"] == "3 of 3 repeats"
    again = run(SimBackend(profile_path=backend.profile_path, seed=1), sweep, device=None)
    pairs = zip(data["elapsed_cycles"], again["elapsed_cycles"], strict=True)
    assert all(np.array_equal(x, y) for x, y in pairs)


def test_sweep_repeats_until_the_readings_agree():
    # a backend whose step moves for the first two repeats and then settles at 40 threads:
    # readings 20, 30, 40, 40, 40 -> after five repeats 40 holds 3 of 5
    from gpudissect.experiments.requests import RequestsResult

    class Drifting:
        calls = 0

        def run(self, work, *, seed):
            repeat = seed // 32  # 32 points per pass (threads 2..64 step 2)
            step = {0: 20, 1: 30}.get(repeat, 40)
            t = 400 + (400 if work.threads > step else 0)
            return RequestsResult(np.full((1, work.threads), t, np.uint32), 1000.0)

    sweep = RequestsSweep(
        True, "ca", ("unq",), (1,), ThreadRange(2, 64, 2), 1, 0, 128, Repeats(3, 7)
    )
    data = run(Drifting(), sweep, device=None)
    assert data["repeat"].max() == 4
    doc = analyse(data, provenance={"device": "d"})
    assert doc["sweeps"][0]["saturation_threads"] == 40
    assert doc["sweeps"][0]["repeats"]["text"] == "3 of 5 repeats"


def test_the_figure_says_when_the_repeats_readings_differ():
    import pandas as pd

    from gpudissect.plotting.requests import plot_thread_latency

    table = pd.DataFrame(
        {
            "pattern": "unq",
            "loads_per_thread": [1, 1, 2, 2],
            "threads": [2, 4, 2, 4],
            "latency_cycles": [300.0, 310.0, 320.0, 330.0],
            "variance_cycles2": [1.0, 2.0, 1.0, 2.0],
        }
    )
    sweeps = [
        {"pattern": "unq", "loads_per_thread": 1, "saturation_threads": None,
         "repeats": {"text": "3 of 3 repeats"}},
        {"pattern": "unq", "loads_per_thread": 2, "saturation_threads": None,
         "undetermined": "no majority", "repeats": {"text": "no majority"}},
    ]  # fmt: skip
    fig, axes = plot_thread_latency(table, sweeps, pattern="unq", title="t")
    titles = [ax.get_title() for ax in axes]
    assert titles[0].endswith("no saturation up to 4 threads (3 of 3 repeats)")
    assert titles[1].endswith("the repeats' readings differ (no majority)")


def test_a_key_is_judged_over_the_repeats_that_measured_it():
    # y ran in every repeat, x only in the first three (settled there): x's 2 of 3 is a
    # majority, and y's 2 of 4 is not, with one repeat of at most five left (3 of 5 possible)
    readings = [{"x": 1, "y": 1}, {"x": 1, "y": 2}, {"x": 2, "y": 1}, {"y": 2}]
    assert unsettled(readings, max_repeats=5) == {"y"}
    # had x's three readings been counted with None for the fourth repeat, 2 of 4 would not be
    # a majority; y with no repeat left is settled, undetermined
    assert unsettled(readings, max_repeats=4) == set()
    assert unsettled(readings + [{"y": 2}], max_repeats=5) == set()


class Unsettled:
    """A backend of sweeps (unq, N = 1-3, threads 2-64): every sweep steps at 40 threads, but
    unq N=2 steps at 20 threads in repeats 0 and 2, and N=3's smallest launch is twice as slow
    as one load (scoreboard limit 2) in repeats 1 and 3 onwards, N=2's in repeat 0 (limit 1),
    neither in repeat 2 (at least 3). Records the launches each repeat ran."""

    def __init__(self):
        self.launches = {}

    def run(self, work, *, seed):
        from gpudissect.experiments.requests import RequestsResult

        repeat, point = divmod(seed, 96)  # 3 sweeps x 32 thread counts per pass
        self.launches.setdefault(repeat, []).append(point)
        n = work.loads_per_thread
        step = 20 if (n, repeat) in {(2, 0), (2, 2)} else 40
        slow = (n == 3 and repeat in (1, 3, 4)) or (n == 2 and repeat == 0)
        t = (2 if slow else 1) * (400 + (400 if work.threads > step else 0))
        return RequestsResult(np.full((1, work.threads), t, np.uint32), 1000.0)


def test_later_repeats_run_only_what_is_unsettled():
    backend = Unsettled()
    sweep = RequestsSweep(True, "ca", ("unq",), (1, 2, 3), ThreadRange(2, 64, 2), 1, 0, 128,
                          Repeats(3, 5))  # fmt: skip
    data = run(backend, sweep, device=None)
    # three whole passes; after them N=2 reads 20, 40, 20 (settled, 2 of 3) and the limit 1, 2,
    # at least 3 (no majority): repeat 3 runs only the three first launches; the limit then
    # reads 2, 2 of 4, still open with one repeat left, so repeat 4 runs them again
    assert [len(backend.launches[r]) for r in range(5)] == [96, 96, 96, 3, 3]
    assert backend.launches[3] == [0, 32, 64]
    assert sorted(data["repeat"].unique()) == [0, 1, 2, 3, 4]
    doc = analyse(data, provenance={"device": "d"})
    sweeps = {s["loads_per_thread"]: s for s in doc["sweeps"]}
    assert sweeps[2]["saturation_threads"] == 20
    assert sweeps[2]["repeats"]["text"] == "2 of 3 repeats"
    assert sweeps[2]["repeats"]["repeats_run"] == [0, 1, 2]
    assert sweeps[1]["repeats"]["text"] == "3 of 3 repeats"
    limit = doc["elements"]["requests"]["per_warp_limit"]
    assert limit["value"] == 2 and "3 of 5 repeats" in limit["evidence"]
    assert doc["repeats"]["sweeps_by_repeat"] == [3, 3, 3, 0, 0]
    assert doc["repeats"]["weakest_agreement"] == "2 of 3 repeats"
    from gpudissect.report.sections_requests import requests_section

    text = "\n".join(requests_section(doc, []))
    assert (
        "The sweep ran 5 times (the first 3 over every sweep, then only what was not yet "
        "settled: 0, 0 of 3 sweeps)" in text
    )


def test_an_unsettled_sweep_alone_is_run_again_and_judged_over_its_own_repeats():
    # unq N=2 steps at 20, 30, 40, 40, 40 threads: the first three passes hold no majority, so
    # repeats 3 and 4 run N=2's 32 launches alone
    class Drifting(Unsettled):
        def run(self, work, *, seed):
            from gpudissect.experiments.requests import RequestsResult

            repeat, point = divmod(seed, 64)  # 2 sweeps x 32
            self.launches.setdefault(repeat, []).append(point)
            step = {0: 20, 1: 30}.get(repeat, 40) if work.loads_per_thread == 2 else 40
            t = 400 + (400 if work.threads > step else 0)
            return RequestsResult(np.full((1, work.threads), t, np.uint32), 1000.0)

    backend = Drifting()
    sweep = RequestsSweep(True, "ca", ("unq",), (1, 2), ThreadRange(2, 64, 2), 1, 0, 128,
                          Repeats(3, 7))  # fmt: skip
    data = run(backend, sweep, device=None)
    assert [len(backend.launches[r]) for r in sorted(backend.launches)] == [64, 64, 64, 32, 32]
    assert backend.launches[3] == list(range(32, 64))
    doc = analyse(data, provenance={"device": "d"})
    sweeps = {s["loads_per_thread"]: s for s in doc["sweeps"]}
    assert sweeps[2]["saturation_threads"] == 40
    assert sweeps[2]["repeats"]["text"] == "3 of 5 repeats"
    assert sweeps[1]["repeats"]["text"] == "3 of 3 repeats"
    # the confidence is scaled by the smallest share that agrees: 3 of 5
    assert doc["repeats"]["weakest_agreement"] == "3 of 5 repeats"
