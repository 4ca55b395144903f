"""The bandwidth family: its readings on two unseen simulated GPUs (the simulator's streaming
model is mechanistic: it serves each footprint's lines from the level whose set-index function
and size hold them, and queues the accesses at each level's server), its refusals, its error
paths, and a GPU check (`pytest -m gpu`)."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpudissect.analysis.throughput.bandwidth import analyse, figure_table
from gpudissect.backends.sim import SimBackend
from gpudissect.exceptions import ConfigError
from gpudissect.experiments import bandwidth as bw

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests/data"
GIB = 2**30
SECTION = {
    "enabled": True,
    "levels": ["l1", "l2_near", "l2", "dram"],
    "ctas_per_sm": [1, 2, 4, 8],
    "threads_per_cta": 256,
    "l1_fraction": 0.5,
    "l2_fraction": 0.75,
    "l2_near_fraction": 0.5,
    "dram_l2_multiple": 4,
    "min_bytes_per_launch": 1 << 30,
    "repetitions": 5,
    "carveout_pct": 0,
    "l1_capacity": {
        "points": 0,
        "threads_per_cta": 32,
        "start_fraction": 0.875,
        "stop_fraction": "auto",
    },
}
# the profiles' saturated rates, derived by hand in each profile's header (GB/s)
EXPECTED = {
    "unseen_bandwidth_a": {
        ("l1d", "read"): 16 * 64 * 1.5,
        ("l2", "read"): 900.0,
        ("l2", "write"): 500.0,
        ("dram", "read"): 320 * 0.875,
        ("dram", "write"): 320 * 0.875,
    },
    "unseen_bandwidth_b": {
        ("l1d", "read"): 24 * 48 * 1.2,
        ("l2", "read"): 700.0,
        ("l2", "write"): 650.0,
        ("dram", "read"): 400 * 0.8,
        ("dram", "write"): 400 * 0.8,
    },
}
L1_BYTES = {"unseen_bandwidth_a": 98304, "unseen_bandwidth_b": 131072}
TOLERANCE = 0.03  # the queueing network approaches its slowest server within 1%; noise adds


def _stage1(tmp_path, l1_bytes, **where):
    """A stage-1 result holding the L1 size (what the sweep reads of it) and, given, the
    carveout and shared buffer it was measured at."""
    path = tmp_path / "cache_stage1.json"
    doc = {"elements": {"l1d": {"size_bytes": {"value": l1_bytes}}}, **where}
    path.write_text(json.dumps(doc))
    return {"cache_stage1": str(path)}


def _run(profile, inputs=None, **overrides):
    backend = SimBackend(profile_path=DATA / f"{profile}.yaml", seed=5)
    backend.load_handlers()
    sweep = bw.parse_params({**SECTION, **overrides}, "bandwidth")
    return bw.run(backend, sweep, device=None, inputs=inputs)


@pytest.mark.parametrize("profile", sorted(EXPECTED))
def test_each_level_reads_the_unseen_profiles_bandwidth(profile, tmp_path):
    data = _run(profile, _stage1(tmp_path, L1_BYTES[profile]))
    doc = analyse(data, provenance={"device": profile})
    for (element, direction), gbps in EXPECTED[profile].items():
        q = doc["elements"][element][f"{direction}_bandwidth_gbps"]
        assert q["value"] == pytest.approx(gbps, rel=TOLERANCE), (element, direction, q)
        gib = doc["elements"][element][f"{direction}_bandwidth_gibps"]
        assert gib["value"] == pytest.approx(q["value"] * 1e9 / GIB, rel=1e-4)
        assert q["ctas_per_sm_at_peak"] in SECTION["ctas_per_sm"]
    dram = doc["elements"]["dram"]["read_bandwidth_gbps"]
    assert dram["ceiling_gbps"] > dram["value"] and 0 < dram["fraction_of_ceiling"] < 1
    assert "none known" in doc["elements"]["l2"]["read_bandwidth_gbps"]["ceiling"]
    assert "partition" in doc["elements"]["l2"]["near_read_bandwidth_gibps"]["undetermined"]


def test_few_warps_are_latency_bound_and_the_peak_needs_more_ctas(tmp_path):
    # one 32-thread CTA per SM keeps 4 accesses of 512 B in flight; an L2 read waits
    # 220 cycles / 1.5 GHz = 147 ns: about 4 x 512 / 156 ns x 16 SMs = 210 GB/s, far below
    # the L2's 900 GB/s, which 16 CTAs per SM (64 accesses in flight) reach
    data = _run("unseen_bandwidth_a", levels=["l2"], ctas_per_sm=[1, 16], threads_per_cta=32)
    table = figure_table(data, {})
    reads = table[table["direction"] == "read"].set_index("ctas_per_sm")["gbps"]
    assert reads[1] == pytest.approx(210, rel=0.1)
    assert reads[16] == pytest.approx(900, rel=TOLERANCE)
    doc = analyse(data, provenance={"device": "a"})
    assert doc["elements"]["l2"]["read_bandwidth_gbps"]["ctas_per_sm_at_peak"] == 16


def test_an_l1_footprint_that_overflows_the_l1_is_undetermined(tmp_path):
    # a stage-1 L1 size four times too large: half of it (196 KiB per SM) does not fit in the
    # 96 KiB L1, so the "L1" reads are the L2's and the level is not isolated
    data = _run("unseen_bandwidth_a", _stage1(tmp_path, 4 * 98304))
    doc = analyse(data, provenance={"device": "a"})
    q = doc["elements"]["l1d"]["read_bandwidth_gibps"]
    assert q["value"] is None and "not isolated in the l1" in q["undetermined"]
    assert doc["elements"]["l2"]["read_bandwidth_gbps"]["value"] == pytest.approx(900, rel=0.03)


def test_without_a_measured_l1_the_l1_is_not_run_and_says_why():
    data = _run("unseen_bandwidth_a")
    assert "l1" not in set(data["level"])
    doc = analyse(data, provenance={"device": "a"})
    assert "cache_stage1" in doc["elements"]["l1d"]["read_bandwidth_gibps"]["undetermined"]
    assert (data["l2_bytes_source"] == "driver").all()


def _rows(level, direction, gbps_by_ctas, *, theoretical=100.0):
    rows = []
    for i, (ctas_per_sm, gbps) in enumerate(gbps_by_ctas.items()):
        for rep, g in enumerate(gbps):
            rows.append((i, level, direction, ctas_per_sm, rep, g))
    df = pd.DataFrame(
        rows, columns=["point", "level", "direction", "ctas_per_sm", "repetition", "gbps"]
    )
    df["bytes_moved"] = 1 << 30
    df["elapsed_ns"] = df["bytes_moved"] / df.pop("gbps")
    return df.assign(
        path="cg",
        ctas=df["ctas_per_sm"] * 4,
        threads_per_cta=256,
        slice_bytes=1 << 20,
        footprint_bytes=(1 << 20) * df["ctas_per_sm"] * 4,
        footprint_bytes_per_sm=1 << 20,
        iterations=1,
        sm_clock_mhz=1000.0,
        memory_clock_mhz=1000.0,
        carveout_pct=-1,
        theoretical_gbps=theoretical,
        l1_bytes=0,
        l2_bytes=1 << 22,
        l2_bytes_source="driver",
        l2_near_bytes=0,
        sms=4,
    )


def test_hand_built_peak_spread_and_l2_no_faster_than_dram():
    # DRAM: medians 60 (1 CTA) and 80 (2 CTAs), repetitions 78/80/82 -> peak 80 at 2 CTAs,
    # IQR 79-81; the L2's reads (79-81) do not exceed that beyond 5%: not isolated
    dram = _rows("dram", "read", {1: [59, 60, 61], 2: [78, 80, 82]})
    l2 = _rows("l2", "read", {1: [79, 80, 81]}).assign(point=lambda d: d["point"] + 2)
    doc = analyse(pd.concat([dram, l2], ignore_index=True), provenance={"device": "x"})
    q = doc["elements"]["dram"]["read_bandwidth_gbps"]
    assert q["value"] == pytest.approx(80.0) and q["ctas_per_sm_at_peak"] == 2
    assert q["spread_gbps"] == pytest.approx([79.0, 81.0])
    assert q["fraction_of_ceiling"] == pytest.approx(0.8)
    assert "not isolated in the l2" in doc["elements"]["l2"]["read_bandwidth_gibps"]["undetermined"]


def test_dram_above_its_theoretical_bandwidth_is_refused():
    doc = analyse(_rows("dram", "read", {1: [150, 151, 152]}), provenance={"device": "x"})
    q = doc["elements"]["dram"]["read_bandwidth_gibps"]
    assert q["value"] is None and "exceeds the theoretical" in q["undetermined"]


def test_an_empty_trace_is_undetermined_with_a_reason():
    empty = pd.DataFrame({f.name: pd.Series(dtype=object) for f in bw.SCHEMA})
    doc = analyse(empty, provenance={"device": "x"})
    assert "no launch" in doc["elements"]["dram"]["read_bandwidth_gibps"]["undetermined"]


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("levels", ["l1", "l3"], "allowed: l1, l2_near, l2, dram"),
        ("l1_fraction", 1.2, "inside (0, 1)"),
        ("l2_fraction", 0, "inside (0, 1)"),
        ("dram_l2_multiple", 1.5, "at least 2 L2 sizes"),
    ],
)
def test_bad_parameters_name_the_key_the_value_and_what_is_allowed(key, value, allowed):
    with pytest.raises(ConfigError) as err:
        bw.parse_params({**SECTION, key: value}, "bandwidth")
    assert f"bandwidth.{key}" in str(err.value) and allowed in str(err.value)
    assert str(value if not isinstance(value, list) else "l3") in str(err.value)


def test_a_cta_larger_than_the_device_allows_is_refused():
    sweep = bw.parse_params({**SECTION, "threads_per_cta": 1024}, "bandwidth")
    with pytest.raises(ConfigError, match="threads_per_cta: 1024 exceeds"):
        bw.plan(
            sweep, sms=4, max_threads_per_sm=768, l1_bytes=None, l2_bytes=1 << 20, carveout_pct=None
        )


def test_footprints_follow_the_sizes_and_launches_move_enough_bytes():
    sweep = bw.parse_params(SECTION, "bandwidth")
    plans = bw.plan(
        sweep, sms=10, max_threads_per_sm=2048, l1_bytes=200_000, l2_bytes=50 << 20, carveout_pct=0
    )
    by = {(p.level, p.direction, p.ctas_per_sm): p.work for p in plans}
    assert by[("l1", "read", 4)].slice_bytes <= 100_000  # half the L1 per SM, one slice
    assert by[("l1", "read", 4)].footprint_bytes == 10 * by[("l1", "read", 4)].slice_bytes
    assert by[("l2", "write", 8)].footprint_bytes <= 0.75 * (50 << 20)
    assert not any(p.level == "l2_near" for p in plans)  # no near size given
    assert by[("dram", "read", 1)].footprint_bytes >= 4 * (50 << 20) - 10 * 512
    assert all(p.work.bytes_moved >= SECTION["min_bytes_per_launch"] for p in plans)
    assert ("l1", "write", 1) not in by  # stores write through the L1


@pytest.mark.gpu
def test_gpu_bandwidths_are_plausible(cuda_backend_with):
    """On the GPU: DRAM reads below the theoretical bandwidth, L2 reads above DRAM reads,
    the whole sweep within a minute (no L1 size given: the L1 footprint is not run)."""
    import time

    backend = cuda_backend_with("bandwidth")
    backend.load_handlers()
    sweep = bw.parse_params({**SECTION, "enabled": True}, "bandwidth")
    start = time.monotonic()
    data = bw.run(backend, sweep, device=None)
    assert time.monotonic() - start < 60
    doc = analyse(data, provenance={"device": "gpu0"})
    l2 = doc["elements"]["l2"]["read_bandwidth_gbps"]["value"]
    dram_q = doc["elements"]["dram"]["read_bandwidth_gbps"]
    assert dram_q["value"] is not None, dram_q
    assert dram_q["value"] < dram_q["ceiling_gbps"]
    assert l2 is not None and l2 > dram_q["value"]
    assert np.isfinite(data["sm_clock_mhz"]).all()


def test_the_report_puts_mt4gs_published_h100_figures_beside_ours(tmp_path):
    from gpudissect.report.sections_bandwidth import bandwidth_section
    from gpudissect.report.summary import headline_rows

    data = _run("unseen_bandwidth_a", _stage1(tmp_path, 98304))
    doc = analyse(data, provenance={"device": "a"})
    doc["device_info"] = {"name": "NVIDIA H100 80GB HBM3"}
    text = "\n".join(bandwidth_section(doc, []))
    l2_row = next(line for line in text.splitlines() if line.startswith("| L2 read |"))
    # ours: 900 GB/s = 838 GiB/s; MT4G's sample: 4528.92 GiB/s (config/papers)
    assert "838 GiB/s" in l2_row and "4529 GiB/s" in l2_row
    assert "MT4G (caps-tum/mt4g)" in text
    doc["device_info"] = {"name": "NVIDIA H200"}
    assert "MT4G published no figures for this GPU" in "\n".join(bandwidth_section(doc, []))
    labels = {h.label for h, q in headline_rows({"bandwidth": doc}) if q.value is not None}
    assert {"L1 read bandwidth", "L2 write bandwidth", "DRAM read bandwidth"} <= labels


CAPACITY = {"points": 33, "threads_per_cta": 32, "start_fraction": 0.875, "stop_fraction": "auto"}


@pytest.mark.parametrize("profile", sorted(EXPECTED))
def test_the_l1_capacity_series_finds_the_l1_size(profile, tmp_path):
    # a modulo-indexed LRU L1 holds a contiguous footprint up to its size exactly; one step
    # (1/64 of the size) past it, every overflowing set misses all its lines
    data = _run(profile, _stage1(tmp_path, L1_BYTES[profile]), l1_capacity=CAPACITY)
    q = analyse(data, provenance={"device": profile})["elements"]["l1d"]["size_bytes"]
    low, high = q["bracket_bytes"]
    assert low <= L1_BYTES[profile] < high and high - low == q["resolution_bytes"]


def test_a_rate_that_falls_inside_the_p_chase_l1_gives_no_size():
    from gpudissect.analysis.throughput.bandwidth import l1_capacity

    # footprints of 180-260 KiB; the rate (4300 GB/s) falls from 200 KiB, inside the 217 KiB the
    # P-chase held (as streams through a hashed 4-way L1 do on an H200): the series cannot give
    # the L1's size, whose lower bound stays the P-chase's
    kib = np.arange(180, 262, 4)
    gbps = np.where(kib < 200, 4300.0, 2500.0)
    points = pd.DataFrame(
        {
            "level": bw.CAPACITY,
            "footprint_bytes_per_sm": kib * 1024,
            "gbps": gbps,
            "gbps_q25": gbps - 5,
            "gbps_q75": gbps + 5,
        }
    )
    q = l1_capacity(points, l1_bytes=217 * 1024, carveout_pct=0)
    assert q["value"] is None and q["lower_bound"] == 217 * 1024
    assert "falls from 204800 B" in q["undetermined"]
    # the same rate held to 236 KiB: 236 KiB, bracketed by the next footprint
    held = points.assign(gbps=np.where(kib < 240, 4300.0, 2500.0))
    held = held.assign(gbps_q25=held["gbps"] - 5, gbps_q75=held["gbps"] + 5)
    q = l1_capacity(held, l1_bytes=217 * 1024, carveout_pct=0)
    assert (q["value"], q["bracket_bytes"]) == (236 * 1024, [236 * 1024, 240 * 1024])


def test_without_shared_memory_the_l1_is_the_whole_array_and_heads_the_topology(tmp_path):
    from gpudissect.families import FAMILIES
    from gpudissect.topology import build_topology

    # the P-chase beside a 16 KiB buffer reads 224 KiB (profile header); the bandwidth kernels
    # use no shared memory, so their L1 is the whole 256 KiB array
    stage1 = _stage1(tmp_path, 229376, carveout_pct=[0], shared_buffer_bytes=16384)
    data = _run("unseen_bandwidth_carveout", stage1, l1_capacity=CAPACITY)
    # auto stop: 229376 + 2 x (16384 + the 1024 reserved) + 8192 = 272384 B, past the 256 KiB
    series = data[data["level"] == bw.CAPACITY]
    assert series["footprint_bytes_per_sm"].max() == 272384
    doc = analyse(data, provenance={"device": "c"})
    q = doc["elements"]["l1d"]["size_bytes"]
    low, high = q["bracket_bytes"]
    assert low <= 262144 < high and q["value"] == low
    assert doc["carveout_pct"] == 0 and doc["shared_buffer_bytes"] == 0
    bw_path = tmp_path / "bandwidth.json"
    bw_path.write_text(json.dumps(doc))
    stage1_doc = {
        "analysis": "cache_stage1",
        "carveout_pct": [0],
        "shared_buffer_bytes": 16384,
        "elements": {"l1d": {"size_bytes": {**q, "value": 229376, "method": "first miss"}}},
    }
    s1_path = tmp_path / "cache_stage1_doc.json"
    s1_path.write_text(json.dumps(stage1_doc))
    topo = build_topology("c", [str(s1_path), str(bw_path)], tuple(FAMILIES))
    entry = topo["elements"]["l1d"]["size_bytes"]
    assert (entry["value"], entry["experiment"], entry["shared_buffer_bytes"]) == (
        low,
        "bandwidth",
        0,
    )
    other = entry["other_readings"][0]
    assert other["value"] == 229376 and other["agrees"] is None  # another partition


def test_each_figure_draws_what_its_caption_says(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gpudissect.families import family
    from gpudissect.plotting.describe import caption_mismatches, caption_text, describe
    from gpudissect.report.captions import prose

    stage1 = _stage1(tmp_path, 229376, carveout_pct=[0], shared_buffer_bytes=16384)
    data = _run("unseen_bandwidth_carveout", stage1, l1_capacity=CAPACITY)
    doc = analyse(data, provenance={"device": "c"})
    figures = family("bandwidth").plot(data, doc, table=figure_table(data, doc))
    assert set(figures) == set(family("bandwidth").figures)
    for stem, fig in figures.items():
        text = caption_text(fig, stem, prose(stem))
        assert describe(fig) and prose(stem), stem
        assert not caption_mismatches(fig, text), (stem, text)
        plt.close(fig)
    capacity = describe(figures["bandwidth_l1_capacity"])
    assert "L1 size estimate" in str(capacity) and "cache_stage1 L1 size" in str(capacity)


def test_the_partition_bound_follows_stage_1s_buffer_or_the_drivers_shared_memory():
    at0 = {"l1d": 222208, "shared_buffer_bytes": 16384}
    # H100: a 16 KiB buffer + 1 KiB reserved gets the 32 KiB step; the bound is 42 KiB
    assert bw.partition_bound_bytes(at0, reserved_bytes=1024, shared_per_sm=233472) == 43008
    assert bw.partition_bound_bytes({"l1d": 1}, reserved_bytes=1024, shared_per_sm=233472) == (
        233472
    )


def test_a_capacity_series_that_never_falls_gives_a_lower_bound(tmp_path):
    # stage 1's L1 read half the true size and the series stops at 1.25 of it: every footprint
    # fits, so the L1 is at least the largest
    series = {**CAPACITY, "stop_fraction": 1.25}
    data = _run("unseen_bandwidth_a", _stage1(tmp_path, 49152), l1_capacity=series)
    q = analyse(data, provenance={"device": "a"})["elements"]["l1d"]["size_bytes"]
    largest = data[data["level"] == bw.CAPACITY]["footprint_bytes_per_sm"].max()
    assert q["value"] is None and q["lower_bound"] == largest
    assert "at least" in q["undetermined"]


@pytest.mark.gpu
def test_gpu_l1_without_shared_memory_is_at_least_stage_1s(cuda_backend_with):
    """On an H100 or H200: with the committed reference stage-1 result of the same GPU model
    as the sweep input, the L1 level reads faster than the L2's footprint, and the capacity
    series' L1 (no shared memory) is at least stage 1's (measured beside a 16 KiB buffer) and
    within the partition bound above it; or, where the streaming rate falls before stage 1's
    size (the H200, GPU-4fcadca0 and GPU-521d3ca4), undetermined with stage 1's as its lower
    bound."""
    backend = cuda_backend_with("bandwidth")
    backend.load_handlers()
    name = backend.device_info()["name"]
    refs = {
        json.loads(p.read_text())["device_info"]["name"]: p
        for p in sorted((REPO / "results/reference").glob("*/analysis/gpu0/cache_stage1.json"))
    }
    if name not in refs:
        pytest.skip(f"no reference stage-1 result for {name}")
    stage1 = json.loads(refs[name].read_text())
    l1 = stage1["elements"]["l1d"]["size_bytes"]["value"]
    section = {**SECTION, "levels": ["l1", "l2"], "l1_capacity": {**CAPACITY}}
    data = bw.run(
        backend,
        bw.parse_params(section, "bandwidth"),
        device=None,
        inputs={"cache_stage1": str(refs[name])},
    )
    doc = analyse(data, provenance={"device": "gpu0"})
    l1_read = doc["elements"]["l1d"]["read_bandwidth_gbps"]["value"]
    assert l1_read is not None and l1_read > doc["elements"]["l2"]["read_bandwidth_gbps"]["value"]
    size = doc["elements"]["l1d"]["size_bytes"]
    from gpudissect.experiments.shared_throughput import ThroughputFactsQuery

    facts = backend.run(ThroughputFactsQuery())
    bound = bw.partition_bound_bytes(
        bw.measured_sizes({"cache_stage1": str(refs[name])}),
        reserved_bytes=facts.shared_reserved_bytes_per_cta,
        shared_per_sm=facts.shared_bytes_per_sm,
    )
    if size["value"] is None:
        # the H200 units read so far: the streaming rate falls below stage 1's footprint, which
        # the analysis says, keeping stage 1's size as the bound below
        assert "falls" in size["undetermined"] and size["lower_bound"] == l1, size
    else:
        assert l1 <= size["value"] <= l1 + bound


def test_a_device_without_a_throughput_description_runs_nothing_and_says_so(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from gpudissect.families import family

    data = _run("tiny_profile", _stage1(tmp_path, 4096))
    assert data.empty and list(data.columns) == bw.SCHEMA.names
    doc = analyse(data, provenance={"device": "tiny"})
    assert "no launch" in doc["elements"]["l2"]["read_bandwidth_gibps"]["undetermined"]
    figures = family("bandwidth").plot(data, doc, table=figure_table(data, doc))
    assert set(figures) == set(family("bandwidth").figures)
    text = "\n".join(family("bandwidth").report_section(doc, []))
    assert "undetermined: the sweep ran no launch" in text


def test_the_l2_sizes_come_from_the_footprint_sweep_then_the_driver_never_stage_1_alone():
    # on a partitioned L2 stage 1's first L2 miss is the near partition (H200: 28180480 of
    # the driver's 62914560): it names the near size, never the L2's
    stage1_only = {"l1d": 222208, "l2_stage1": 28180480}
    assert bw.l2_sizes(stage1_only, 62914560) == (62914560, "driver", 28180480)
    swept = {**stage1_only, "l2": 58982400, "l2_near": 28508160}
    assert bw.l2_sizes(swept, 62914560) == (58982400, "l2", 28508160)
    # an unpartitioned L2: stage 1 reads the whole of it, so there is no near size
    assert bw.l2_sizes({"l2_stage1": 4194304}, 4194304) == (4194304, "driver", None)


def test_with_a_near_size_the_near_l2_is_read_and_reported_apart(tmp_path):
    # the l2 footprint sweep's result: the L2 and a near partition of half of it
    l2 = tmp_path / "l2.json"
    l2.write_text(
        json.dumps(
            {
                "elements": {
                    "l2": {
                        "size_bytes": {"value": 4194304},
                        "near_size_bytes": {"value": 2097152},
                    }
                }
            }
        )
    )
    inputs = {**_stage1(tmp_path, 98304), "l2": str(l2)}
    data = _run("unseen_bandwidth_a", inputs)
    near = data[data["level"] == "l2_near"]
    assert (near["footprint_bytes"] <= 0.5 * 2097152).all() and len(near)
    doc = analyse(data, provenance={"device": "a"})
    l2 = doc["elements"]["l2"]
    # the simulator has one L2 server: near and both-partition reads alike (900 GB/s)
    assert l2["near_read_bandwidth_gbps"]["value"] == pytest.approx(900, rel=TOLERANCE)
    assert l2["near_write_bandwidth_gbps"]["value"] == pytest.approx(500, rel=TOLERANCE)
    assert l2["read_bandwidth_gbps"]["value"] == pytest.approx(900, rel=TOLERANCE)
    assert doc["footprints"]["l2_bytes_source"] == "l2"
