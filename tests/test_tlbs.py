"""The `tlbs` family: analysis pieces on synthetic signals with known answers, and the whole
sweep + analysis on simulated twins (TPDS Table V / Fig. 10 values) and on a profile the code
has never seen (tests/data/unseen_tlb.yaml)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from gpudissect.analysis.tlb import tlb, tlb_document, tlb_sets
from gpudissect.backends.sim import SimBackend
from gpudissect.config import load, load_schema
from gpudissect.contract.backend import ChaseWork
from gpudissect.exceptions import ConfigError
from gpudissect.experiments import tlbs

REPO = Path(__file__).resolve().parents[1]
MIB = 2**20


def default_section(name: str) -> dict:
    """The schema defaults of an experiment section (what an empty config gets)."""
    props = load_schema()["$defs"]["experiments"]["properties"][name]["properties"]
    return {k: v["default"] for k, v in props.items()}


def twin_section() -> dict:
    """The twins' explicit `tlbs` values (config/config.yaml) over the schema defaults."""
    twins = load(REPO / "config" / "config.yaml", base_dir=REPO)
    return default_section("tlbs") | twins.device("gtx780").experiments["tlbs"]


# --- analysis on synthetic data -------------------------------------------------------------
def test_find_levels_separates_a_six_cycle_step_next_to_a_large_level():
    # 20000 samples at 230, 1500 at 236, 3000 at 289 (jitter sd 1.2, rounded), 20 outliers
    # at +400: three levels, the outliers in none; boundaries halfway between the medians.
    rng = np.random.default_rng(1)
    parts = [
        np.rint(c + rng.normal(0, 1.2, n)) for c, n in ((230, 20000), (236, 1500), (289, 3000))
    ]
    values = np.concatenate([*parts, np.full(20, 630.0)])
    levels = tlb.find_levels(values, sigma=tlb.robust_sigma(parts[0]))
    assert [lv.center for lv in levels] == [230.0, 236.0, 289.0]
    assert levels[0].hi == pytest.approx(233.0) and levels[1].hi == pytest.approx(262.5)
    assert tlb.assign(np.array([630.0]), levels)[0] == -1


def test_misses_per_traversal_takes_the_median_traversal():
    # walk of 4 elements, 3 traversals: misses 2, 2, 3 (a stray outlier) -> median 2, spread 1
    slow = np.array([1, 1, 0, 0, 1, 0, 1, 0, 1, 1, 1, 0, 1], dtype=bool)
    assert tlb.misses_per_traversal(slow, 4) == (2.0, 1.0)


def test_miss_spacing_is_the_page_at_strides_below_it():
    # stride 512 KiB, 2 MiB pages: every 4th access misses (the first of each page)
    addr = np.arange(64) * 512 * 1024
    slow = addr % (2 * MIB) == 0
    slow[10] = True  # a stray outlier does not move the mode
    spacing, share = tlb.miss_spacing(addr, slow)
    assert spacing == 2 * MIB and share > 0.8


def _sliced_reach_frame(rng) -> pd.DataFrame:
    """Reach-stage walks (strides 2, 8, 32 MiB) on a GPU whose data hits lie at four latencies,
    one per L2 slice (280, 293, 313, 322 cycles, by address), with an L2 TLB of 2048 units of
    32 MiB: past its reach the first access to each unit of a cyclic walk pays 90 cycles. Of
    the short walks' addresses only the one at 64 MiB lands in the slowest slice."""
    slices = np.array([280.0, 293.0, 313.0, 322.0])
    unit, entries = 32 * MIB, 2048
    rows = []
    for stride in (2 * MIB, 8 * MIB, 32 * MIB):
        grid = list(range(2, 25)) + [int(x) for x in np.geomspace(29, 72 * 2**30 // stride, 24)]
        for m in sorted(set(grid)):
            addr = np.arange(m, dtype=np.int64) * stride
            hit = slices[(addr // (2 * MIB) * 2654435761 >> 7) % 4]
            hit[addr < 96 * MIB] = 280.0
            hit[addr == 64 * MIB] = 322.0
            steps = np.arange(max(512, 2 * m))
            i = steps % m
            lat = hit[i].copy()
            if (addr[-1] // unit) + 1 > entries:
                first = np.r_[True, addr[1:] // unit != addr[:-1] // unit]
                lat += 90.0 * first[i]
            lat = np.rint(lat + rng.normal(0, 1.2, lat.size))
            rows.append(
                pd.DataFrame(
                    {
                        "stage": "reach",
                        "stride_bytes": stride,
                        "elements": m,
                        "step": steps,
                        "position": addr[i] // 4,
                        "latency_cycles": lat,
                    }
                )
            )
    return pd.concat(rows, ignore_index=True)


def test_reach_counts_every_hit_level_of_the_short_walks_as_a_hit():
    # one short-walk address in the slowest L2 slice: its level is a data hit, not a TLB miss,
    # so the slices do not make every access look slow; the L2 TLB's 32 MiB units and its reach
    # (2048 units, 64 GiB) show at every stride
    reach = tlb.fit_reach(_sliced_reach_frame(np.random.default_rng(4)))
    assert reach.base.hi > 322 + 2 and reach.base.hi < 280 + 90
    assert reach.page_bytes == 32 * MIB
    assert len(reach.strides) == 3
    for r in reach.strides:
        assert r.spacing_bytes == max(r.stride_bytes, 32 * MIB)
        assert r.fit_bytes <= 64 * 2**30 < r.first_miss_elements * r.stride_bytes


def _counts(entries, increments, *, start=None):
    """Misses per traversal for walks of start..entries+len(increments) pages."""
    start = start or entries - 2
    rows, k = [], 0
    for m in range(start, entries + len(increments) + 1):
        if m > entries:
            k += increments[m - entries - 1]
        rows.append({"elements": m, "l2_misses": float(k), "l2_spread": 0.0})
    return pd.DataFrame(rows)


def test_set_structure_reads_unequal_sets_as_tpds_fig10():
    # 65 entries; LRU sets overflow one at a time: 17 ways -> 18 misses, then six of 8 -> +9
    # each, then +1 per page. Ways = increment - 1, and 17 + 6 * 8 = 65 = entries.
    st = tlb_sets.set_structure(_counts(65, [18, 9, 9, 9, 9, 9, 9, 1, 1]), "l2")
    assert (st.entries, st.sets, st.ways, st.policy) == (65, 7, (17, 8, 8, 8, 8, 8, 8), "lru")


def test_set_structure_accepts_the_tpds_count_reading():
    # TPDS counts 17 then 8 more per 2 MB: if the increments themselves add up to the entries,
    # they are the ways (17 + 6 * 8 = 65)
    st = tlb_sets.set_structure(_counts(65, [17, 8, 8, 8, 8, 8, 8, 1, 1]), "l2")
    assert st.ways == (17, 8, 8, 8, 8, 8, 8)


def test_set_structure_refuses_increments_that_do_not_add_up():
    # 40 entries but sets of 5 + 5: neither reading adds up -> no ways
    st = tlb_sets.set_structure(_counts(40, [6, 6, 1, 1]), "l2")
    assert st.entries == 40 and st.ways is None


def test_set_structure_wants_an_end_to_the_overflows():
    st = tlb_sets.set_structure(_counts(64, [5, 5, 5]), "l2")
    assert st.sets is None and "do not end" in st.evidence


def test_set_structure_takes_isolated_single_misses_for_timing_outliers():
    # an H100 run: one slow access in a walk of 1829 pages (and 2015, 2019) read as one miss a
    # traversal, with no miss in the longer walks after it. A set overflow stays overflowed in
    # every longer walk and misses >= 2 times a traversal, so these are outliers: the Fig. 10
    # reading below them still holds.
    c = _counts(65, [18, 9, 9, 9, 9, 9, 9, 1, 1], start=30)
    c.loc[c["elements"].isin([31, 58, 63]), "l2_misses"] = 1.0
    st = tlb_sets.set_structure(c, "l2")
    assert (st.entries, st.sets, st.policy) == (65, 7, "lru")
    assert "[31, 58, 63]" in st.evidence


def test_set_structure_keeps_misses_that_are_not_isolated_single_misses():
    # two misses a traversal, then none: not one outlier, and no LRU overflow either
    c = _counts(65, [18, 9, 9, 9, 9, 9, 9, 1, 1], start=30)
    c.loc[c["elements"] == 58, "l2_misses"] = 2.0
    assert tlb_sets.set_structure(c, "l2").entries is None
    # one miss a traversal in every walk from 64 pages on is the onset, not an outlier
    c = _counts(63, [1, 1, 1, 1], start=30)
    assert tlb_sets.set_structure(c, "l2").entries == 63


def test_an_undetermined_onset_says_which_condition_failed():
    # misses from 66 pages on, then none at 68 and 70: the onset does not hold
    c = _counts(65, [2, 2, 2, 2, 2, 2], start=30)
    c.loc[c["elements"].isin([68, 70]), "l2_misses"] = 0.0
    st = tlb_sets.set_structure(c, "l2")
    assert st.entries is None
    assert "between 65 and 66 pages, but longer walks miss nothing (68, 70 pages)" in st.evidence
    # no walk of 65 pages: the walks around the onset two pages apart
    c = _counts(65, [2, 2, 2], start=30)
    st = tlb_sets.set_structure(c[c["elements"] != 65].reset_index(drop=True), "l2")
    assert "between 64 and 66 pages, but the walks there are not one page apart" in st.evidence
    # the shortest walk misses already
    st = tlb_sets.set_structure(_counts(65, [2, 2], start=66), "l2")
    assert "the shortest walk (66 pages) already misses" in st.evidence


def test_set_structure_reads_a_page_returning_to_the_largest_set_before_the_others():
    # 64 entries in one set of 16 and six of 8, pages in set [0, 0, 1, ..., 6][p mod 8]: pages
    # 64 and 65 both go to the 16-way set (+17, then +1: it overflowed already), page 66 to
    # the first 8-way set (+9), ...; ways 16 + 6 x 8 = 64 = entries
    st = tlb_sets.set_structure(_counts(64, [17, 1, 9, 9, 9, 9, 9, 9, 1, 1]), "l2")
    assert (st.entries, st.sets, st.ways, st.policy) == (64, 7, (16, 8, 8, 8, 8, 8, 8), "lru")
    # three pages into the largest set: 25, 1, 1 before the five sets of 8
    st = tlb_sets.set_structure(_counts(64, [25, 1, 1, 9, 9, 9, 9, 9, 1, 1]), "l2")
    assert st.ways == (24, 8, 8, 8, 8, 8)


def test_overflows_end_once_the_sets_account_for_the_entries():
    # 64 entries: 25, 1, 1 (one set of 24 takes three pages) is not the end; after five sets of
    # 8 (+9 each) two more +1 are; TPDS's count (ways = increment) ends the same way
    assert not tlb_sets.overflows_end([25, 1, 1], entries=64)
    assert tlb_sets.overflows_end([25, 1, 1, 9, 9, 9, 9, 9, 1, 1], entries=64)
    assert tlb_sets.overflows_end([24, 8, 8, 8, 8, 8, 1, 1], entries=64)
    assert not tlb_sets.overflows_end([1, 1, 1], entries=64)


def _one_traversal(counts):
    """The same counts, each from a single traversal of its walk."""
    return counts.assign(steps=counts["elements"])


def test_set_structure_prefers_equal_sets_when_counts_from_one_traversal_allow_them():
    # two sets of 16 (32 entries): +17, +17, +1, +1. One stray miss in the walk of 33 pages
    # (18 instead of 17) makes the increments +18, +16: ways 17 and 15, whose sum is still 32.
    # Equal sets predict 17, 34, 35, 36: within one miss of every count (one traversal each)
    counts = _one_traversal(_counts(32, [18, 16, 1, 1]))
    st = tlb_sets.set_structure(counts, "l2")
    assert st.ways == (16, 16) and "simpler structure" in st.evidence and st.confidence < 0.95
    # counted from five traversals (median), the same increments are the structure
    counts = _counts(32, [18, 16, 1, 1])
    st = tlb_sets.set_structure(counts.assign(steps=5 * counts["elements"]), "l2")
    assert st.ways == (17, 15)


def test_set_structure_counting_error_grows_with_accesses_in_no_level():
    # the walk of 34 pages counts 2 misses short (+17, +15): equal sets are 2 off, more than
    # one miss, unless two of its accesses fell in no latency level (outliers on misses)
    counts = _one_traversal(_counts(32, [17, 15, 3, 1]))
    assert tlb_sets.set_structure(counts, "l2").ways != (16, 16)
    st = tlb_sets.set_structure(counts, "l2", unplaced={34: 2})
    assert st.ways == (16, 16)


def test_set_structure_names_increments_that_stall():
    # the misses stop growing before every set overflows: no LRU or FIFO overflow does that
    st = tlb_sets.set_structure(_counts(2020, [90, 9, 9, 0, 0, 9]), "l2")
    assert st.entries == 2020 and st.sets is None
    assert "grow by 0" in st.evidence


# --- experiment plumbing ------------------------------------------------------------------------
def test_sequence_work_walks_the_sequence_cyclically():
    seq = np.array([0, 524288, 1048576], dtype=np.int64)
    work = tlbs.sequence_work("cg", seq, warmup_steps=3, record_steps=4)
    assert isinstance(work, ChaseWork)
    assert work.walk(7).tolist() == [0, 524288, 1048576, 0, 524288, 1048576, 0]


def test_element_grid_is_dense_then_geometric_and_capped():
    sweep = tlbs.parse_params(twin_section(), "tlbs")
    grid = tlbs.element_grid(sweep, 16 * MIB)
    assert grid[:7] == [2, 3, 4, 5, 6, 7, 8]
    assert grid[-1] * 16 * MIB <= sweep.max_array_bytes
    ratios = np.diff(np.log2(grid[7:]))
    assert np.all(ratios < 0.4)


def test_parse_params_refuses_record_steps_above_the_max():
    section = twin_section() | {"record_steps": 4096}
    with pytest.raises(ConfigError, match="max_record_steps"):
        tlbs.parse_params(section, "experiments.tlbs")


# --- twins: the real sweep and analysis ---------------------------------------------------------
def follows_the_walk(data: pd.DataFrame) -> float:
    """Share of loads whose returned index (in element units, low 32 bits) is the next
    recorded position (address / 4)."""
    step = data["element_bytes"].to_numpy(np.int64)[1:] // 4
    nxt = (data["position"].to_numpy(np.int64)[1:] // step) % 2**32
    return float(np.mean(data["index"].to_numpy(np.int64)[:-1] == nxt))


def _run(profile: str, stages=("reach", "pages", "window"), *, twin=True, **params) -> dict:
    """The sweep and analysis on `profile`: with the twins' explicit values, or (`twin`
    False) with the schema's defaults (`auto`)."""
    section = twin_section() if twin else default_section("tlbs")
    sweep = tlbs.parse_params(section | params, "tlbs")
    backend = SimBackend(profile_path=REPO / profile, seed=3)
    data = tlbs.run(backend, sweep, device=None)
    assert set(data["stage"]) == set(stages)
    # the index each load returned is the next position of its walk
    assert follows_the_walk(data) > 0.99
    return tlb_document.analyse(data, provenance={"device": Path(profile).stem})


def _v(doc, element, key):
    return doc["elements"][element][key]["value"]


@pytest.fixture(scope="module")
def gtx780():
    return _run("config/devices/gtx780.yaml")


@pytest.mark.parametrize("profile", ["gtx560ti", "gtx980"])
def test_twin_recovers_tpds_table_v(profile):
    # TPDS Table V: 2 MB pages; L1 TLB 16 entries, 1 set; L2 TLB 65 entries in one set of 17
    # and six of 8 (Fig. 10); LRU
    doc = _run(f"config/devices/{profile}.yaml")
    for element in ("l1_tlb", "l2_tlb"):
        assert _v(doc, element, "page_bytes") == 2 * MIB
    assert _v(doc, "l1_tlb", "entries") == 16
    assert _v(doc, "l1_tlb", "ways_per_set") == [16]
    assert _v(doc, "l2_tlb", "entries") == 65
    assert _v(doc, "l2_tlb", "sets") == 7
    assert _v(doc, "l2_tlb", "ways_per_set") == [17, 8, 8, 8, 8, 8, 8]
    assert _v(doc, "l2_tlb", "policy") == "lru"
    window = doc["page_table"]["page_table_window_bytes"]["value"]
    # TPDS Sec. 5.2(1): 512 MB on Kepler and Maxwell; none on Fermi
    assert window == (None if profile == "gtx560ti" else 512 * MIB)
    # penalties: NPC Table 3 / TPDS Fig. 14 differences (Fermi 27 and 84, Maxwell 11 and 64)
    l1, l2 = {"gtx560ti": (27, 84), "gtx980": (11, 64)}[profile]
    assert _v(doc, "l1_tlb", "miss_penalty_cycles") == pytest.approx(l1, rel=0.03)
    assert _v(doc, "l2_tlb", "miss_penalty_cycles") == pytest.approx(l2, rel=0.03)


def test_kepler_twin_window_and_penalties(gtx780):
    # NPC Table 3 Kepler: P2 - P1 = 6, P3 - P2 = 53, P6 - P5 = 266; 512 MB window
    assert _v(gtx780, "l1_tlb", "miss_penalty_cycles") == pytest.approx(6, abs=0.5)
    assert _v(gtx780, "l2_tlb", "miss_penalty_cycles") == pytest.approx(53, rel=0.03)
    pt = gtx780["page_table"]
    assert pt["page_table_window_bytes"]["value"] == 512 * MIB
    assert pt["window_switch_penalty_cycles"]["value"] == pytest.approx(266, rel=0.03)
    assert _v(gtx780, "l2_tlb", "ways_per_set") == [17, 8, 8, 8, 8, 8, 8]


def test_unseen_profile_is_recovered():
    # tests/data/unseen_tlb.yaml: 64 KiB pages, L1 TLB 32 entries fully associative (+20),
    # L2 TLB 32 sets x 4 ways (+70), 256 MiB window (+150); every range `auto`: the strides
    # go down from 2 MiB until the misses lie further apart than the stride
    doc = _run("tests/data/unseen_tlb.yaml", twin=False)
    assert _v(doc, "l1_tlb", "page_bytes") == 65536
    assert _v(doc, "l1_tlb", "entries") == 32
    assert _v(doc, "l1_tlb", "sets") == 1
    assert _v(doc, "l2_tlb", "entries") == 128
    assert _v(doc, "l2_tlb", "sets") == 32
    assert _v(doc, "l2_tlb", "ways_per_set") == [4] * 32
    assert _v(doc, "l1_tlb", "miss_penalty_cycles") == pytest.approx(20, rel=0.03)
    assert _v(doc, "l2_tlb", "miss_penalty_cycles") == pytest.approx(70, rel=0.03)
    assert doc["page_table"]["page_table_window_bytes"]["value"] == 256 * MIB
    assert doc["page_table"]["window_switch_penalty_cycles"]["value"] == pytest.approx(
        150, rel=0.03
    )


def test_unseen_unequal_sets_filled_three_times_in_a_row_are_read():
    # tests/data/unseen_tlb_unequal.yaml: L2 TLB of 64 entries, one set of 24 and five of 8;
    # the first three pages past the reach all go to the 24-way set (increments 25, 1, 1, 9,
    # ...): the sweep walks on past the two +1 (25 misses do not account for 64 entries)
    doc = _run("tests/data/unseen_tlb_unequal.yaml")
    assert doc["l2_increments"][:4] == [25, 1, 1, 9]
    assert _v(doc, "l2_tlb", "entries") == 64
    assert _v(doc, "l2_tlb", "ways_per_set") == [24, 8, 8, 8, 8, 8]
    assert _v(doc, "l2_tlb", "policy") == "lru"


def test_unseen_long_walks_read_as_the_simplest_structure():
    # tests/data/unseen_tlb_long_walks.yaml: L2 TLB of 1024 entries in 2 sets of 512; walks of
    # 1025+ pages fit the buffer once, and timing outliers lift two misses of the walk of 1026
    # pages out of every level: increments 513, 511, 2, ... (ways 512, 510, 1, 1 sum to 1024).
    # Equal sets of 512 predict every count within its counting error.
    doc = _run("tests/data/unseen_tlb_long_walks.yaml")
    assert doc["l2_increments"][:2] != [513, 513]  # the seeded run does miscount
    assert _v(doc, "l2_tlb", "entries") == 1024
    assert _v(doc, "l2_tlb", "ways_per_set") == [512, 512]


def test_eight_byte_elements_walk_the_same_addresses():
    # the 64-bit chase visits the same byte addresses: the unseen profile comes out the same
    doc = _run("tests/data/unseen_tlb.yaml", element_bytes=8)
    assert _v(doc, "l1_tlb", "page_bytes") == 65536
    assert _v(doc, "l1_tlb", "entries") == 32
    assert _v(doc, "l2_tlb", "ways_per_set") == [4] * 32


def test_arrays_past_16_gib_need_eight_byte_elements():
    section = default_section("tlbs") | {"max_array_bytes": 20 * 2**30}
    with pytest.raises(ConfigError, match="element_bytes: 8"):
        tlbs.parse_params(section, "experiments.tlbs")
    tlbs.parse_params(section | {"element_bytes": 8}, "experiments.tlbs")


def test_profile_without_tlbs_is_undetermined_not_guessed():
    # no TLB: no access of the reach stage is slower than the base, the later stages are skipped
    doc = _run("tests/data/tiny_profile.yaml", stages=("reach",), twin=False)
    assert doc["elements"]["l1_tlb"]["page_bytes"]["value"] is None
    assert "undetermined" in doc["elements"]["l2_tlb"]["entries"]


@pytest.fixture(scope="module")
def gpu_backend(tmp_path_factory, nvcc):
    from gpudissect.backends.cuda import CudaBackend
    from gpudissect.devices import detect_arch
    from gpudissect.kernels import compile_kernel

    out = tmp_path_factory.mktemp("build")
    compile_kernel(REPO / "kernels/pchase.cu", arch=detect_arch(0), output=out / "pchase.cubin")
    with CudaBackend(index=0, cubin_dir=out) as backend:
        yield backend


@pytest.mark.gpu
def test_gpu_tlb_sweep_is_sane(gpu_backend):
    """On the GPU (default sweep, about a minute): the addresses follow the chain, and what is
    determined is physically sane (a page of 4 KiB..2 GiB, positive penalties, entries that
    match the reach); what is not is undetermined with a reason."""
    sweep = tlbs.parse_params(default_section("tlbs"), "tlbs")
    data = tlbs.run(gpu_backend, sweep, device=None)
    assert follows_the_walk(data) > 0.99
    doc = tlb_document.analyse(data, provenance={"device": "gpu"})
    for element in ("l1_tlb", "l2_tlb"):
        for key, q in doc["elements"][element].items():
            assert q.get("value") is not None or q.get("undetermined"), (element, key)
    page = doc["elements"]["l1_tlb"]["page_bytes"]["value"]
    if page is not None:
        assert 4096 <= page <= 2**31
    for element in ("l1_tlb", "l2_tlb"):
        pen = doc["elements"][element]["miss_penalty_cycles"].get("value")
        assert pen is None or pen > 0


def test_bisection_narrows_a_wide_bracket_to_one_page():
    # a level of 2048 entries: walks of more pages have accesses above the base (300 vs 400)
    class Run:
        walked: list[int] = []

        def walk(self, stage, stride, m):
            self.walked.append(m)
            lat = np.full(3 * m, 300.0) + (100.0 if m > 2048 else 0.0)
            return pd.DataFrame({"step": np.arange(3 * m), "latency_cycles": lat})

    reach = type("Reach", (), {"base": tlb.Level(300.0, 250.0, 340.0, 100)})()
    run = Run()
    fit, first = tlbs._bisect_onset(run, None, reach, 32 * MIB, 1827, 2172)
    assert (fit, first) == (2048, 2049)
    assert len(run.walked) <= 9  # log2(345) walks, not one per page


def test_bisection_is_not_moved_by_one_slow_access_a_traversal():
    # below the reach every walk has one stray slow access per traversal (an H100 walk of 1829
    # pages had one): an overflowed set misses ways + 1 >= 2 times, so the bracket stays put
    class Run:
        def walk(self, stage, stride, m):
            lat = np.full(3 * m, 300.0) + (100.0 if m > 2048 else 0.0)
            lat[::m] = 400.0
            return pd.DataFrame({"step": np.arange(3 * m), "latency_cycles": lat})

    reach = type("Reach", (), {"base": tlb.Level(300.0, 250.0, 340.0, 100)})()
    assert tlbs._bisect_onset(Run(), None, reach, 32 * MIB, 1827, 2172) == (2048, 2049)


def _page_walks(rng, onset, levels_by_start):
    """Walks of 40..90 pages at stride = page, three traversals each: data hits at 327 cycles,
    and past `onset` pages 2 * (m - onset) slow accesses a traversal, shared among the
    (latency, first walk) levels of `levels_by_start` that have begun."""
    rows = []
    for m in range(40, 91):
        lat = np.rint(rng.normal(327.0, 2.0, 3 * m))
        slow = min(m, 2 * max(0, m - onset))
        live = [c for c, start in levels_by_start if m >= start]
        for t in range(3) if live else ():
            lat[t * m : t * m + slow] = np.rint(rng.normal(np.resize(live, slow), 2.0))
        rows.append(
            pd.DataFrame({"elements": m, "step": np.arange(3 * m), "latency_cycles": lat}).assign(
                stride_bytes=32 * MIB
            )
        )
    return pd.concat(rows, ignore_index=True)


def test_two_latencies_that_set_in_together_are_one_miss_level():
    # an H100 L2-TLB miss comes at two latencies (about 388 and 422 cycles over a 327 base):
    # they begin at the same walk, so one level, its penalty from their pooled accesses
    df = _page_walks(np.random.default_rng(5), 60, [(388.0, 60), (422.0, 60)])
    walks = tlb.fit_pages(df, sigma=2.0, base_value=327.0)
    assert walks.l1_index is not None and walks.l2_index is None
    assert [round(c) for c in walks.onset_parts] == [388, 422]
    assert 388 < walks.levels[walks.l1_index].center < 422
    st = tlb_sets.set_structure(walks.counts, "l1")
    assert st.entries == 60


def test_latencies_that_set_in_apart_stay_two_levels():
    # an L1-TLB miss from 60 pages, an L2-TLB miss from 75: two levels, as on Fermi and Kepler
    df = _page_walks(np.random.default_rng(6), 60, [(388.0, 60), (422.0, 75)])
    walks = tlb.fit_pages(df, sigma=2.0, base_value=327.0)
    assert walks.onset_parts == ()
    assert round(walks.levels[walks.l1_index].center) == 388
    assert round(walks.levels[walks.l2_index].center) == 422


def _reach_walks(m_values, *, onset_after, rise, noisy_from, noise, seed=0):
    """Reach-stage rows of one stride: walks of m pages, each address with its own steady
    latency (an L2 slice's), +`rise` for every address once a walk is longer than
    `onset_after`, and walks from `noisy_from` pages on `noise` cycles noisier (walks past a
    later level)."""
    rng = np.random.default_rng(seed)
    stride = 32 << 20
    own = rng.integers(280, 330, max(m_values))
    rows = []
    for point, m in enumerate(m_values):
        for step in range(4 * m + 1):
            i = step % m
            lat = own[i] + (rise if m > onset_after else 0)
            lat += rng.normal(0, noise if m >= noisy_from else 0.3)
            rows.append((point, "reach", stride, m, step, i * stride // 8, round(lat)))
    cols = ["point", "stage", "stride_bytes", "elements", "step", "position", "latency_cycles"]
    return pd.DataFrame(rows, columns=cols)


def test_a_small_onset_is_read_against_the_noise_before_it():
    """An H100 run: every address rose 7.5-16 cycles past 16 pages, but walks far past that
    were noisier and the pooled spread (4.4 cycles) put the 3-sigma cut above the rise; the
    pairs before the onset (1.5) show it."""
    from gpudissect.analysis.tlb.tlb_shift import shift_onsets

    ms = [*range(2, 25), 29, 34, 40, 48, 57, 68, 81, 96, 114, 136, 161, 192]
    data = _reach_walks(ms, onset_after=16, rise=10, noisy_from=24, noise=12)
    (onset,) = shift_onsets(data)
    assert (onset.fit_elements, onset.first_elements) == (16, 17)
    assert len(onset.shifted_bytes) == 16


def _unit_walks(m_values, *, onset_after, rise, seed, stride=2 * MIB, unit=16 * MIB, noise=2.0):
    """Reach walks below a level's unit: each address its own steady latency (an L2 slice's,
    275-330 cycles), three traversals of `noise`-cycle jitter, and once a walk is longer than
    `onset_after` elements the first address of each unit `rise` cycles slower (an H100's
    16 MiB L1-TLB unit walked at 2 MiB: 1 address in 8)."""
    rng = np.random.default_rng(seed)
    own = rng.integers(275, 331, max(m_values))
    per_unit = unit // stride
    rows = []
    for point, m in enumerate(m_values):
        for step in range(3 * m + 1):
            i = step % m
            slow = rise if m > onset_after and i % per_unit == 0 else 0
            lat = own[i] + slow + rng.normal(0, noise)
            rows.append((point, "reach", stride, m, step, i * stride // 4, round(lat)))
    cols = ["point", "stage", "stride_bytes", "elements", "step", "position", "latency_cycles"]
    return pd.DataFrame(rows, columns=cols)


_UNIT_GRID = [2, 3, 4, 5, 6, 8, 10, 13, 16, 19, 23, 27, 32, 38, 45, 54, 64, 76, 91, 108, 128,
              152, 181, 215, 256, 304]  # fmt: skip


@pytest.mark.parametrize("seed", range(4))
def test_a_penalty_on_one_address_a_unit_is_read_from_the_units_first_addresses(seed):
    """Three H100 `tlb_mappings` traces at 2 MiB: 16 of 128 addresses rose 10 cycles between
    walks of 128 and 152 elements, every one the first of a 16 MiB unit; among all 128 that was
    too few for the binomial test at 1e-6 (p 2e-5). The first address of each unit alone passes
    it (`unit_classes`, which `tlb_mappings` reads with)."""
    from gpudissect.analysis.tlb.tlb_shift import shift_onsets

    data = _unit_walks(_UNIT_GRID, onset_after=128, rise=10, seed=seed)
    (onset,) = shift_onsets(data, unit_classes=True)
    assert (onset.fit_elements, onset.first_elements) == (128, 152)
    assert onset.spacing_bytes == 16 * MIB
    assert all(b % (16 * MIB) == 0 for b in onset.shifted_bytes)
    assert len(onset.shifted_bytes) >= 14
    assert 8 <= onset.penalty_cycles <= 12


@pytest.mark.parametrize("seed", range(8))
def test_walks_with_no_penalty_give_no_onset_in_any_residue_class(seed):
    from gpudissect.analysis.tlb.tlb_shift import shift_onsets

    data = _unit_walks(_UNIT_GRID, onset_after=128, rise=0, seed=seed)
    assert shift_onsets(data, unit_classes=True) == []


def test_an_l2_tlb_unit_four_times_the_l1_unit_is_read_from_its_own_misses():
    # tests/data/unseen_tlb_modern.yaml (memory contiguous: every block coalesces): L1 TLB 16
    # entries of 2 x 2 MiB = 4 MiB, one set, +20; L2 TLB 128 entries of 8 x 2 MiB = 16 MiB in 8
    # sets of 16 ways, +60. The reach strides (2 MiB x 4^k) land on neither unit: at 2 MiB the
    # L1-TLB misses lie 4 MiB apart; in the 4 MiB page walks past the L2 TLB's 2 GiB reach the
    # L2-TLB misses lie 16 MiB apart (one entry covers 4 walked pages)
    # (config/gpu.yaml's settings: walks up to 90% of the memory, past the 2 GiB reach)
    doc = _run(
        "tests/data/unseen_tlb_modern.yaml",
        twin=False,
        element_bytes="auto",
        max_array_bytes="auto",
        pages_traversals=3,
    )
    assert _v(doc, "l1_tlb", "page_bytes") == 4 * MIB
    assert _v(doc, "l1_tlb", "entries") == 16
    assert _v(doc, "l1_tlb", "ways_per_set") == [16]
    assert _v(doc, "l2_tlb", "page_bytes") == 16 * MIB
    assert _v(doc, "l2_tlb", "entries") == 128
    assert _v(doc, "l2_tlb", "sets") == 8
    assert _v(doc, "l2_tlb", "ways_per_set") == [16] * 8
    assert _v(doc, "l1_tlb", "miss_penalty_cycles") == pytest.approx(20, rel=0.03)
    assert _v(doc, "l2_tlb", "miss_penalty_cycles") == pytest.approx(60, rel=0.03)


def test_a_coalescing_l2_tlbs_misses_on_a_cold_walk_are_not_read_as_a_window(tmp_path):
    """tests/data/unseen_tlb.yaml without its window and with an L2 TLB whose entries coalesce
    4 pages: a cold walk over fresh pages misses that TLB once per 256 KiB, a recurring level
    at the spacing a page-table window would give; the window stays undetermined and says
    why, while the unit, penalty and entries are read."""
    raw = yaml.safe_load((REPO / "tests/data/unseen_tlb.yaml").read_text())
    raw["name"] = "coalescing_tlb"
    del raw["tlbs"]["page_table_window_bytes"], raw["tlbs"]["window_switch_penalty_cycles"]
    raw["tlbs"]["levels"][1]["coalesce_pages"] = 4
    profile = tmp_path / "coalescing_tlb.yaml"
    profile.write_text(yaml.safe_dump(raw))
    doc = _run(str(profile), twin=False)
    assert _v(doc, "l2_tlb", "page_bytes") == 4 * 65536
    assert _v(doc, "l2_tlb", "miss_penalty_cycles") == pytest.approx(70, rel=0.03)
    assert _v(doc, "l2_tlb", "entries") == 128
    window = doc["page_table"]["page_table_window_bytes"]
    assert window["value"] is None
    assert "L2 TLB's miss on entering each of its 262144-byte units" in window["undetermined"]


def test_counts_in_units_keep_the_traversals_behind_them():
    """A level whose entry covers 8 pages sees a walk of m pages as m / 8 units: the counts in
    units keep steps / elements, the traversals behind each count (which decide how far a
    count from fewer than three may be off, `tlb_sets`), not eight times as many."""
    from gpudissect.analysis.tlb.tlb_pages import PageWalks, in_units

    counts = pd.DataFrame(
        {"elements": [4096, 4104, 4112], "steps": [8192, 8208, 8224], "l2_misses": [0, 17, 34]}
    )
    walks = PageWalks(2 * MIB, (), 1, 2, counts)
    units, _ = in_units(walks, 16 * MIB)
    assert units["elements"].tolist() == [512, 513, 514]
    assert (units["steps"] // units["elements"]).tolist() == [2, 2, 2]
