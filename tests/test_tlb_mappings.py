"""The `tlb_mappings` family on simulated profiles whose TLBs it must recover from the traces
alone: one with coalescing L1 and L2 TLBs and a third level, one whose entries cover large
virtual units whatever lies behind them (not coalesced); the layouts' physical orders; the page
map and coalescing of the simulator (reference model against the engine); bad input. The GPU
check is tests/test_tlb_mappings_gpu.py."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from gpudissect.analysis.tlb.tlb_mappings import analyse
from gpudissect.backends.sim import SimBackend
from gpudissect.exceptions import ConfigError
from gpudissect.experiments import tlb_mappings as e
from gpudissect.experiments.mapped_chase import MappedChaseWork, PhysicalLayout
from gpudissect.experiments.sparse_chase import sequence_work
from gpudissect.families import FAMILIES
from gpudissect.sim import SimGPU, load_profile
from gpudissect.sim.hierarchy import MemoryHierarchy
from gpudissect.sim.tlb import PageMap

DATA = Path(__file__).resolve().parent / "data"
MIB = 2**20
CHUNK = 2 * MIB


def _section(contiguous_pages, scattered_pages, **over):
    section = {
        "enabled": True,
        "path": "cg",
        "chunk_bytes": CHUNK,
        "seed": 1,
        "series": [
            {
                "layout": "contiguous",
                "stride_bytes": CHUNK,
                "max_array_bytes": contiguous_pages * CHUNK,
            },
            {
                "layout": "scattered",
                "stride_bytes": CHUNK,
                "max_array_bytes": scattered_pages * CHUNK,
            },
        ],
        "traversals": 3,
        "grid_steps_per_octave": 2,
        "max_record_steps": 4096,
        "max_refine_walks": 160,
    }
    return {**section, **over}


def _run(profile, section):
    sweep = e.parse_params(section, "experiments.tlb_mappings")
    with SimBackend(profile_path=DATA / profile, seed=0) as backend:
        data = e.run(backend, sweep, device=None)
    return data, analyse(data, provenance={"device": "sim"})


def _value(doc, element, quantity):
    return doc["elements"][element][quantity]["value"]


@pytest.fixture(scope="module")
def coalescing():
    # unseen_tlb_coalescing.yaml: L1 8 entries x 4 pages, L2 32 entries (8 sets of 4) x 16
    # pages, L3 128 single pages. Contiguous reaches: L1 8 x 4 = 32 pages, L2 32 x 16 = 512
    # (set k holds blocks k, k + 8, ...: block 32 is the 5th in set 0, so page 512 overflows
    # it); scattered: 8, 32 and 128 pages. Contiguous walks to 640 pages, scattered to 192.
    return _run("unseen_tlb_coalescing.yaml", _section(640, 192))


def test_coalescing_factors_reaches_and_levels_are_recovered(coalescing):
    data, doc = coalescing
    assert _value(doc, "l1_tlb", "coalesced_pages") == 4
    assert _value(doc, "l2_tlb", "coalesced_pages") == 16
    assert _value(doc, "l1_tlb", "reach_contiguous_bytes") == 32 * CHUNK
    assert _value(doc, "l1_tlb", "reach_scattered_bytes") == 8 * CHUNK
    assert _value(doc, "l2_tlb", "reach_contiguous_bytes") == 512 * CHUNK
    assert _value(doc, "l2_tlb", "reach_scattered_bytes") == 32 * CHUNK
    assert _value(doc, "l3_tlb", "reach_scattered_bytes") == 128 * CHUNK
    # entries: the units (the contiguous misses' spacing: 4 and 16 chunks) that fit
    assert _value(doc, "l1_tlb", "entries") == 8
    assert _value(doc, "l2_tlb", "entries") == 32
    # the L3 TLB sees only the L2's misses under the contiguous mapping: no reading there
    assert _value(doc, "l3_tlb", "reach_contiguous_bytes") is None
    assert _value(doc, "l3_tlb", "coalesced_pages") is None
    assert "no bound" in doc["elements"]["l3_tlb"]["coalesced_pages"]["undetermined"]
    assert doc["page_table"]["tlb_levels"]["value"] == 3
    # penalties: 220 - 200, 270 - 220, 390 - 270
    pens = [_value(doc, f"l{k}_tlb", "miss_penalty_cycles") for k in (1, 2, 3)]
    assert pens == [20, 50, 120]
    assert set(data["layout"]) == {"contiguous", "scattered"}


def test_large_units_are_not_coalesced():
    # unseen_tlb_large_units.yaml: L1 8 x 2 MiB, L2 32 x 16 MiB whatever the mapping: reaches
    # 8 and 256 pages under both layouts
    _, doc = _run("unseen_tlb_large_units.yaml", _section(320, 320))
    for element, pages in (("l1_tlb", 8), ("l2_tlb", 256)):
        assert _value(doc, element, "coalesced_pages") == 1
        assert _value(doc, element, "reach_contiguous_bytes") == pages * CHUNK
        assert _value(doc, element, "reach_scattered_bytes") == pages * CHUNK
    assert _value(doc, "l1_tlb", "entries") == 8
    assert _value(doc, "l2_tlb", "entries") == 32
    assert doc["page_table"]["tlb_levels"]["value"] == 2
    assert "l3_tlb" not in doc["elements"]


def test_family_is_registered_and_plots(coalescing):
    from gpudissect.plotting.describe import caption_mismatches, caption_text
    from gpudissect.report.captions import prose

    data, doc = coalescing
    fam = FAMILIES["tlb_mappings"]
    figures = fam.plot(data, doc)
    assert set(figures) == set(fam.figures)
    for stem, fig in figures.items():  # its caption, written from the drawing, matches it
        assert not caption_mismatches(fig, caption_text(fig, stem, prose(stem))), stem
    lines = fam.report_section(doc, [])
    assert any("coalesced pages per entry | 16 pages" in line for line in lines)
    assert "| l2_tlb | entries (units that fit, contiguous mapping) | 32 | 0.90 |" in lines


def test_scattered_order_has_no_neighbours_in_order():
    layout = PhysicalLayout("scattered", chunks=4096, chunk_bytes=CHUNK, seed=5)
    order = layout.chunk_order()
    assert sorted(order.tolist()) == list(range(4096))
    assert np.abs(np.diff(order)).min() >= 2
    assert (layout.chunk_order() == order).all()  # seeded
    assert (
        PhysicalLayout("contiguous", chunks=8, chunk_bytes=CHUNK).chunk_order() == np.arange(8)
    ).all()


def test_sparse_scattered_layout_maps_the_touched_chunks():
    # a scattered series at stride 16 MiB touches every 8th chunk; one at 2 MiB its first 16
    sweep = e.parse_params(
        _section(
            16,
            16,
            series=[
                {"layout": "scattered", "stride_bytes": CHUNK, "max_array_bytes": 16 * CHUNK},
                {"layout": "scattered", "stride_bytes": 8 * CHUNK, "max_array_bytes": 64 * CHUNK},
            ],
        ),
        "k",
    )
    layout = e.layout_of(sweep, "scattered")
    assert layout.chunks == 64
    assert layout.mapped == tuple(range(16)) + tuple(range(16, 64, 8))
    frames = layout.chunk_order()
    mapped = list(layout.mapped)
    assert sorted(frames[mapped].tolist()) == list(range(len(mapped)))
    with pytest.raises(ValueError, match="unmapped"):
        seq = np.array([0, 17 * CHUNK // 8])
        MappedChaseWork(
            sequence_work("cg", seq, warmup_steps=2, record_steps=4, element_bytes=8), layout
        )


def test_a_layout_maps_exactly_its_mapped_chunks():
    # chunks 1, 4 and 7 of 9 mapped: 1 and 7 are, 2 (between), 0 (before), 8 (after) are not
    layout = PhysicalLayout("scattered", chunks=9, chunk_bytes=CHUNK, mapped=(1, 4, 7))
    assert layout.maps(np.array([1, 7])) and layout.maps(np.array([4, 4, 1]))
    for chunks in ([1, 2], [0], [8], [7, 9]):
        assert not layout.maps(np.array(chunks)), chunks
    whole = PhysicalLayout("contiguous", chunks=9, chunk_bytes=CHUNK)
    assert whole.maps(np.arange(9)) and not whole.maps(np.array([9]))
    # a walk over mapped chunks only is a work; one more element in chunk 5 is not
    seq = np.array([CHUNK // 8, 4 * CHUNK // 8 + 3, 7 * CHUNK // 8])
    MappedChaseWork(
        sequence_work("cg", seq, warmup_steps=3, record_steps=6, element_bytes=8), layout
    )
    with pytest.raises(ValueError, match="unmapped"):
        seq = np.append(seq, 5 * CHUNK // 8)
        MappedChaseWork(
            sequence_work("cg", seq, warmup_steps=4, record_steps=8, element_bytes=8), layout
        )


def test_page_map_coalescing_engine_matches_reference():
    # the engine and the Python reference model give the same latencies, load for load, with
    # a scattered and a contiguous page map (coalescing keys, physical addresses for the L2)
    profile = load_profile(DATA / "unseen_tlb_coalescing.yaml")
    rng = np.random.default_rng(0)
    addrs = rng.integers(0, 96, 1500) * CHUNK + rng.integers(0, 64, 1500) * 32
    for kind in ("scattered", "contiguous"):
        layout = PhysicalLayout(kind, chunks=96, chunk_bytes=CHUNK, seed=2)
        pmap = PageMap(chunk_bytes=CHUNK, frames=layout.chunk_order())
        gpu = SimGPU(profile, seed=4)
        gpu.set_page_map(pmap)
        reference = MemoryHierarchy(profile, seed=4, page_map=pmap)
        expected = [reference.load("cg", int(a)) for a in addrs]
        assert gpu.load_sequence("cg", addrs).tolist() == expected


def test_page_map_aligned_runs():
    # frames 2 3 0 1 | 4 5 6 7: pairs in order and aligned everywhere, the second half a block of
    # four; the first half is not (2 3 0 1)
    pmap = PageMap(chunk_bytes=CHUNK, frames=np.array([2, 3, 0, 1, 4, 5, 6, 7]))
    assert pmap.aligned_runs.tolist() == [1, 1, 1, 1, 2, 2, 2, 2]
    assert pmap.physical(CHUNK + 5) == 3 * CHUNK + 5
    assert pmap.physical(100 * CHUNK) == 100 * CHUNK  # past the map: itself


@pytest.mark.parametrize(
    "over, match",
    [
        ({"chunk_bytes": 3 * MIB}, "chunk_bytes: 3145728 is not a power of two"),
        (
            {
                "series": [
                    {"layout": "scattered", "stride_bytes": 3 * MIB, "max_array_bytes": 64 * MIB}
                ]
            },
            "neither a multiple nor a divisor",
        ),
        (
            {
                "series": [
                    {
                        "layout": "contiguous",
                        "stride_bytes": CHUNK,
                        "max_array_bytes": 4 * CHUNK * 2000,
                    }
                ]
            },
            "max_record_steps",
        ),
        (
            {
                "series": [
                    {"layout": "contiguous", "stride_bytes": CHUNK, "max_array_bytes": 2 * CHUNK}
                ]
            },
            "fewer than 4 strides",
        ),
    ],
)
def test_bad_parameters_are_refused(over, match):
    with pytest.raises(ConfigError, match=match):
        e.parse_params(_section(8, 8, **over), "experiments.tlb_mappings")


def test_profile_refuses_a_coalescing_factor_not_a_power_of_two(tmp_path):
    import yaml

    from gpudissect.exceptions import ProfileError

    doc = yaml.safe_load((DATA / "unseen_tlb_coalescing.yaml").read_text())
    doc["tlbs"]["levels"][0]["coalesce_pages"] = 3
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ProfileError, match="coalesce_pages"):
        load_profile(path)


def test_a_stride_at_the_unit_cannot_show_coalescing():
    # unseen_tlb_large_units.yaml at a stride of 16 MiB, the L2 TLB's unit: every element takes
    # an entry of its own under either mapping (reach 32 x 16 MiB both), so equal reaches say
    # nothing about coalescing there
    section = _section(
        8,
        8,
        series=[
            {"layout": kind, "stride_bytes": 8 * CHUNK, "max_array_bytes": 40 * 8 * CHUNK}
            for kind in ("contiguous", "scattered")
        ],
    )
    _, doc = _run("unseen_tlb_large_units.yaml", section)
    l2 = doc["elements"]["l2_tlb"]
    assert (
        l2["reach_contiguous_bytes"]["value"] == l2["reach_scattered_bytes"]["value"] == 512 * MIB
    )
    assert l2["coalesced_pages"]["value"] is None
    assert "cannot show" in l2["coalesced_pages"]["undetermined"]


def test_memory_share_spans_come_from_the_device_memory():
    from gpudissect.contract.facts import DeviceFacts

    series = [
        {"layout": "contiguous", "stride_bytes": CHUNK, "max_array_bytes": {"memory_share": 0.5}},
        {"layout": "scattered", "stride_bytes": CHUNK, "max_array_bytes": {"memory_share": 40}},
    ]
    sweep = e.parse_params(_section(8, 8, series=series), "experiments.tlb_mappings")
    assert [s.max_array_bytes for s in sweep.series] == [0, 0]
    memory = 1000 * CHUNK + 12345
    facts = DeviceFacts(
        source="profile", name="x", compute_capability=None, sm_count=1, max_threads_per_sm=32,
        total_memory_bytes=memory,
    )  # fmt: skip
    got = e.resolve(sweep, facts)
    cap = sweep.max_record_steps // sweep.traversals
    # half the memory in whole strides; forty times it cut to what the records hold
    assert got.series[0].max_array_bytes == 500 * CHUNK
    assert got.series[1].max_array_bytes == min(40 * memory // CHUNK, cap) * CHUNK < 40 * memory
    with pytest.raises(ConfigError, match="memory size"):
        e.resolve(sweep, dataclasses.replace(facts, total_memory_bytes=None))


def test_records_are_cut_to_the_shared_memory_a_block_may_opt_into():
    from gpudissect.contract.facts import DeviceFacts

    series = [
        {"layout": "contiguous", "stride_bytes": CHUNK, "max_array_bytes": {"memory_share": 40}},
    ]
    section = _section(8, 8, series=series) | {"max_record_steps": 28672}
    sweep = e.parse_params(section, "experiments.tlb_mappings")
    facts = DeviceFacts(
        source="profile", name="x", compute_capability=None, sm_count=1, max_threads_per_sm=32,
        total_memory_bytes=1 << 40, shared_per_block_optin_bytes=101376,
    )  # fmt: skip
    got = e.resolve(sweep, facts)
    # 99 KiB of opt-in shared memory (an Ada GPU's) holds 12672 records of 8 bytes
    assert got.max_record_steps == 12672 and got.max_record_steps * e.RECORD_BYTES <= 101376
    assert got.series[0].max_array_bytes == 12672 // sweep.traversals * CHUNK
    # Hopper's 227 KiB hold the configured records: nothing is cut
    hopper = dataclasses.replace(facts, shared_per_block_optin_bytes=232448)
    assert e.resolve(sweep, hopper).max_record_steps == 28672
    # a series of fixed bytes the cut records cannot hold is refused with the bound
    fixed = [{"layout": "contiguous", "stride_bytes": CHUNK, "max_array_bytes": 5000 * CHUNK}]
    sweep = e.parse_params(_section(8, 8, series=fixed) | {"max_record_steps": 28672}, "k")
    with pytest.raises(
        ConfigError, match=r"tlb_mappings\.series\[0\]\.max_array_bytes: .* over the 12672"
    ):
        e.resolve(sweep, facts)


def test_a_slower_share_one_element_later_is_the_same_level():
    from gpudissect.analysis.tlb.tlb_mappings import Onset, SeriesReading

    mib32 = 32 << 20
    # the H100's 32 MiB scattered walks: 388 cycles from 2049 elements, 419 from 2050, the next
    # level from 8194
    onsets = (
        Onset(1, 2048, 2049, mib32),
        Onset(2, 2049, 2050, mib32),
        Onset(3, 8193, 8194, mib32),
    )
    s = SeriesReading("scattered", mib32, 2 << 20, 9557, 68, onsets)
    assert s.onset(1) is onsets[0] and s.onset(2) is None and s.onset(3) is onsets[2]


# the `tlb_mappings` traces of three whole H100 runs (run_8d8abb0_1, run_8d8abb0_2 and
# run_e6c8c7e_2, once under results/reference/h100/repeat_runs/; results/reference/FINDINGS.md)
RUNS = Path(__file__).resolve().parent / "data" / "h100_tlb_mappings"


def _committed(run):
    import pandas as pd

    data = pd.read_parquet(RUNS / f"{run}.parquet")
    return data, analyse(data, provenance={"device": "gpu0"})


def test_an_h100_l1_tlb_below_its_unit_is_read_in_both_layouts():
    # run_8d8abb0_2: at 2 MiB (one chunk, 1/8 of the 16 MiB unit) the contiguous walks' first
    # address of each unit rose in 9 of 16 cases by over 3 noise SDs (the noise of that run's
    # walks: 3 cycles), the median by 9.5: the class as a whole carries the onset. Its
    # scattered walks were bisected to 128 -> 129 during the sweep
    data, doc = _committed("run_8d8abb0_2")
    assert _value(doc, "l1_tlb", "coalesced_pages") == 1
    assert "stride 2 MiB" in doc["elements"]["l1_tlb"]["coalesced_pages"]["evidence"]
    assert _value(doc, "l1_tlb", "reach_contiguous_bytes") == 256 * MIB
    assert _value(doc, "l1_tlb", "reach_scattered_bytes") == 256 * MIB
    assert _value(doc, "l1_tlb", "entries") == 16
    assert _value(doc, "l2_tlb", "entries") == 2051


def test_the_sweep_bisects_the_hidden_onset_behind_an_early_threshold_onset(monkeypatch):
    # early in a sweep the levels come from few walks: the H100's contiguous 2 MiB series alone
    # put a threshold onset at 5 -> 6 elements (at 1b75ec3), which hid the hidden level's
    # bracket from the bisection; it is now a bracket of its own
    from gpudissect.analysis.tlb import tlb_mappings as tm

    data, _ = _committed("run_8d8abb0_1")
    early = tm.Onset(1, 5, 6, CHUNK)
    monkeypatch.setattr(tm, "series_onsets", lambda df, levels, base, paired=None: [early])
    brackets = tm.onset_brackets(data, layout="contiguous", stride_bytes=CHUNK)
    assert brackets == [(5, 6), (128, 129)]


def test_the_committed_h100_run_bisected_the_hidden_onset_to_one_element():
    data, doc = _committed("run_8d8abb0_1")
    for layout in ("contiguous", "scattered"):
        reach = doc["elements"]["l1_tlb"][f"reach_{layout}_bytes"]
        assert reach["confidence"] == 0.9
        assert reach["evidence"].startswith("stride 2 MiB: walks of 128 elements fit, from 129")


def test_a_tail_of_the_data_latencies_is_no_onset():
    from gpudissect.analysis.tlb.tlb_mappings import _above_tail

    # 0.3% of every walk's accesses in the level (two or more a traversal from 1000 elements
    # on), then the overflow at 4103
    ms = [304, 512, 861, 1024, 1448, 2048, 2896, 4096, 4101, 4102, 4103, 4110, 4200]
    misses = {m: round(0.003 * m) for m in ms} | {4103: 47, 4110: 75, 4200: 500}
    assert _above_tail(ms, misses, 1024) == 4103
    # no tail: the onset stays
    clean = {m: 0 for m in ms} | {4103: 47, 4110: 75, 4200: 500}
    assert _above_tail(ms, clean, 4103) == 4103


def test_an_h100_run_whose_data_latencies_reach_into_the_miss_level_keeps_its_levels():
    # run_e6c8c7e_2: data hits to 354 cycles, the boundary to the L2-TLB miss level (390) at
    # 348; without the tail rule that level set in at 609-3444 elements by series and the
    # L2 TLB read as a third level
    data, doc = _committed("run_e6c8c7e_2")
    assert doc["page_table"]["tlb_levels"]["value"] == 3
    assert _value(doc, "l2_tlb", "entries") == 2051
    assert _value(doc, "l2_tlb", "reach_contiguous_bytes") == 4102 * 16 * MIB
    assert _value(doc, "l1_tlb", "entries") == 16


def test_contiguous_walks_are_extended_to_a_coalescing_levels_reach():
    # tests/data/unseen_tlb_modern.yaml: L1 TLB 16 entries x 2 pages, L2 TLB 128 entries (8
    # sets of 16) x 8 pages, L3 128 entries x 32 pages. Contiguous reaches: L1 32 pages (64
    # MiB), L2 128 x 8 = 1024 pages (2 GiB); scattered: L1 16 pages, L2 128 pages (256 MiB).
    # The 2 MiB contiguous series is configured to 200 pages, short of the L2's 1024; the
    # scattered one (192 pages) shows its onset at 128, so the contiguous one is doubled (400,
    # 800, 1600, then the 2048 pages of the 4 GiB the 16 MiB series maps) until it shows it:
    # coalescing 1024 / 128 = 8 pages, the L1's 32 / 16 = 2
    section = _section(200, 192, max_record_steps=8192)
    section["series"].append(
        {"layout": "contiguous", "stride_bytes": 16 * MIB, "max_array_bytes": 256 * 16 * MIB}
    )
    data, doc = _run("unseen_tlb_modern.yaml", section)
    longest = data[(data["layout"] == "contiguous") & (data["stride_bytes"] == CHUNK)]
    assert longest["elements"].max() > 1024
    assert _value(doc, "l1_tlb", "coalesced_pages") == 2
    assert _value(doc, "l2_tlb", "coalesced_pages") == 8
    assert _value(doc, "l2_tlb", "reach_contiguous_bytes") == 2048 * MIB
    assert _value(doc, "l2_tlb", "reach_scattered_bytes") == 256 * MIB


def test_an_extended_contiguous_walk_records_one_traversal_past_three():
    # the same profile and series, with records for three traversals of 682 elements only
    # (2048 // 3): the L2 TLB's contiguous reach (1024 pages) lies past them, so the doubling
    # goes on with walks that record what the records hold, at least one whole traversal, up
    # to 2047 elements (the 16 MiB series maps 2048 pages)
    section = _section(200, 192, max_record_steps=2048)
    section["series"].append(
        {"layout": "contiguous", "stride_bytes": 16 * MIB, "max_array_bytes": 256 * 16 * MIB}
    )
    assert e.extended_cap(e.parse_params(section, "experiments.tlb_mappings")) == 2047
    data, doc = _run("unseen_tlb_modern.yaml", section)
    walks = data[(data["layout"] == "contiguous") & (data["stride_bytes"] == CHUNK)]
    steps = walks.groupby("elements").size()
    assert 1024 < steps.index.max() <= 2047
    past = steps[3 * steps.index + 1 > 2048]
    assert len(past) and (past == 2048).all() and (past.index < 2048).all()
    assert _value(doc, "l2_tlb", "coalesced_pages") == 8
    assert _value(doc, "l2_tlb", "reach_contiguous_bytes") == 1024 * CHUNK
