"""Figures against their captions: each figure of the reference H100 run is drawn again and its
caption, written from what the drawing shows, is checked against that drawing: every axis label
and every named series is in it, and every colour or line style it names is one the figure
draws (a caption that said "red" beside an orange mark, or named axes the figure did not have,
fails here)."""

import copy
import json
import re
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from gpudissect.families import family  # noqa: E402
from gpudissect.plotting.describe import (  # noqa: E402
    COLOUR_VOCABULARY,
    caption_mismatches,
    caption_text,
    colour_word,
    describe,
)
from gpudissect.report.captions import caption, caption_path, prose  # noqa: E402

RUN = Path(__file__).resolve().parents[1] / "results/reference/h100"
EXPERIMENTS = sorted(p.stem for p in (RUN / "analysis/gpu0").glob("*.json"))
MIB = 2**20


def _draw(name: str, doc: dict | None = None) -> dict:
    fam = family(name)
    data = pd.read_parquet(RUN / f"traces/gpu0/{name}.parquet")
    result = RUN / f"analysis/gpu0/{name}.json"
    doc = doc if doc is not None else json.loads(result.read_text())
    if fam.table is not None:
        return fam.plot(data, doc, table=pd.read_parquet(result.with_suffix(".parquet")))
    return fam.plot(data, doc)


def _words(text: str, vocabulary) -> set[str]:
    return {w for w in vocabulary if re.search(rf"\b{w}\b", text, re.I)}


def check_caption(fig, stem: str) -> str:
    text = caption_text(fig, stem, prose(stem))
    assert describe(fig), stem
    assert not caption_mismatches(fig, text), (stem, caption_mismatches(fig, text), text)
    return text


def test_a_caption_that_says_red_beside_orange_is_caught():
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4], color="#d55e00", label="measured")  # the theme's C3, vermilion
    ax.set(xlabel="size (KiB)", ylabel="latency (cycles)")
    ax.legend()
    assert not caption_mismatches(fig, caption_text(fig, "x"))
    wrong = caption_mismatches(fig, "latency (cycles) against size; the red line is measured")
    assert any("red" in w for w in wrong) and any("size (KiB)" in w for w in wrong)
    plt.close(fig)


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_each_figure_of_a_run_matches_its_caption(name):
    figures = _draw(name)
    assert set(figures) == set(family(name).figures)
    for stem, fig in figures.items():
        check_caption(fig, stem)
        plt.close(fig)


def test_the_caption_prose_names_no_colour():
    """The prose explains; what is drawn in which colour is written from the drawing."""
    folder = Path(__file__).resolve().parents[1] / "workflow/report/figures"
    for path in folder.glob("*.rst"):
        words = _words(path.read_text(), COLOUR_VOCABULARY | {"dashed", "dotted"})
        assert not words, (path.name, words)


def test_colour_words_are_the_ones_a_reader_sees():
    from gpudissect.plotting import set_theme

    set_theme()
    assert colour_word("C3") == "dark orange"  # the theme's "red" is vermilion
    assert colour_word("tab:red") == "red" and colour_word("C1") == "orange"
    assert colour_word("k") == "black"
    assert colour_word("grey") == "grey"


def test_reach_figure_draws_latency_against_array_size_one_line_per_stride():
    doc = json.loads((RUN / "analysis/gpu0/tlbs.json").read_text())
    data = pd.read_parquet(RUN / "traces/gpu0/tlbs.parquet")
    fig = _draw("tlbs")["tlbs_reach"]
    (panel,) = describe(fig)
    assert (panel.xlabel, panel.ylabel) == ("array size (binary units)", "mean latency (cycles)")
    strides = sorted(data.loc[data["stage"] == "reach", "stride_bytes"].unique())
    # in binary units: the H100's search walked 512 KiB besides 2, 8 and 32 MiB
    assert [n for n in panel.names if n.startswith("stride ")] == [
        f"stride {s // MIB} MiB" if s >= MIB else f"stride {s // 1024} KiB" for s in strides
    ]
    ax = fig.axes[0]
    marks = sorted(ln.get_xdata()[0] for ln in ax.get_lines() if ln.get_label().endswith("pages)"))
    els = doc["elements"]
    assert marks == sorted(
        els[e]["entries"]["value"] * els[e]["page_bytes"]["value"] for e in ("l1_tlb", "l2_tlb")
    )
    fig.canvas.draw()
    ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert ticks and all(re.fullmatch(r"[\d.]+ (B|KiB|MiB|GiB)", t) for t in ticks), ticks


def test_l2_lines_mark_the_reported_size_not_the_step():
    doc = json.loads((RUN / "analysis/gpu0/l2.json").read_text())
    doc = copy.deepcopy(doc)
    doc["elements"]["l2"]["size_bytes"]["value"] = 40 * MIB  # away from every step
    fig = _draw("l2", doc)["l2_footprint"]
    ax = fig.axes[0]
    dashed = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert [ln.get_xdata()[0] for ln in dashed] == [40 * MIB]
    assert "reported L2 size 40 MiB" in check_caption(fig, "l2_footprint")


def test_an_empty_pattern_says_why():
    doc = json.loads((RUN / "analysis/gpu0/latency_patterns.json").read_text())
    reason = doc["paths"]["ca"]["P6"]["undetermined"]
    fig = _draw("latency_patterns")["latency_patterns"]
    (panel,) = describe(fig)
    assert any(n.startswith("P6 undetermined:") for n in panel.notes)
    assert " ".join(reason.split()) in " ".join(" ".join(panel.notes).split())


def test_the_plot_step_writes_each_caption_beside_its_figure(tmp_path):
    from gpudissect.cli import _draw_experiment

    _draw_experiment(
        "tlbs",
        str(RUN / "traces/gpu0/tlbs.parquet"),
        str(RUN / "analysis/gpu0/tlbs.json"),
        str(tmp_path),
        ("png",),
    )
    for stem in family("tlbs").figures:
        png = tmp_path / f"{stem}.png"
        written = caption_path(png).read_text()
        assert written.startswith(f"``{stem}.png``: ") and prose(stem) in written
        assert caption(stem, "gpu0", png) == "gpu0: " + written.strip().replace("``", "`")


def test_a_rejected_bank_fit_is_drawn_and_named_rejected():
    doc = copy.deepcopy(json.loads((RUN / "analysis/gpu0/bank_conflicts.json").read_text()))
    reasons = ["the linear law misses 100 of 129 points by more than 5%"]
    doc["model"]["linear_law"] = {
        "accepted": False,
        "misses": 100,
        "points": 129,
        "reasons": reasons,
    }
    figures = _draw("bank_conflicts", doc)
    degree = figures["bank_conflicts_degree"]
    (line,) = [ln for ln in degree.axes[0].get_lines() if "(d - 1)" in ln.get_label()]
    assert line.get_label().endswith(", rejected") and line.get_linestyle() == ":"
    assert "rejected (grey dotted line)" in check_caption(degree, "bank_conflicts_degree")
    stride = check_caption(figures["bank_conflicts_stride"], "bank_conflicts_stride")
    assert "(rejected linear fit)" in stride and "(model)" not in stride
    # an accepted fit stays the dashed black model
    doc["model"]["linear_law"] = {"accepted": True, "misses": 0, "points": 129, "reasons": []}
    degree = _draw("bank_conflicts", doc)["bank_conflicts_degree"]
    (line,) = [ln for ln in degree.axes[0].get_lines() if "(d - 1)" in ln.get_label()]
    assert "rejected" not in line.get_label() and line.get_linestyle() == "--"


def test_a_level_served_by_another_cache_is_titled_so():
    doc = copy.deepcopy(json.loads((RUN / "analysis/gpu0/cache_stage1.json").read_text()))
    doc["paths"]["ca"]["levels"][0]["served_by"] = "l2"
    fig = _draw("cache_stage1", doc)["cache_stage1_sweeps"]
    titles = [ax.get_title() for ax in fig.axes]
    assert "ca level 1: served by the l2" in titles and "ca level 1 (l1d)" not in titles


def test_warps_that_missed_nothing_still_show_and_a_panel_names_only_its_bars():
    doc = copy.deepcopy(json.loads((RUN / "analysis/gpu0/cache_instances.json").read_text()))
    name, element = next((k, v) for k, v in doc["elements"].items() if v.get("warps"))
    doc["elements"] = {name: element}
    for t in element["warps"]:  # every warp apart, and none of them disturbing warp 0
        t["disturbed"], t["misses_disturbed"] = False, 0
    fig = _draw("cache_instances", doc)["cache_instances_warps"]
    ax = fig.axes[0]
    labels = [c.get_label() for c in ax.containers]
    assert labels == ["apart"]  # no legend entry for red bars the panel does not draw
    assert ax.get_ylim()[0] < 0 and all(p.get_linewidth() > 0 for p in ax.containers[0])
    check_caption(fig, "cache_instances_warps")


def test_a_simulated_label_takes_its_own_line_where_the_title_would_not_fit():
    from gpudissect.cli import _label_simulated

    doc = {"device": "tesla_m2070", "device_info": {"backend": "sim"}}
    for width, title in ((5.2, "mean latency vs array size (ca path)"), (12, "short")):
        fig = plt.figure(figsize=(width, 3))
        fig.suptitle(f"tesla_m2070: {title}")
        _label_simulated(fig, doc)
        text = fig._suptitle.get_text()
        assert text.startswith("tesla_m2070 (simulated twin):") and text.endswith(title)
        # at 5.2 inches the whole line (about 70 characters) is wider than the figure
        assert ("\n" in text) == (width == 5.2)
        plt.close(fig)


def test_a_flat_sweep_with_no_size_is_drawn_on_a_tenth_of_its_level():
    from gpudissect.plotting.pchase import plot_size_sweep

    sizes = range(4096, 49153, 512)
    # a path with no cache of its own: 230 cycles, +-0.4 cycles of noise, no size detected
    summary = pd.DataFrame(
        {
            "carveout_pct": -1,
            "shared_buffer_bytes": 16384,
            "array_bytes": list(sizes),
            "mean_latency_cycles": [230 + 0.4 * ((i * 7) % 3 - 1) for i in range(len(sizes))],
        }
    )
    flat = [{"carveout_pct": -1, "shared_buffer_bytes": 16384, "size_bytes": None}]
    fig, axes = plot_size_sweep(summary, change_points=flat, title="t")
    assert axes[0].get_ylim() == pytest.approx((0.95 * 230, 1.05 * 230))
    plt.close(fig)


def test_error_bars_are_their_series_own_and_not_vertical_lines():
    fig, ax = plt.subplots()
    ax.errorbar([1, 2, 3], [4, 5, 6], yerr=0.5, capsize=2, color="C0", label="reads")
    ax.set(xlabel="CTAs", ylabel="bandwidth (GiB/s)")
    ax.legend()
    text = caption_text(fig, "x")
    assert "reads (blue line with error bars)" in text and "vertical line" not in text, text
    plt.close(fig)


def test_a_histogram_is_named_bars_once_and_keeps_its_labels():
    fig, ax = plt.subplots()
    _, _, bars = ax.hist([1, 2, 2, 3], bins=3, color="C0", label="ca: raw")
    ax.set(xlabel="cycles", ylabel="timed accesses")
    ax.legend()
    text = caption_text(fig, "x")
    assert "ca: raw (blue bars)" in text and text.count("bars") == 1, text
    assert bars[0].get_label() == "ca: raw"  # describing a figure changes none of its artists
    plt.close(fig)


def test_an_empty_band_is_not_named():
    import seaborn as sns

    fig, ax = plt.subplots()
    # one value per x: seaborn adds an interval band with nothing in it
    sns.lineplot(x=[1, 2, 3], y=[4, 5, 4], marker="o", ax=ax)
    ax.set(xlabel="array size N (KiB)", ylabel="average latency (cycles)")
    assert "band" not in caption_text(fig, "x")
    plt.close(fig)


def test_a_panel_with_a_mark_the_others_lack_is_described_on_its_own():
    """Merger4 on the H100 marks a saturation spike in one of its 8 panels only."""
    figures = _draw("requests")
    fig = figures["requests_merger4"]
    text = check_caption(fig, "requests_merger4")
    marked = [ax.get_title() for ax in fig.axes if ax.get_title() and any(
        ln.get_linestyle() == "--" for ln in ax.get_lines())]  # fmt: skip
    assert marked and all(f"{title}: " in text for title in marked), text
    assert f"each of {len([a for a in fig.axes if a.get_title()]) - len(marked)} panels" in text
    for f in figures.values():
        plt.close(f)


def test_a_flush_gap_without_a_size_says_why_and_still_draws_its_line():
    doc = json.loads((RUN / "analysis/gpu0/l2_flush.json").read_text())
    reason = doc["elements"]["l2"]["size_bytes"]["undetermined"]  # the H100 marks no size
    text = check_caption(_draw("l2_flush")["l2_flush"], "l2_flush")
    assert f"no L2 size marked: {reason}" in text and "no data drawn" not in text, text


def test_misses_without_a_fitted_structure_say_so_and_mark_the_reach():
    fig = _draw("tlbs")["tlbs_set_misses"]
    text = check_caption(fig, "tlbs_set_misses")
    # the H100's L2 TLB: 2045 entries read, its ways undetermined
    assert "reach: 2045 entries (grey dotted vertical line)" in text, text
    assert "no set structure fitted: L2 TLB ways undetermined" in text, text


def test_no_variance_axis_carries_an_offset_over_its_ticks():
    fig = _draw("requests")["requests_unq"]  # the H100's UNQ variance reaches 2e6 cycles²
    fig.canvas.draw()
    offsets = [ax.yaxis.get_offset_text().get_text() for ax in fig.axes]
    assert not any(offsets), offsets
    plt.close("all")


def test_each_median_is_written_above_its_whisker():
    fig = _draw("latency_patterns")["latency_patterns"]
    ax = fig.axes[0]
    tops = {}
    for ln in ax.get_lines():
        if ln.get_gid() == "5-95th percentile":
            tops[round(float(ln.get_xdata()[0]), 6)] = max(ln.get_ydata())
    labels = [t for t in ax.texts if t.get_gid() != "note"]
    assert labels and tops
    for t in labels:
        x, y = t.get_position()
        assert y >= tops.get(round(x, 6), y), (t.get_text(), y, tops.get(round(x, 6)))
    plt.close(fig)


def test_the_ilp_panels_name_their_theoretical_line():
    fig = _draw("shared_throughput")["shared_throughput_ilp"]
    text = check_caption(fig, "shared_throughput_ilp")
    assert "theoretical (black dotted horizontal line)" in text, text


def test_reach_labels_sit_below_the_top_edge_on_a_ground_of_their_own():
    """The H100's l3_tlb label stood on the top edge, with the 256 GiB walk's curve through it."""
    fig = _draw("tlb_mappings")["tlb_mappings_reach"]
    ax = fig.axes[0]
    fig.canvas.draw()
    box = ax.get_window_extent()
    assert ax.texts
    for t in ax.texts:
        extent = t.get_window_extent()
        assert extent.y1 < box.y1 - 1 and extent.x1 <= box.x1, t.get_text()
        assert t.get_bbox_patch() is not None, t.get_text()  # a curve passes behind it
    plt.close(fig)


def test_a_long_log_axis_labels_only_its_2x_and_5x_minor_ticks():
    from gpudissect.plotting.banks import _minor_label

    fig, ax = plt.subplots()
    ax.set_yscale("log")
    ax.set_ylim(45, 1200)  # a twin's latencies: more than a decade
    assert [_minor_label(ax, v) for v in (60, 200, 500, 700, 900)] == ["", "200", "500", "", ""]
    ax.set_ylim(22, 90)  # the H100's: short of one, every minor tick labelled
    assert [_minor_label(ax, v) for v in (30, 40, 70)] == ["30", "40", "70"]
    plt.close(fig)


def test_an_inner_panel_takes_the_y_label_of_its_row():
    fig, (a, b) = plt.subplots(1, 2)
    a.bar([1, 2], [0.5, 1.0], color="C3", label="shares")
    b.bar([1, 2], [1.0, 1.0], color="C0", label="apart")
    for ax in (a, b):
        ax.set_xlabel("test thread's warp")
        ax.set_title(ax.containers[0].get_label())
        ax.legend()
    a.set_ylabel("share missed")
    text = caption_text(fig, "x")
    assert "apart: share missed against test thread's warp" in text, text
    plt.close(fig)


def test_timing_marks_are_named_and_narrow_bars_have_no_white_edges():
    fig = _draw("timing_overhead")["timing_overhead"]
    text = check_caption(fig, "timing_overhead")
    assert "ca: index chase (blue dotted vertical line)" in text, text
    assert "raw latency (black line)" in text, text
    # one-cycle bins a pixel or two wide: the theme's white edge would cover their colour
    assert all(p.get_linewidth() == 0 for p in fig.axes[0].patches)
    plt.close(fig)
    fig = _draw("caches")["caches_replacement"]  # the H100's l1d: 85 ways
    bars = [p for ax in fig.axes for p in ax.patches]
    assert bars and all(p.get_linewidth() == 0 for p in bars)
    plt.close(fig)


def test_a_sweep_without_its_size_says_why():
    """The prose of both figures speaks of a marked size; the H100 reads none for its constant
    L1.5 (no array up to 64 KiB misses) nor for the L1 without shared memory."""
    stage1 = json.loads((RUN / "analysis/gpu0/cache_stage1.json").read_text())
    (level2,) = [lv for lv in stage1["paths"]["const"]["levels"] if lv["level"] == 2]
    text = check_caption(_draw("cache_stage1")["cache_stage1_sweeps"], "cache_stage1_sweeps")
    assert f"no size marked: {level2['size_bytes']['undetermined']}" in text, text
    bandwidth = json.loads((RUN / "analysis/gpu0/bandwidth.json").read_text())
    why = bandwidth["elements"]["l1d"]["size_bytes"]["undetermined"]
    text = check_caption(_draw("bandwidth")["bandwidth_l1_capacity"], "bandwidth_l1_capacity")
    assert f"no L1 size marked: {why}" in text, text
    plt.close("all")
