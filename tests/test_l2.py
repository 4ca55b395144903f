"""The L2 footprint family: twins' L2 sizes from latencies, near/far split on synthetic data."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpudissect.analysis.l2.l2 import analyse
from gpudissect.analysis.l2.l2_near_far import near_far
from gpudissect.config import load
from gpudissect.sweep import run_experiment
from gpudissect.traces import read_trace

REPO = Path(__file__).resolve().parents[1]


# L2 sizes the papers report: TPDS Table V (GTX560Ti 512 KB, GTX780 1536 KB, GTX980 2048 KB),
# thesis Table 5.4 (K20c 1.25 MiB); the default sweep steps by 128-512 KiB, so the size must be
# the footprint just below the first one that misses.
@pytest.mark.parametrize(
    ("device", "size"),
    [
        ("gtx560ti", 512 << 10),
        ("gtx780", 1536 << 10),
        ("gtx980", 2048 << 10),
        ("tesla_k20c", 1280 << 10),
    ],
)
def test_twin_l2_size(device, size, tmp_path):
    cfg = load(REPO / "config" / "config.yaml", base_dir=REPO)
    trace = read_trace(run_experiment(cfg.device(device), "l2", out=tmp_path / "t.parquet"))
    doc = analyse(trace.data, provenance=trace.provenance)
    assert doc["elements"]["l2"]["size_bytes"]["value"] == size
    assert doc["elements"]["l2"]["far_hit_latency_cycles"]["value"] is None  # one distance


def test_two_partitions_are_split():
    # 60% of hits at ~260 cycles, 40% at ~330 (sd 6): two groups 70 cycles apart
    rng = np.random.default_rng(0)
    hits = np.concatenate([rng.normal(260, 6, 6000), rng.normal(330, 6, 4000)])
    q = near_far(hits)
    assert abs(q["hit_latency_cycles"]["value"] - 260) < 2
    assert abs(q["far_hit_latency_cycles"]["value"] - 330) < 2
    assert abs(q["far_share"]["value"] - 0.4) < 0.02


def test_one_distance_is_not_split():
    rng = np.random.default_rng(1)
    q = near_far(rng.normal(300, 8, 10000))
    assert q["far_hit_latency_cycles"]["value"] is None
    assert abs(q["hit_latency_cycles"]["value"] - 300) < 1


# --- Seeded synthetic footprint sweeps with known levels -------------------------------------
# Shapes from an H100 measured at stride 128 B (ld.global.cg, 2048 timed loads per footprint):
# near-partition hits ~290 cycles, far-partition hits 435-800 with a long upper tail, DRAM two
# groups (~570, and 650-930). The generating medians are the assertions' references.
MIB = 1 << 20
NEAR_MEDIAN = 290.0  # N(290, 15)
FAR_MEDIAN = 520.0  # 420 + lognormal(median 100, sigma 0.8): p5 ~447, p95 ~793
RECORD = 2048


def near(rng, n):
    return rng.normal(NEAR_MEDIAN, 15, n)


def far(rng, n):
    return FAR_MEDIAN - 100 + rng.lognormal(np.log(100), 0.8, n)


def dram(rng, n):
    side = rng.random(n) < 0.35
    return np.where(side, rng.normal(570, 15, n), 640 + rng.lognormal(np.log(100), 0.5, n))


def dram_median():
    return float(np.median(dram(np.random.default_rng(99), 400_000)))


def sweep(parts_of, sizes_mib, *, seed, stride_bytes=128, outlier_rate=0.002):
    """A trace: at footprint m MiB, each access drawn from one of `parts_of(m)` = [(share,
    draw)], plus rare timing outliers (+1000 cycles)."""
    rng = np.random.default_rng(seed)
    frames = []
    for point, m in enumerate(sizes_mib):
        parts = parts_of(m)
        which = rng.choice(len(parts), RECORD, p=[share for share, _ in parts])
        lat = np.empty(RECORD)
        for k, (_, draw) in enumerate(parts):
            lat[which == k] = draw(rng, int(np.sum(which == k)))
        lat[rng.random(RECORD) < outlier_rate] += 1000
        n = int(m * MIB)
        frames.append(
            pd.DataFrame(
                {
                    "point": np.full(RECORD, point, np.int32),
                    "path": "cg",
                    "array_bytes": np.full(RECORD, n, np.int64),
                    "stride_bytes": np.full(RECORD, stride_bytes, np.int64),
                    "step": np.arange(RECORD, dtype=np.int32),
                    "index": ((np.arange(RECORD) * stride_bytes) % n // 4).astype(np.uint32),
                    "latency_cycles": np.round(np.clip(lat, 1, None)).astype(np.uint32),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def h100_parts(m):
    """Near hits up to 24 MiB; 26 MiB half, 28 MiB 15% still near; far hits up to 48 MiB (44
    and 48 with a few DRAM accesses, as measured); DRAM beyond: near size in (24, 28] MiB, L2
    size in (48, 52] MiB."""
    if m <= 24:
        return [(1.0, near)]
    if m < 28:
        return [(0.5, near), (0.5, far)]
    if m == 28:
        return [(0.15, near), (0.85, far)]
    if m <= 40:
        return [(1.0, far)]
    if m <= 48:
        return [(0.9, far), (0.1, dram)]
    return [(1.0, dram)]


def l2_of(trace):
    doc = analyse(trace, provenance={"device": "synthetic"})
    return doc["elements"]["l2"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_three_plateaus_give_near_far_and_dram(seed):
    l2 = l2_of(sweep(h100_parts, range(8, 73, 4), seed=seed))
    assert abs(l2["hit_latency_cycles"]["value"] / NEAR_MEDIAN - 1) < 0.02
    assert abs(l2["far_hit_latency_cycles"]["value"] / FAR_MEDIAN - 1) < 0.03
    assert abs(l2["miss_latency_cycles"]["value"] / dram_median() - 1) < 0.03
    assert l2["size_bytes"]["bracket_bytes"] == [48 * MIB, 52 * MIB]
    assert l2["size_bytes"]["value"] == 48 * MIB
    assert l2["near_size_bytes"]["bracket_bytes"] == [24 * MIB, 28 * MIB]
    for key in ("far_hit_latency_cycles", "size_bytes", "near_size_bytes"):
        q = l2[key]
        assert 0 < q["confidence"] <= 1 and q["method"] and q["evidence"]
    assert "Hopper" in l2["far_hit_latency_cycles"]["method"]


@pytest.mark.parametrize("seed", [3, 4])
def test_a_finer_grid_brackets_the_edges_closer(seed):
    # 2 MiB steps: 26 MiB is a half-near blend, so the near edge is in (24, 28] MiB and the
    # bracket lies inside that; the L2 edge is in (48, 50] MiB
    l2 = l2_of(sweep(h100_parts, range(8, 73, 2), seed=seed))
    lo, hi = l2["near_size_bytes"]["bracket_bytes"]
    assert 24 * MIB <= lo < hi <= 28 * MIB
    assert l2["size_bytes"]["bracket_bytes"] == [48 * MIB, 50 * MIB]
    assert abs(l2["far_hit_latency_cycles"]["value"] / FAR_MEDIAN - 1) < 0.03


def test_a_far_level_that_drifts_is_one_level():
    # the far level rises by 30 cycles from 44 MiB on (its change point may split it): still
    # one far level, read at the median of its footprints' medians (four at 520, two at 550)
    def parts(m):
        return [(1.0, lambda rng, n: far(rng, n) + 30)] if 44 <= m <= 48 else h100_parts(m)

    l2 = l2_of(sweep(parts, range(8, 73, 4), seed=5))
    assert abs(l2["far_hit_latency_cycles"]["value"] / FAR_MEDIAN - 1) < 0.03
    assert l2["size_bytes"]["bracket_bytes"] == [48 * MIB, 52 * MIB]


def test_one_l2_level_and_dram_leave_far_undetermined():
    def parts(m):
        return [(1.0, near)] if m <= 24 else [(1.0, dram)]

    l2 = l2_of(sweep(parts, range(8, 73, 4), seed=6))
    assert l2["far_hit_latency_cycles"]["value"] is None
    assert "far level needs a plateau" in l2["far_hit_latency_cycles"]["undetermined"]
    assert l2["near_size_bytes"]["value"] is None
    assert abs(l2["hit_latency_cycles"]["value"] / NEAR_MEDIAN - 1) < 0.02
    assert abs(l2["miss_latency_cycles"]["value"] / dram_median() - 1) < 0.03
    assert l2["size_bytes"]["bracket_bytes"] == [24 * MIB, 28 * MIB]


def test_a_gradual_transition_is_not_a_far_level():
    # past a randomly replaced L2 the footprints 28-44 MiB miss on 60% of their accesses and
    # hit on the rest: the median steps twice, but the middle plateau still holds near hits
    def parts(m):
        if m <= 24:
            return [(1.0, near)]
        if m <= 44:
            return [(0.4, near), (0.6, dram)]
        return [(1.0, dram)]

    l2 = l2_of(sweep(parts, range(8, 73, 4), seed=7))
    assert len(l2["latency_steps_bytes"]["value"]) >= 2  # the sweep does show two steps
    assert l2["far_hit_latency_cycles"]["value"] is None
    assert "still hold near hits" in l2["far_hit_latency_cycles"]["undetermined"]


def test_near_hits_with_a_far_tail_do_not_hide_the_far_level():
    # as in h100/l2_repeats run 4 (results/reference/FINDINGS.md): the near footprints already
    # read 15% of their accesses far, so the near plateau's p90 lies among the far hits (above
    # the far plateau's p10); its upper Tukey fence (p75 + 1.5 IQR of N(290, 15): about 330)
    # does not.
    # Between far and DRAM, 46-48 MiB read a mixture of the two; the L2 ends at 48 MiB
    def parts(m):
        if m <= 24:
            return [(0.85, near), (0.15, far)]
        if m <= 44:
            return [(1.0, far)]
        if m <= 48:
            return [(0.7, far), (0.3, dram)]
        return [(1.0, dram)]

    sizes = [*range(8, 44, 4), 44, 46, 48, 52, 56, 64, 72]
    l2 = l2_of(sweep(parts, sizes, seed=11))
    assert abs(l2["far_hit_latency_cycles"]["value"] / FAR_MEDIAN - 1) < 0.06
    assert l2["near_size_bytes"]["bracket_bytes"] == [24 * MIB, 28 * MIB]
    assert l2["size_bytes"]["bracket_bytes"] == [48 * MIB, 52 * MIB]


def test_two_distinct_middle_levels_are_not_read():
    # near, far, DRAM and a fourth, higher level (a TLB level past the DRAM plateau, say):
    # "the plateau before the last" would be DRAM, so nothing is read as far
    def parts(m):
        if m <= 48:
            return h100_parts(m)
        if m <= 72:
            return [(1.0, dram)]
        return [(1.0, lambda rng, n: dram(rng, n) + 400)]

    l2 = l2_of(sweep(parts, range(8, 113, 4), seed=8))
    assert l2["far_hit_latency_cycles"]["value"] is None
    assert "distinct levels" in l2["far_hit_latency_cycles"]["undetermined"]
    assert l2["near_size_bytes"]["value"] is None


def test_hits_at_two_distances_by_address_still_split():
    # 40% of the lines sit in a far partition at every footprint that fits (no replication):
    # one step to DRAM, and the Otsu route splits the hits
    def parts(m):
        if m <= 24:
            return [
                (0.6, lambda rng, n: rng.normal(260, 6, n)),
                (0.4, lambda rng, n: rng.normal(330, 6, n)),
            ]
        return [(1.0, dram)]

    l2 = l2_of(sweep(parts, range(8, 73, 4), seed=9))
    assert abs(l2["hit_latency_cycles"]["value"] - 260) < 2
    assert abs(l2["far_hit_latency_cycles"]["value"] - 330) < 2
    assert abs(l2["far_share"]["value"] - 0.4) < 0.03
    assert l2["size_bytes"]["bracket_bytes"] == [24 * MIB, 28 * MIB]


def bimodal_near(rng, n):
    # the H100's near hits come at two latencies by address (~282 and ~313 cycles)
    return np.where(rng.random(n) < 0.55, rng.normal(282, 5, n), rng.normal(313, 6, n))


def test_a_stride_that_keeps_near_hits_in_every_line_leaves_far_undetermined():
    # at stride 32 B part of the accesses past the near size still hit near (the other sector
    # of a pair; 40% here): three median plateaus, as the H100 measured at 32 B showed (307,
    # 393, 438 cycles), but the middle and last ones hold near hits. The near hits' own two
    # groups (282 / 313) are not the far partition either.
    def parts(m):
        if m <= 24:
            return [(1.0, bimodal_near)]
        return [(0.4, bimodal_near)] + [(share * 0.6, d) for share, d in h100_parts(m)]

    l2 = l2_of(sweep(parts, range(8, 73, 4), seed=10, stride_bytes=32))
    assert l2["far_hit_latency_cycles"]["value"] is None
    assert "near hits" in l2["far_hit_latency_cycles"]["undetermined"]
    assert l2["miss_latency_cycles"]["value"] is None
    assert "far_share" not in l2
    assert 282 < l2["hit_latency_cycles"]["value"] < 313
    assert len(l2["latency_steps_bytes"]["value"]) == 2


def test_near_hits_in_two_groups_are_one_near_level():
    def parts(m):
        return [(1.0, bimodal_near)] if m <= 24 else h100_parts(m)

    l2 = l2_of(sweep(parts, range(8, 73, 4), seed=11))
    generating = float(np.median(bimodal_near(np.random.default_rng(98), 400_000)))
    assert abs(l2["hit_latency_cycles"]["value"] / generating - 1) < 0.02
    assert abs(l2["far_hit_latency_cycles"]["value"] / FAR_MEDIAN - 1) < 0.03


@pytest.mark.parametrize("slow_share", [0.3, 0.7])
def test_each_address_group_of_the_near_hits_is_reported_with_its_share(slow_share):
    # near hits at 282 and 313 cycles by address, the slow group holding 30% or 70% of them:
    # the headline (the median over both groups) moves with the share, each group's latency
    # does not
    def grouped(rng, n):
        slow = rng.random(n) < slow_share
        return np.where(slow, rng.normal(313, 6, n), rng.normal(282, 5, n))

    def parts(m):
        return [(1.0, grouped)] if m <= 24 else h100_parts(m)

    l2 = l2_of(sweep(parts, range(8, 73, 4), seed=21))
    fast, slow = l2["near_hit_fast_latency_cycles"], l2["near_hit_slow_latency_cycles"]
    assert abs(fast["value"] - 282) <= 2 and abs(slow["value"] - 313) <= 2
    assert abs(slow["share"] - slow_share) < 0.03
    assert fast["share"] == pytest.approx(1 - slow["share"], abs=1e-3)
    headline = l2["hit_latency_cycles"]["value"]
    assert (headline < 297) if slow_share < 0.5 else (headline > 298)
    assert "median over both address groups" in l2["hit_latency_cycles"]["method"]
    # the twin's inputs stay as they were
    assert l2["near_hit_groups"]["value"] == [fast["value"], slow["value"]]
    assert l2["near_hit_slow_share"]["value"] == pytest.approx(slow["share"], abs=1e-3)


def test_report_and_topology_table_show_each_address_group_with_its_share():
    from gpudissect.report.sections import l2_section
    from gpudissect.report.topology_table import to_markdown, topology_table

    def parts(m):
        return [(1.0, bimodal_near)] if m <= 24 else h100_parts(m)

    doc = analyse(sweep(parts, range(8, 73, 4), seed=22), provenance={"device": "synthetic"})
    l2 = doc["elements"]["l2"]
    fast, slow = l2["near_hit_fast_latency_cycles"], l2["near_hit_slow_latency_cycles"]
    text = "\n".join(l2_section(doc, []))
    assert (
        f"near hits, fast address group: **{fast['value']:g} cycles** ({fast['share']:.1%}" in text
    )
    assert (
        f"near hits, slow address group: **{slow['value']:g} cycles** ({slow['share']:.1%}" in text
    )
    assert "the median over both address groups below" in text
    topo = {"device": "synthetic", "elements": {"l2": l2}}
    row = next(r for r in to_markdown(topology_table(topo)) if r.startswith("| L2 |"))
    assert (
        f"median of two address groups {fast['value']:.0f} ({fast['share']:.0%}) / "
        f"{slow['value']:.0f} ({slow['share']:.0%}) raw"
    ) in row


def test_report_and_figure_show_the_levels_and_why_not():
    from gpudissect.plotting.l2 import plot_l2
    from gpudissect.report.sections import l2_section

    data = sweep(h100_parts, range(8, 73, 4), seed=12)
    doc = analyse(data, provenance={"device": "synthetic"})
    text = "\n".join(l2_section(doc, []))
    l2 = doc["elements"]["l2"]
    for key in ("hit_latency_cycles", "far_hit_latency_cycles", "miss_latency_cycles"):
        assert f"**{l2[key]['value']:g} cycles**" in text
    assert "[24 MiB, 28 MiB)" in text and "[48 MiB, 52 MiB)" in text
    assert "between 24 MiB and 28 MiB" in text and "48 MiB and 52 MiB" in text
    fig = plot_l2(data, doc)["l2_footprint"]
    labels = {t.get_text().split()[0] for t in fig.axes[0].texts}
    assert labels == {"near", "far", "dram"}

    one = analyse(
        sweep(lambda m: [(1.0, near)] if m <= 24 else [(1.0, dram)], range(8, 73, 4), seed=13),
        provenance={"device": "synthetic"},
    )
    text = "\n".join(l2_section(one, []))
    reason = one["elements"]["l2"]["far_hit_latency_cycles"]["undetermined"]
    assert f"L2 hit latency (far partition): undetermined: {reason}" in text


def test_the_l2_size_follows_the_dram_share_where_dram_is_barely_the_median():
    """Past an H100's L2, 57 % of a walk's accesses read DRAM latency and 43 % about 520 cycles
    (walks of up to four times the L2); one footprint past the size reads 49 %, its median
    between the levels. The size is where the DRAM share rises halfway (from the far
    plateau's 7 % to 57 %), not where the median steps (one footprint later)."""

    def at_520(rng, n):
        return rng.normal(520, 12, n)

    def at_712(rng, n):
        return rng.normal(712, 12, n)

    def parts(m):
        if m <= 24:
            return [(1.0, near)]
        if m <= 48:
            return [(0.93, at_520), (0.07, at_712)]
        if m == 50:
            return [(0.51, at_520), (0.49, at_712)]
        return [(0.43, at_520), (0.57, at_712)]

    trace = sweep(parts, [*range(8, 49, 4), 50, 52, 56, 64, 100, 200], seed=7)
    doc = analyse(trace, provenance={"device": "synthetic"})
    l2 = doc["elements"]["l2"]
    assert l2["size_bytes"]["bracket_bytes"] == [48 * MIB, 50 * MIB]
    assert "share of accesses" in l2["size_bytes"]["method"]
    # the median steps one footprint later; the level boundaries are the near bound and the size
    assert doc["steps"][-1]["footprint_before_bytes"] == 50 * MIB
    assert l2["latency_steps_bytes"]["value"] == [l2["near_size_bytes"]["value"], 48 * MIB]


def test_change_points_inside_the_far_level_are_no_level_boundaries():
    """The far partition's share of far hits grows footprint by footprint (the H100's far
    plateau rises 476 -> 534 cycles): the median may step inside it, at a footprint that moves
    run by run. The latency steps are the levels' boundaries: the near bound and the size."""

    def far_at(shift):
        return lambda rng, n: far(rng, n) + shift

    def parts(m):
        if m <= 24:
            return [(1.0, near)]
        if m <= 48:
            return [(1.0, far_at(-25 if m <= 32 else 25))]
        return [(1.0, dram)]

    doc = analyse(sweep(parts, range(8, 73, 4), seed=3), provenance={"device": "synthetic"})
    l2 = doc["elements"]["l2"]
    assert len(doc["steps"]) == 3  # near -> far, inside far, far -> DRAM
    assert l2["latency_steps_bytes"]["value"] == [
        l2["near_size_bytes"]["value"],
        l2["size_bytes"]["value"],
    ]
    assert l2["size_bytes"]["value"] == 48 * MIB
