"""The requests family (Lashgar et al.): the variance curve, spike detection and the MSHR/PRT
classifier on synthetic traces with hand-derived answers; the twins through the real sweep; the
GPU run (`pytest -m gpu`)."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpudissect.analysis.requests.requests import (
    SpikeDetector,
    analyse,
    classify,
    figure_table,
    fit_sweeps,
    scoreboard_limit,
    thread_latency_table,
    variance3,
)
from gpudissect.experiments.requests import (
    PATTERNS,
    RequestsSweep,
    ThreadRange,
    pattern_offsets,
    run,
)
from gpudissect.experiments.requests import SCHEMA as _SCHEMA

REPO = Path(__file__).resolve().parents[1]
FULL_SCHEMA_NAMES = _SCHEMA.names
THREADS = np.arange(2, 1025, 2)


# --- synthetic traces -----------------------------------------------------------------------


def synthetic_trace(curve, *, sweeps, runs=3, noise=0.5, seed=0):
    """A trace whose run latencies are `curve(pattern_K, N, threads)` + Gaussian noise, every
    thread of a run seeing the same time."""
    rng = np.random.default_rng(seed)
    rows = []
    for pattern, n in sweeps:
        k = PATTERNS[pattern]
        for t in THREADS:
            for r in range(runs):
                value = curve(k, n, int(t)) + rng.normal(0, noise)
                rows.append(
                    {
                        "point": 0,
                        "pattern": pattern,
                        "merge_threads": k,
                        "loads_per_thread": n,
                        "threads": int(t),
                        "run": r,
                        "block_bytes": 128,
                        "footprint_bytes": 128 * n * int(t),
                        "elapsed_cycles": np.full(int(t), round(value), np.uint32),
                        "sm_clock_mhz": 1000.0,
                    }
                )
    return pd.DataFrame(rows)


L = 400


def mshr_curve(entries=128, merge=8):
    # one round trip L, 1 cycle per thread of write-back in the first warp, and one more round
    # trip as soon as the distinct blocks N * ceil(T / K) exceed the entries
    def curve(k, n, t):
        blocks = n * -(-t // k)
        return L + min(t, 32) + (L if blocks > entries else 0) + (L if min(t, k) > merge else 0)

    return curve


def prt_curve(entries=44, limit=3):
    # one more round trip once warp load instructions N * ceil(T / 32) exceed the entries, and
    # when N exceeds the scoreboard limit (load N waits for load 1)
    def curve(k, n, t):
        instr = n * -(-t // 32)
        return L + min(t, 32) + (L if instr > entries else 0) + (L if n > limit else 0)

    return curve


def test_variance_is_the_papers_three_point_unbiased_variance():
    # {0, 0, 3}: mean 1, squares 1 + 1 + 4 = 6, / 2 = 3; {0, 3, 3}: mean 2, 4 + 1 + 1 = 6 -> 3
    v = variance3(np.array([0.0, 0.0, 0.0, 3.0, 3.0, 3.0]))
    assert np.isnan(v[0]) and np.isnan(v[-1])
    assert v[1:-1].tolist() == [0.0, 3.0, 3.0, 0.0]


def test_point_latency_is_the_harmonic_mean_of_run_means():
    # runs with mean 100, 200, 200: harmonic mean 3 / (1/100 + 2/200) = 150
    df = pd.DataFrame(
        {
            "pattern": "unq",
            "merge_threads": 1,
            "loads_per_thread": 1,
            "threads": 2,
            "run": [0, 1, 2],
            "elapsed_cycles": [np.array([90, 110]), np.array([200, 200]), np.array([150, 250])],
        }
    )
    t = thread_latency_table(df)
    assert t["latency_cycles"].iloc[0] == pytest.approx(150.0)


def test_harmonic_means_of_interleaved_groups_sum_as_np_sum_does():
    # rows of three points interleaved (the repeats of a trace): 2 threads, 3 runs at run means
    # 100, 200, 200 (harmonic 150, above); 4 threads, 2 runs at 300, 100 (2 / (4/300) = 150);
    # 8 threads, 9 runs of 77 to 101 cycles; each equal, to the last bit, to len / np.sum of
    # the reciprocals in row order (below 8 values np.sum adds one after another; it has its
    # own order from 8 on)
    means = {2: [100, 200, 200], 4: [300, 100], 8: [81, 83, 97, 101, 79, 88, 90, 77, 85]}
    order = [2, 8, 4, 8, 2, 8, 8, 4, 8, 8, 2, 8, 8, 8]
    seen = {k: 0 for k in means}
    rows = []
    for t in order:
        m = means[t][seen[t]]
        seen[t] += 1
        rows.append({"threads": t, "run": seen[t], "elapsed_cycles": np.full(t, m, np.uint32)})
    df = pd.DataFrame(rows).assign(pattern="unq", merge_threads=1, loads_per_thread=1)
    t = thread_latency_table(df)
    assert t["threads"].tolist() == [2, 4, 8]
    assert t["runs"].tolist() == [3, 2, 9]
    assert t["latency_cycles"].tolist()[:2] == pytest.approx([150.0, 150.0])
    assert 77 < t["latency_cycles"].iloc[2] < 101
    for threads, got in zip(t["threads"], t["latency_cycles"], strict=True):
        values = np.asarray(means[threads], np.float64)
        assert got == len(values) / np.sum(1.0 / np.maximum(values, 1e-9))


def test_detector_names_the_last_count_before_the_rise_and_tells_small_from_large():
    # flat 400 + noise; a 20-cycle serialisation step after 96 threads; a 350-cycle saturation
    # step after 128 threads (the paper's Fig. 1). 0.25 x 400 = 100 separates them.
    rng = np.random.default_rng(3)
    y = 400 + 20 * (THREADS > 96) + 350 * (THREADS > 128) + rng.normal(0, 0.5, THREADS.size)
    det = SpikeDetector().fit(THREADS, y)
    kinds = [(s.threads, s.next_threads, s.kind) for s in det.spikes]
    assert kinds == [(96, 98, "serialisation"), (128, 130, "saturation")]
    assert det.saturation.threads == 128


def test_no_clear_spike_reports_no_saturation_never_a_forced_number():
    # a steady ramp (write-back serialisation, 1 cycle per 2 threads) with noise: no step
    rng = np.random.default_rng(5)
    y = 400 + THREADS / 2 + rng.normal(0, 1.0, THREADS.size)
    assert SpikeDetector().fit(THREADS, y).saturation is None
    trace = synthetic_trace(lambda k, n, t: 400 + t / 2, sweeps=[("unq", 1), ("unq", 2)])
    doc = analyse(trace, provenance={"device": "flat"})
    el = doc["elements"]["requests"]
    for key in ("kind", "entries", "max_outstanding"):
        assert el[key]["value"] is None and "no saturation up to 1024" in el[key]["undetermined"]
    assert all(s["saturation_threads"] is None for s in doc["sweeps"])
    assert all(s["no_saturation_up_to_threads"] == 1024 for s in doc["sweeps"])


def test_mshr_classified_with_entries_and_merge_capacity():
    # MSHR 128 entries merging 8: UNQ N=1 saturates after 128 threads (128 blocks), N=2 after
    # 64, Merger2 N=1 / Merger4 N=2 / Merger8 N=4 after 256 (128 merged blocks). Merger16 costs
    # a second round trip from 10 threads on (9 > 8 threads share a block): merge overflow.
    sweeps = [("unq", 1), ("unq", 2), ("merger2", 1), ("merger4", 2), ("merger8", 4),
              ("merger16", 1)]  # fmt: skip
    doc = analyse(synthetic_trace(mshr_curve(), sweeps=sweeps), provenance={"device": "m"})
    sat = {(s["pattern"], s["loads_per_thread"]): s["saturation_threads"] for s in doc["sweeps"]}
    assert sat == {("unq", 1): 128, ("unq", 2): 64, ("merger2", 1): 256, ("merger4", 2): 256,
                   ("merger8", 4): 256, ("merger16", 1): None}  # fmt: skip
    el = doc["elements"]["requests"]
    assert el["kind"]["value"] == "mshr"
    assert el["entries"]["value"] == 128 and el["entries"]["range"] == [128, 128]
    assert el["merge_capacity"]["value"] == 8
    assert el["max_outstanding"]["value"] == 128


def test_prt_classified_and_scoreboard_sweeps_left_out():
    # PRT 44 entries, scoreboard 3: N=2 saturates after 22 warps (704 threads, 44 instructions
    # fit, 46 do not), N=3 after 14 warps (448: 42 fit, 45 do not); Merger2 with N=2 at the same
    # 704 (instructions do not depend on merging) - which an MSHR cannot explain (352 x 2 = 704
    # blocks vs 1408 for UNQ). N=4 exceeds the scoreboard (two round trips at 2 threads) and is
    # left out. Intervals: [44, 45], [42, 44], [44, 45] -> 44; 44 x 32 = 1408 requests.
    sweeps = [("unq", 1), ("unq", 2), ("unq", 3), ("unq", 4), ("merger2", 2)]
    doc = analyse(synthetic_trace(prt_curve(), sweeps=sweeps), provenance={"device": "k"})
    el = doc["elements"]["requests"]
    assert el["per_warp_limit"]["value"] == 3
    assert el["kind"]["value"] == "prt"
    assert el["entries"]["value"] == 44 and el["entries"]["range"] == [44, 44]
    assert el["max_outstanding"]["value"] == 1408
    assert el["merge_capacity"]["value"] is None


def test_prt_entries_that_every_sweep_allows_alike_are_a_range_not_its_upper_end():
    # PRT 46 entries, scoreboard 3: N=2 saturates after 23 warps (46 instructions fit, 48 do
    # not: sizes 46 and 47), N=3 after 15 warps (45 fit, 48 do not: 45 to 47). Every sweep
    # allows 46 and 47 alike: the entries are the range [46, 47], and the requests 32 x that
    sweeps = [("unq", 1), ("unq", 2), ("unq", 3), ("merger2", 2)]
    doc = analyse(synthetic_trace(prt_curve(46), sweeps=sweeps), provenance={"device": "k"})
    el = doc["elements"]["requests"]
    assert el["kind"]["value"] == "prt"
    assert el["entries"]["value"] is None and el["entries"]["range"] == [46, 47]
    assert "from 46 to 47 alike" in el["entries"]["undetermined"]
    assert el["max_outstanding"]["value"] is None
    assert el["max_outstanding"]["range"] == [46 * 32, 47 * 32]


def test_early_saturations_bound_requests_when_the_prt_entries_are_a_range():
    # the entries are the range [46, 47] (no size allowed by more sweeps); two sweeps saturate
    # below 46 warp instructions and agree on [1200, 1280] distinct requests: the request limit
    # is the largest count consistent with both, with the classification's confidence (a range
    # of entries has none of its own)
    from types import SimpleNamespace

    from gpudissect.analysis.requests.request_table import _prt_outstanding

    def sweep(threads, mshr):
        return SimpleNamespace(
            pattern="unq",
            loads_per_thread=1,
            saturation=SimpleNamespace(threads=threads, next_threads=threads + 32),
            bounds=lambda kind: (38, 40) if kind == "prt" else mshr,
        )

    entries = {"value": None, "undetermined": "alike", "range": [46, 47]}
    early = [sweep(1248, (1200, 1280)), sweep(1280, (1216, 1300))]
    got = _prt_outstanding(early, 46, None, entries, 0.5)
    assert (got["value"], got["range"]) == (1280, [1216, 1280])
    assert got["confidence"] == pytest.approx(0.5 * 0.8)
    assert "entries x 32 would be 1472-1504" in got["evidence"]


def test_steps_that_sweeps_issuing_more_contradict_are_no_table():
    # N=2 and Merger2 N=2 step as a 44-entry PRT would; Merger16 N=3 issues up to 1024 threads
    # with no stall: 96 warp instructions (a 44-entry PRT would have stalled it) but 192 blocks
    # (within what the MSHR reading of the steps allows). So the PRT the steps agree on is no
    # table (an H100 read a PRT from two such steps beside 24 sweeps that issued more): every
    # quantity is undetermined with the reason, and the issued counts stay as lower bounds.
    base = prt_curve()

    def curve(k, n, t):
        return L + min(t, 32) if k == 16 else base(k, n, t)

    sweeps = [("unq", 2), ("merger2", 2), ("merger16", 3)]
    doc = analyse(synthetic_trace(curve, sweeps=sweeps), provenance={"device": "k"})
    el = doc["elements"]["requests"]
    sat = {(s["pattern"], s["loads_per_thread"]): s["saturation_threads"] for s in doc["sweeps"]}
    assert sat[("merger16", 3)] is None and sat[("unq", 2)] is not None
    for key in ("kind", "entries", "max_outstanding"):
        assert el[key]["value"] is None, key
        assert "1 sweeps issued more than 45 without a stall" in el[key]["undetermined"]
    assert el["entries"]["at_least"]["prt"] == 96
    # without the contradicting sweep the same steps are the 44-entry PRT
    doc = analyse(synthetic_trace(curve, sweeps=sweeps[:2]), provenance={"device": "k"})
    assert doc["elements"]["requests"]["kind"]["value"] == "prt"


def test_one_step_that_sweeps_issuing_more_contradict_under_either_hypothesis_is_no_table():
    # UNQ N=2 alone steps (at 704 threads: 1408 blocks or 44 warp instructions fit); UNQ N=3
    # issues 3072 blocks and 96 instructions with no stall, past both: no table is read, where
    # before it was "cannot separate MSHR from PRT" with no bounds at all
    base = prt_curve()

    def curve(k, n, t):
        return L + min(t, 32) if n == 3 else base(k, n, t)

    sweeps = [("unq", 1), ("unq", 2), ("unq", 3)]
    el = analyse(synthetic_trace(curve, sweeps=sweeps), provenance={"device": "k"})["elements"][
        "requests"
    ]
    for key in ("kind", "entries", "max_outstanding"):
        assert el[key]["value"] is None
        assert (
            "agree on no table that the other sweeps allow: 1 issued more"
            in (el[key]["undetermined"])
        )
    assert el["entries"]["at_least"]["prt"] == 96


def test_lower_bounds_of_a_launch_bound_by_its_issue_rate_are_the_requests_in_flight():
    # no sweep saturates, but each launch's latency grows with its requests from the first on (a
    # steady issue rate, 1 request per cycle, over a 400-cycle round trip): Little's law reads
    # about 400 in flight, far under the 3072 one launch issued, so the table is bounded below by
    # those 400, not by the issued count, which stays beside it
    def curve(k, n, t):
        return L + n * -(-t // k)

    sweeps = [("unq", 1), ("unq", 2), ("unq", 3)]
    doc = analyse(synthetic_trace(curve, sweeps=sweeps), provenance={"device": "q"})
    el = doc["elements"]["requests"]
    held = el["sustained_in_flight"]["at_least"]
    assert 300 < held < 500
    out = el["max_outstanding"]
    assert out["value"] is None and out["at_least"] == math.ceil(held)
    assert out["issued_without_stall"] == 3072
    assert el["entries"]["at_least"] == {"mshr": math.ceil(held), "prt": math.ceil(held / 32)}
    assert el["entries"]["issued_without_stall"] == {"mshr": 3072, "prt": 96}
    assert "not all in flight at once: by Little's law" in out["undetermined"]


def test_one_saturated_sweep_cannot_separate_mshr_from_prt():
    table = thread_latency_table(synthetic_trace(mshr_curve(), sweeps=[("unq", 1)]))
    el = classify(fit_sweeps(table), limit=None)
    assert el["kind"]["value"] is None and "separate" in el["kind"]["undetermined"]


def test_scoreboard_limit_lower_bound_when_no_n_exceeds_it():
    table = thread_latency_table(synthetic_trace(mshr_curve(), sweeps=[("unq", 1), ("unq", 2)]))
    q = scoreboard_limit(table)
    assert q["value"] is None and q["at_least"] == 2


def test_pattern_offsets_match_the_simulators_merger_addresses():
    from gpudissect.sim.coalescing import merger_addresses

    for k in PATTERNS.values():
        a = pattern_offsets(threads=70, loads_per_thread=3, merge_threads=k, block_bytes=128)
        assert np.array_equal(a, merger_addresses(threads=70, loads_per_thread=3,
                                                  threads_per_block=k))  # fmt: skip
        # exactly K neighbouring threads share a block within a load; loads never share
        assert len(np.unique(a)) == 3 * -(-70 // k)


def test_kernel_file_defines_every_variant():
    src = (REPO / "kernels" / "requests.cu").read_text()
    assert "DEFINE_PATH(ca, false)" in src and "DEFINE_PATH(cg, true)" in src
    assert all(f"DEFINE_REQUESTS(PATH, CG, {n})" in src for n in range(1, 9))
    assert "DEFINE_PATH_SM(ca, false)" in src and "DEFINE_PATH_SM(cg, true)" in src
    assert all(f"DEFINE_REQUESTS_SM(PATH, CG, {n})" in src for n in range(1, 9))


def test_thread_range_past_one_block_steps_wide_and_stops_at_the_device():
    r = ThreadRange(2, None, 2, 256)
    counts = r.counts(2048)
    assert counts[:3] == (2, 4, 6) and counts[511] == 1024
    assert counts[512:] == (1280, 1536, 1792, 2048)
    assert ThreadRange(2, 1024, 2).counts() == tuple(range(2, 1025, 2))
    with pytest.raises(ValueError, match="auto"):
        r.counts()


def test_threads_past_one_block_are_split_evenly_in_whole_warps():
    from gpudissect.experiments.requests import block_threads_of, blocks_of

    # 1536 threads: two blocks of 768 (an SM that holds 1536 threads holds both), not 1024 + 512
    assert (blocks_of(1536), block_threads_of(1536)) == (2, 768)
    assert (blocks_of(1056), block_threads_of(1056)) == (2, 544)  # 528 rounded up to 17 warps
    assert (blocks_of(2048), block_threads_of(2048)) == (2, 1024)
    assert (blocks_of(1000), block_threads_of(1000)) == (1, 1000)


def test_bad_thread_stop_names_the_key_value_and_what_is_allowed():
    from gpudissect.exceptions import ConfigError
    from gpudissect.experiments.requests import parse_params

    section = {
        "enabled": True, "path": "ca", "patterns": ["unq"], "loads_per_thread": [1],
        "threads": {"start": 2, "stop": "most", "step": 2}, "runs": 1, "warmup_launches": 0,
        "block_bytes": 128,
    }  # fmt: skip
    with pytest.raises(ConfigError, match=r"requests\.threads\.stop: 'most'; allowed: auto"):
        parse_params(section, "experiments.requests")
    section["threads"]["stop"] = "auto"
    assert parse_params(section, "experiments.requests").threads.stop is None


# --- twins ----------------------------------------------------------------------------------

FULL = RequestsSweep(True, "ca", tuple(PATTERNS), (1, 2, 3, 4), ThreadRange(2, 1024, 2), 3, 1, 128)


def twin(name):
    from gpudissect.backends.sim import SimBackend

    backend = SimBackend(profile_path=REPO / "config" / "devices" / f"{name}.yaml", seed=1)
    data = run(backend, FULL, device=None)
    return analyse(data, provenance={"device": name})


@pytest.fixture(scope="module")
def m2070():
    return twin("tesla_m2070")


@pytest.fixture(scope="module")
def k20():
    return twin("tesla_k20")


def saturation(doc, pattern, n):
    s = next(s for s in doc["sweeps"] if s["pattern"] == pattern and s["loads_per_thread"] == n)
    return s["saturation_threads"]


def test_m2070_twin_is_an_mshr_of_128_merging_8(m2070):
    el = m2070["elements"]["requests"]
    assert el["kind"]["value"] == "mshr"
    assert el["entries"]["value"] == 128
    assert el["merge_capacity"]["value"] == 8
    assert el["max_outstanding"]["value"] == 128


@pytest.mark.parametrize(
    ("pattern", "n", "paper"),
    [
        ("unq", 1, 128),
        ("unq", 2, 64),
        ("merger2", 1, 256),
        ("merger4", 2, 256),
        ("merger8", 4, 256),
    ],
)
def test_m2070_twin_spikes_where_the_paper_saw_them(m2070, pattern, n, paper):
    # Lashgar Sec. 5.1, Figs. 3-7 (the spike read as the last count before the rise)
    assert abs(saturation(m2070, pattern, n) - paper) <= 4


def test_m2070_twin_merger16_32_show_no_table_saturation(m2070):
    # Sec. 5.1: no significant spike for Merger16 / Merger32 (with the loads the paper used)
    assert saturation(m2070, "merger16", 1) is None
    assert saturation(m2070, "merger32", 1) is None


def test_k20_twin_is_a_prt(k20):
    el = k20["elements"]["requests"]
    assert el["kind"]["value"] == "prt"
    assert el["per_warp_limit"]["value"] == 3  # Sec. 4
    assert saturation(k20, "unq", 1) is None  # Sec. 5.2, Fig. 8: no spike with one load


def test_k20_twin_entries_and_outstanding_requests(k20):
    el = k20["elements"]["requests"]
    # Sec. 5.2: "at least 45 entries" (44 x 32 = 1408 requests in its arithmetic). The MergerK
    # sweeps saturate at 704->706 (N=2: 44 -> 46 instructions) and 480->482 threads (N=3: 45 ->
    # 48), so the table holds exactly 45.
    assert 44 <= el["entries"]["value"] <= 45
    # The UNQ spikes at 680 (2 x 680 = 1360 requests fit, 1364 do not) and 454 (1362 fit, 1368
    # do not) bound the requests in flight to [1362, 1363]: 3 % under the paper's 1408, which
    # assumes every entry holds 32 requests. "About 1408": within 5 %.
    assert el["max_outstanding"]["range"] == [1362, 1363]
    assert abs(el["max_outstanding"]["value"] - 1408) <= 0.05 * 1408


def test_unseen_prt_entries_are_the_range_the_sweeps_allow():
    # tests/data/unseen_prt_46.yaml: a PRT of 46 entries, scoreboard 3. Every sweep within the
    # scoreboard saturates at 736->738 threads (N=2: 46 -> 48 instructions) or 480->482 (N=3:
    # 45 -> 48): 46 and 47 are allowed alike, and the table is reported as that range
    from gpudissect.backends.sim import SimBackend

    backend = SimBackend(profile_path=REPO / "tests/data/unseen_prt_46.yaml", seed=1)
    doc = analyse(run(backend, FULL, device=None), provenance={"device": "unseen_prt_46"})
    el = doc["elements"]["requests"]
    assert el["kind"]["value"] == "prt" and el["per_warp_limit"]["value"] == 3
    assert el["entries"]["value"] is None and el["entries"]["range"] == [46, 47]
    assert saturation(doc, "unq", 2) == 736 and saturation(doc, "unq", 3) == 480


WIDE = RequestsSweep(
    True,
    "ca",
    ("unq", "merger8", "merger32"),
    tuple(range(1, 9)),
    ThreadRange(32, None, 32),
    3,
    1,
    128,
)


@pytest.fixture(scope="module")
def unseen_245():
    from gpudissect.backends.sim import SimBackend

    def doc(sweep):
        backend = SimBackend(profile_path=REPO / "tests/data/unseen_prt_245.yaml", seed=1)
        return analyse(run(backend, sweep, device=None), provenance={"device": "unseen_245"})

    one_block = RequestsSweep(True, "ca", WIDE.patterns, WIDE.loads_per_thread,
                              ThreadRange(32, 1024, 32), 3, 1, 128)  # fmt: skip
    return doc(WIDE), doc(one_block)


def test_unseen_table_past_one_block_is_recovered_exactly_by_the_sm_wide_sweep(unseen_245):
    # tests/data/unseen_prt_245.yaml: a 245-entry PRT, scoreboard 6, 2048 threads per SM. One
    # block holds at most 32 x 6 = 192 instructions in flight; two blocks saturate it at 61
    # warps (N=4), 49 (N=5) and 40 (N=6): only 245 fits all three
    wide, _ = unseen_245
    el = wide["elements"]["requests"]
    assert el["per_warp_limit"]["value"] == 6
    assert el["kind"]["value"] == "prt" and el["entries"]["value"] == 245
    assert el["max_outstanding"]["value"] == 245 * 32
    assert saturation(wide, "unq", 4) == 1952 and saturation(wide, "unq", 5) == 1568
    assert saturation(wide, "unq", 6) == 1280
    # Little's law: a 7840-request table, all requests returning after one round trip, holds
    # 7840 in flight at 1568 threads x 5 loads; the measured W0 carries the clock noise (1
    # cycle of 210), so the reading lies within 1 % of it and is bounded by the table
    q = el["sustained_in_flight"]
    assert abs(q["value"] - 7840) <= 0.01 * 7840 and q["at_most"] == 7840


def test_one_block_leaves_the_same_table_unsaturated_with_lower_bounds(unseen_245):
    _, one = unseen_245
    el = one["elements"]["requests"]
    assert el["entries"]["value"] is None
    # 1024 threads x 6 loads: 192 warp instructions, 6144 distinct requests held, no stall
    assert el["entries"]["at_least"] == {"mshr": 6144, "prt": 192}
    assert el["max_outstanding"]["at_least"] == 6144 and el["max_outstanding"]["at_most"] is None
    assert "no sweep saturated" in el["max_outstanding"]["at_most_why"]


@pytest.mark.parametrize(("n", "paper"), [(2, 680), (3, 454)])
def test_k20_twin_spikes_where_the_paper_saw_them(k20, n, paper):
    # Sec. 5.2, Figs. 9-10: "a significant spike just after 680 threads" (N=2) and "just after
    # 454 threads" (N=3), both inside a warp (22nd and 15th); read as the last count before the
    # rise, as for the M2070
    assert abs(saturation(k20, "unq", n) - paper) <= 4


# --- GPU ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpu_backend(tmp_path_factory, nvcc):
    from gpudissect.backends.cuda import CudaBackend
    from gpudissect.devices import detect_arch
    from gpudissect.kernels import compile_kernel

    out = tmp_path_factory.mktemp("build")
    compile_kernel(REPO / "kernels/requests.cu", arch=detect_arch(0), output=out / "requests.cubin")
    with CudaBackend(index=0, cubin_dir=out) as b:
        yield b


@pytest.mark.gpu
@pytest.mark.parametrize("path", ["ca", "cg"])
def test_gpu_requests_times_every_thread_in_a_sane_range(gpu_backend, path):
    from gpudissect.experiments.requests import RequestsWork

    offsets = pattern_offsets(threads=64, loads_per_thread=2, merge_threads=1, block_bytes=128)
    r = gpu_backend.run(RequestsWork(path, offsets, 3, 1))
    assert r.elapsed_cycles.shape == (3, 64)
    # at least an L2 round trip (> 100 cycles on every GPU we target), far below a millisecond
    assert 100 < np.median(r.elapsed_cycles) < 100_000


@pytest.mark.gpu
def test_gpu_more_requests_take_no_less_time(gpu_backend):
    from gpudissect.experiments.requests import RequestsWork

    def median(threads, n, k):
        o = pattern_offsets(threads=threads, loads_per_thread=n, merge_threads=k, block_bytes=128)
        return np.median(gpu_backend.run(RequestsWork("ca", o, 3, 1)).elapsed_cycles)

    # 4096 unique blocks vs 32 warp-merged ones at 1024 threads
    assert median(1024, 4, 1) >= median(1024, 1, 32)
    assert median(1024, 4, 1) >= median(2, 1, 1)


@pytest.mark.gpu
def test_gpu_two_blocks_of_one_sm_time_every_thread(gpu_backend):
    from gpudissect.experiments.requests import RequestsWork

    threads = gpu_backend.facts().max_threads_per_sm
    if threads <= 1024:
        pytest.skip(f"the GPU holds {threads} threads per SM: one block")

    def median(threads, n):
        o = pattern_offsets(threads=threads, loads_per_thread=n, merge_threads=1, block_bytes=128)
        r = gpu_backend.run(RequestsWork("cg", o, 3, 1))
        assert r.elapsed_cycles.shape == (3, threads)
        assert 100 < np.median(r.elapsed_cycles) < 1_000_000
        return np.median(r.elapsed_cycles)

    # twice the threads of one block, four times the loads: no less time than one block
    assert median(threads, 4) >= median(1024, 1)
    assert median(1056, 1) >= median(32, 1)  # a second block holding one warp


def test_profile_without_request_table_gives_an_empty_trace_and_undetermined_results():
    from gpudissect.backends.sim import SimBackend
    from gpudissect.plotting.requests import REQUEST_FIGURES, plot_requests

    backend = SimBackend(profile_path=REPO / "tests" / "data" / "tiny_profile.yaml", seed=1)
    data = run(backend, FULL, device=None)
    assert data.empty and list(data.columns) == list(FULL_SCHEMA_NAMES)
    doc = analyse(data, provenance={"device": "tiny"})
    assert all(q["value"] is None for q in doc["elements"]["requests"].values())
    table = figure_table(data, doc)
    assert table.empty and "variance_cycles2" in table
    assert set(plot_requests(data, doc, table=table)) == set(REQUEST_FIGURES)


def test_cuda_host_side_retargets_and_times_each_block_from_the_common_start():
    # the host side of req_<path>_sm_n<N> against a stand-in driver (no GPU): the first launch's
    # target SM 0 gets one block and SM 5 both, so the launch is repeated on SM 5; block b's
    # clocks are t1 = 1000 + 10 b, t2 = 1500 + 100 b, so block 0's threads read 1500 - 1000 and
    # block 1's 1600 - 1000 (1568 threads: two blocks of 800 and 768)
    from types import SimpleNamespace

    from gpudissect.backends.requests_cuda import run_requests
    from gpudissect.experiments.requests import RequestsWork

    class Buf:
        def __init__(self, n):
            self.a = np.zeros(n, np.uint8)

        def free(self):
            pass

    def u32(buf):
        return buf.a.view(np.uint32)

    class Drv:
        device_attribute = SimpleNamespace(MULTIPROCESSOR_COUNT="count")
        mem_alloc = staticmethod(Buf)

        def pagelocked_zeros(self, n, dtype):
            return np.zeros(n, dtype)

        def memcpy_htod(self, dst, src):
            b = np.ascontiguousarray(src).view(np.uint8).ravel()
            dst.a[: b.size] = b

        def memcpy_dtoh(self, dst, src):
            view = dst.view(np.uint8).reshape(-1)
            view[:] = src.a[: view.size]

        def memset_d32(self, dst, value, n):
            dst.a[: 4 * n] = 0

    launches = []

    def prepared_call(grid, block, _d, _o, _t, blocks, target, _s, arrived, gathered, _k, clocks):
        launches.append((grid, block, int(target)))
        if len(launches) == 1:
            u32(arrived)[0], u32(arrived)[5] = 1, blocks
            return
        u32(gathered)[0] = blocks
        for b in range(int(blocks)):
            clocks.a.view(np.uint64)[2 * b : 2 * b + 2] = (1000 + 10 * b, 1500 + 100 * b)

    backend = SimpleNamespace(
        drv=Drv(),
        device=SimpleNamespace(get_attribute=lambda key: 132),
        function=lambda *a: SimpleNamespace(prepared_call=prepared_call),
        context=SimpleNamespace(synchronize=lambda: None),
        sm_clock=lambda: 1980,
    )
    o = pattern_offsets(threads=1568, loads_per_thread=5, merge_threads=1, block_bytes=128)
    r = run_requests(backend, RequestsWork("cg", o, 2, 1))
    assert launches[0] == ((264, 1), (800, 1, 1), 0) and launches[1][2] == 5
    assert r.elapsed_cycles.shape == (2, 1568)
    assert np.all(r.elapsed_cycles[:, :800] == 500) and np.all(r.elapsed_cycles[:, 800:] == 600)


def test_a_step_where_the_launch_changes_from_one_block_to_two_is_no_saturation():
    from gpudissect.analysis.requests.requests import fit_sweeps

    # latency rising smoothly with the threads inside one block and inside two, and a step of
    # 53 cycles where the sweep goes from one block of 1022 threads to two of 528 (the H200's
    # UNQ N=1 sweep: 1417 -> 1470 cycles, then 1100 at 1088 threads)
    one = np.arange(2, 1024, 32)
    two = np.arange(1056, 2049, 32)
    threads = np.concatenate([one, two])
    latency = np.concatenate([271 + 1.1 * one, 1470 + 1.1 * (two - 1056)])
    blocks = np.concatenate([np.ones(one.size, int), np.full(two.size, 2)])
    table = pd.DataFrame(
        {
            "pattern": "unq",
            "merge_threads": 1,
            "loads_per_thread": 1,
            "threads": threads,
            "latency_cycles": latency,
            "runs": 3,
            "blocks": blocks,
        }
    )
    (fit,) = fit_sweeps(table)
    assert fit.saturation is None
    # the same numbers launched as one geometry read the step as the table filling
    (merged,) = fit_sweeps(table.drop(columns="blocks"))
    assert merged.saturation is not None and merged.saturation.next_threads == 1056


def test_cuda_host_side_of_one_block_reads_every_timed_run_back_in_one_copy():
    # the host side of req_<path>_n<N> against a stand-in driver (no GPU) whose memory is
    # addressed: launch i (counting the untimed ones) writes 1000 i + t for thread t at the
    # address it was given. Two untimed, three timed launches of 96 threads: rows 2000.., 3000..,
    # 4000.. come back, in one device-to-host copy
    from types import SimpleNamespace

    from gpudissect.backends.requests_cuda import run_requests
    from gpudissect.experiments.requests import RequestsWork

    memory = np.zeros(1 << 20, np.uint8)
    top = [4096]

    class Buf:
        def __init__(self, n):
            self.address, self.n = top[0], n
            top[0] += -(-n // 256) * 256

        def __int__(self):
            return self.address

        def free(self):
            pass

    copies = []

    class Drv:
        mem_alloc = staticmethod(Buf)

        def pagelocked_zeros(self, n, dtype):
            return np.zeros(n, dtype)

        def memcpy_htod(self, dst, src):
            b = np.ascontiguousarray(src).view(np.uint8).ravel()
            memory[int(dst) : int(dst) + b.size] = b

        def memcpy_dtoh(self, dst, src):
            copies.append(dst.nbytes)
            view = dst.view(np.uint8).reshape(-1)
            view[:] = memory[int(src) : int(src) + view.size]

    launches = []

    def prepared_call(grid, block, _d, _o, threads, _s, elapsed):
        i = len(launches)
        launches.append(int(elapsed))
        values = (1000 * i + np.arange(int(threads))).astype(np.uint32).view(np.uint8)
        memory[int(elapsed) : int(elapsed) + values.size] = values

    backend = SimpleNamespace(
        drv=Drv(),
        function=lambda *a: SimpleNamespace(prepared_call=prepared_call),
        context=SimpleNamespace(synchronize=lambda: None),
        sm_clock=lambda: 1980,
    )
    o = pattern_offsets(threads=96, loads_per_thread=2, merge_threads=1, block_bytes=128)
    r = run_requests(backend, RequestsWork("ca", o, 3, 2))
    assert len(launches) == 5 and launches[0] == launches[1] == launches[2]
    assert np.diff(launches[2:]).tolist() == [96 * 4, 96 * 4]
    want = np.array([[1000 * i + t for t in range(96)] for i in (2, 3, 4)], np.uint32)
    assert np.array_equal(r.elapsed_cycles, want)
    assert copies == [3 * 96 * 4]  # one copy of all three rows


def _short_trace(counts):
    """The MSHR curve's UNQ N=1 sweep over `counts` thread counts and N=2 over all of THREADS."""
    full = synthetic_trace(mshr_curve(), sweeps=[("unq", 1), ("unq", 2)])
    keep = (full["loads_per_thread"] == 2) | full["threads"].isin(THREADS[:counts])
    return full[keep].reset_index(drop=True)


def test_a_sweep_of_three_thread_counts_is_reported_not_read_instead_of_crashing():
    # N=1 at 2, 4, 6 threads: three points, one variance value; the analysis once raised "a
    # sweep needs >= 4 thread counts" and the whole document was lost
    doc = analyse(_short_trace(3), provenance={"device": "x"})
    by = {s["loads_per_thread"]: s for s in doc["sweeps"]}
    assert by[1]["too_few_thread_counts"] == 3 and by[1]["saturation_threads"] is None
    assert "needs at least 4" in by[1]["undetermined"]
    # N=2 is read as before: 128 entries hold 64 threads of two loads, so the rise is after 64
    assert by[2]["saturation_threads"] == 64 and by[2]["saturation_next_threads"] == 66
    # the same document the figures and the report read, without a KeyError
    from gpudissect.plotting.requests import plot_requests
    from gpudissect.report.sections_requests import requests_section

    data = _short_trace(3)
    plot_requests(data, doc, table=figure_table(data, doc))
    assert "not read: 3 thread counts in one block" in "\n".join(requests_section(doc, []))


def test_only_too_short_sweeps_leave_every_quantity_undetermined_with_the_reason():
    data = synthetic_trace(mshr_curve(), sweeps=[("unq", 1), ("unq", 2)])
    data = data[data["threads"] <= 6].reset_index(drop=True)
    doc = analyse(data, provenance={"device": "x"})
    element = doc["elements"]["requests"]
    for name in ("kind", "entries", "merge_capacity", "max_outstanding", "sustained_in_flight"):
        assert element[name]["value"] is None, name
        assert "fewer than 4 thread counts" in element[name]["undetermined"], name
        assert "unq N=1 (3), unq N=2 (3)" in element[name]["undetermined"], name
    assert {s["too_few_thread_counts"] for s in doc["sweeps"]} == {3}
    # four counts are enough to be read (no saturation in 2..8 threads: a lower bound)
    four = synthetic_trace(mshr_curve(), sweeps=[("unq", 1)])
    four = four[four["threads"] <= 8].reset_index(drop=True)
    (sweep,) = analyse(four, provenance={"device": "x"})["sweeps"]
    assert "too_few_thread_counts" not in sweep and sweep["no_saturation_up_to_threads"] == 8
