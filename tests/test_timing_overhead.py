"""Timing-overhead family: the analysis on a hand-made trace, the family on simulated profiles
whose timing code it must recover from the traces alone (the tiny profile, an unseen one, one
with no timing block), the calibrated latencies of the topology document and the report's
table, and a GPU check (`pytest -m gpu`)."""

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from gpudissect.analysis.timing.timing_overhead import analyse
from gpudissect.backends.sim import SimBackend
from gpudissect.exceptions import ProfileError
from gpudissect.experiments import timing_overhead as t
from gpudissect.families import FAMILIES
from gpudissect.report.topology_table import to_markdown, topology_table
from gpudissect.topology import build_topology, validate_topology

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests/data"
PROV = {"device": "synthetic"}
PARAMS = t.TimingParams(
    enabled=True,
    paths=("ca", "cg"),
    array_bytes=1024,
    stride_bytes=128,
    record_steps=1024,
    loads=1024,
    repetitions=16,
    carveout_pct=0,
)


def _rows(kind, cycles, *, path="ca", loads=0, element_bytes=4, index=None):
    n = len(cycles)
    return pd.DataFrame(
        {
            "point": 0,
            "kind": kind,
            "path": path,
            "element_bytes": element_bytes,
            "loads": loads,
            "sample": np.arange(n),
            "index": np.zeros(n, int) if index is None else index,
            "cycles": np.asarray(cycles, dtype=np.uint32),
            "sm_clock_mhz": 1000.0,
        }
    )


def _hand_trace() -> pd.DataFrame:
    # raw: 8 lines, every access 50 cycles. Chains of 100 and 200 loads whose ends add 15
    # cycles: index chase 100 x 37 + 15 = 3715 and 200 x 37 + 15 = 7415, so (7415 - 3715) / 100
    # = 37 per load; pointer chase 3315 and 6615: 33. Window overhead 50 - 33 = 17, index
    # arithmetic 37 - 33 = 4, store and clock read 50 - 37 = 13. Empty windows 12, 12, 13
    # (median 12), clock pairs 4.
    lines = np.tile(np.arange(8) * 32, 16)
    return pd.concat(
        [
            _rows("clock_pair", [4] * 9, path=""),
            _rows("empty_window", [12, 12, 13], path=""),
            _rows("window", [50] * len(lines), loads=1, index=lines),
            _rows("amortized_index", [3715] * 5, loads=100),
            _rows("amortized_index", [7415] * 5, loads=200),
            _rows("amortized_pointer", [3315] * 5, loads=100, element_bytes=8),
            _rows("amortized_pointer", [6615] * 5, loads=200, element_bytes=8),
        ],
        ignore_index=True,
    )


def test_hand_made_trace_gives_the_hand_derived_parts():
    doc = analyse(_hand_trace(), provenance=PROV)
    ca, timing = doc["paths"]["ca"], doc["timing"]
    assert ca["raw_latency_cycles"]["value"] == 50 and ca["raw_latency_cycles"]["timing"] == "raw"
    assert ca["index_chase_latency_cycles"]["value"] == 37
    assert ca["load_to_use_latency_cycles"]["value"] == 33
    assert timing["calibration_path"] == "ca"
    assert timing["window_overhead_cycles"]["value"] == 17
    assert timing["index_arithmetic_cycles"]["value"] == 4
    assert timing["store_clock_cycles"]["value"] == 13
    assert timing["empty_window_cycles"]["value"] == 12
    assert timing["clock_read_cycles"]["value"] == 4
    # noiseless inputs: nothing to doubt
    assert timing["window_overhead_cycles"]["confidence"] == 1.0


def test_an_overhead_within_the_noise_or_negative_is_undetermined():
    data = _hand_trace()
    # raw accesses now 47, 50, 53, 50 in turn on every line (the 128 accesses go round the 8
    # lines, so each line reads them 4 times each): line medians 50, residuals -3 (32), 0 (64),
    # +3 (32), whose quartiles lie a quarter of the way into the neighbouring groups: -0.75 and
    # +0.75, IQR 1.5. A pointer chase of 49 per load (4915 = 49 x 100 + 15): 50 - 49 = 1 <= 1.5
    raw = data["kind"] == "window"
    data.loc[raw, "cycles"] = np.resize(np.repeat([47, 50, 53, 50], 8), raw.sum())
    ptr = data["kind"] == "amortized_pointer"
    data.loc[ptr, "cycles"] = np.where(data.loc[ptr, "loads"] == 100, 4915, 9815)
    q = analyse(data, provenance=PROV)["timing"]["window_overhead_cycles"]
    assert q["value"] is None and "within the noise" in q["undetermined"]
    # a pointer chase slower than the raw window: no overhead to subtract
    data.loc[ptr, "cycles"] = np.where(data.loc[ptr, "loads"] == 100, 5515, 11015)  # 55 a load
    q = analyse(data, provenance=PROV)["timing"]["window_overhead_cycles"]
    assert q["value"] is None and "not positive" in q["undetermined"]


def _simulated(profile: str, seed: int = 5) -> dict:
    backend = SimBackend(profile_path=DATA / profile, seed=seed)
    return analyse(t.run(backend, PARAMS, device=None), provenance=PROV)


def test_unseen_profile_timing_is_recovered_from_the_traces():
    # tests/data/unseen_timing.yaml: L1 hit 61 and L2 hit 233 as the window reads them; the
    # window's store and clock read 23, index arithmetic 7, empty window 12, clock pair 5. So
    # the window overhead is 23 + 7 = 30 on both levels, the pointer chase reads 61 - 30 = 31
    # (L2: 233 - 30 = 203) and the index chase 61 - 23 = 38. Timing outliers (0.1% of loads,
    # 350 cycles) make a chain's median up to a few tenths of a cycle per load slower.
    doc = _simulated("unseen_timing.yaml")
    ca, cg, timing = doc["paths"]["ca"], doc["paths"]["cg"], doc["timing"]
    assert ca["raw_latency_cycles"]["value"] == pytest.approx(61, abs=0.5)
    assert cg["raw_latency_cycles"]["value"] == pytest.approx(233, abs=0.5)
    assert ca["load_to_use_latency_cycles"]["value"] == pytest.approx(31, abs=1)
    assert cg["load_to_use_latency_cycles"]["value"] == pytest.approx(203, abs=1)
    assert ca["index_chase_latency_cycles"]["value"] == pytest.approx(38, abs=1)
    for path in (ca, cg):
        assert path["window_overhead_cycles"]["value"] == pytest.approx(30, abs=1)
        assert path["index_arithmetic_cycles"]["value"] == pytest.approx(7, abs=1)
        assert path["store_clock_cycles"]["value"] == pytest.approx(23, abs=1)
    assert timing["window_overhead_cycles"]["value"] == pytest.approx(30, abs=1)
    assert timing["empty_window_cycles"]["value"] == 12
    assert timing["clock_read_cycles"]["value"] == 5
    assert 0.5 < timing["window_overhead_cycles"]["confidence"] <= 1


def test_the_texture_and_read_only_paths_are_timed_as_whole_chains_too():
    # tests/data/unseen_timing_paths.yaml: store and clock read 19, index arithmetic 9. ca and
    # nc (hits 64 and 57 as the window reads them) pay both: overhead 28, pointer chase 64 - 28
    # = 36 and 57 - 28 = 29. A texture fetch takes its index as the coordinate: the tex window
    # (97) and its chain have no arithmetic, so the chain reads 97 - 19 = 78 a fetch and the
    # tex overhead is 19; there is no pointer chase on tex
    backend = SimBackend(profile_path=DATA / "unseen_timing_paths.yaml", seed=8)
    params = dataclasses.replace(PARAMS, paths=("ca", "cg", "nc", "tex"))
    data = t.run(backend, params, device=None)
    assert set(data.loc[data["path"] == "tex", "element_bytes"]) == {4}
    doc = analyse(data, provenance=PROV)
    ca, nc, tex = (doc["paths"][p] for p in ("ca", "nc", "tex"))
    assert ca["load_to_use_latency_cycles"]["value"] == pytest.approx(36, abs=1)
    assert nc["load_to_use_latency_cycles"]["value"] == pytest.approx(29, abs=1)
    for path in (ca, nc):
        assert path["window_overhead_cycles"]["value"] == pytest.approx(28, abs=1)
        assert path["index_arithmetic_cycles"]["value"] == pytest.approx(9, abs=1)
    assert tex["raw_latency_cycles"]["value"] == pytest.approx(97, abs=0.5)
    assert tex["load_to_use_latency_cycles"]["value"] == pytest.approx(78, abs=1)
    assert "tex1Dfetch" in tex["load_to_use_latency_cycles"]["method"]
    assert tex["window_overhead_cycles"]["value"] == pytest.approx(19, abs=1)
    assert "not_applicable" in tex["index_arithmetic_cycles"]
    # the calibration stays ca's
    assert doc["timing"]["calibration_path"] == "ca"
    assert doc["timing"]["window_overhead_cycles"]["value"] == pytest.approx(28, abs=1)


def test_a_paths_own_window_overhead_is_what_its_chain_saves(tmp_path):
    # the same profile with a window that costs 7 cycles after a texture fetch, not 19: the tex
    # chain reads 97 - 7 = 90 a fetch, the other paths keep their 28
    profile = yaml.safe_load((DATA / "unseen_timing_paths.yaml").read_text())
    profile["timing"]["window_overhead_by_path_cycles"] = {"tex": 7}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(profile))
    params = dataclasses.replace(PARAMS, paths=("ca", "tex"))
    doc = analyse(
        t.run(SimBackend(profile_path=path, seed=8), params, device=None), provenance=PROV
    )
    ca, tex = doc["paths"]["ca"], doc["paths"]["tex"]
    assert tex["load_to_use_latency_cycles"]["value"] == pytest.approx(90, abs=1)
    assert tex["store_clock_cycles"]["value"] == pytest.approx(7, abs=1)
    assert ca["window_overhead_cycles"]["value"] == pytest.approx(28, abs=1)
    assert ca["store_clock_cycles"]["value"] == pytest.approx(19, abs=1)
    profile["timing"]["window_overhead_by_path_cycles"] = {"tex": -1}
    path.write_text(yaml.safe_dump(profile))
    with pytest.raises(ProfileError, match="window_overhead_by_path_cycles"):
        _ = SimBackend(profile_path=path, seed=8).profile


def test_topology_puts_each_paths_chain_beside_the_calibrated_hit_and_says_if_they_agree(
    tmp_path,
):
    import json

    backend = SimBackend(profile_path=DATA / "unseen_timing_paths.yaml", seed=9)
    params = dataclasses.replace(PARAMS, paths=("ca", "cg", "nc", "tex"))
    timing_doc = {**analyse(t.run(backend, params, device=None), provenance=PROV)}
    timing_doc["device_info"] = {}

    def hit(value):
        return {
            "hit_latency_cycles": {
                "value": value,
                "unit": "cycles",
                "confidence": 1.0,
                "method": "median latency of the accesses of the arrays that fit",
                "evidence": "hand-made",
            }
        }

    # the P-chase's hits as stage 1 would read them: the L1 64 and the texture cache 97 (as
    # the profile's windows read them), the read-only path 70 (13 cycles off the profile's 57)
    stage1 = {
        "device": "synthetic",
        "analysis": "cache_stage1",
        "device_info": {},
        "elements": {"l1d": hit(64.0), "texture": hit(97.0), "readonly": hit(70.0)},
    }
    paths = []
    for name, doc in (("cache_stage1", stage1), ("timing_overhead", timing_doc)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(doc))
    topo = build_topology("synthetic", paths, tuple(FAMILIES))
    validate_topology(topo)
    el = topo["elements"]
    tex = el["texture"]["hit_latency_chain_cycles"]
    # the chain on tex: 97 - 19 = 78 a fetch; the P-chase's 97 calibrated with tex's own
    # overhead (19): 78; they agree
    assert tex["value"] == pytest.approx(78, abs=1) and tex["source"].startswith("/paths/tex/")
    assert el["texture"]["hit_latency_cycles"]["calibration"]["path"] == "tex"
    assert tex["pchase_calibrated_cycles"] == pytest.approx(78, abs=1) and tex["agrees"] is True
    assert el["l1d"]["hit_latency_chain_cycles"]["agrees"] is True  # 64 - 28 = 36 both ways
    # read-only: chain 57 - 28 = 29 against 70 - 28 = 42: they differ
    ro = el["readonly"]["hit_latency_chain_cycles"]
    assert ro["value"] == pytest.approx(29, abs=1) and ro["agrees"] is False
    assert "outside" in ro["note"]
    table = "\n".join(to_markdown(topology_table(topo)))
    assert f"chain-timed {tex['value']:.1f} (agrees)" in table
    assert f"chain-timed {ro['value']:.1f} (differs)" in table
    assert "chain-timed: the latency per load of a chain timed as a whole" in table


def test_tiny_profile_overhead():
    # tests/data/tiny_profile.yaml: store and clock read 14, index arithmetic 6: overhead 20,
    # an L1 hit of 40 raw is 20 calibrated; the empty window defaults to 14
    timing = _simulated("tiny_profile.yaml")["timing"]
    assert timing["window_overhead_cycles"]["value"] == pytest.approx(20, abs=1)
    assert timing["index_arithmetic_cycles"]["value"] == pytest.approx(6, abs=1)
    assert timing["empty_window_cycles"]["value"] == 14


def test_a_profile_without_timing_code_shows_no_overhead():
    # tests/data/h100_like.yaml has no timing block: the chains read the window's latencies,
    # so raw - pointer chase is noise around 0 and the clock kinds read 0
    timing = _simulated("h100_like.yaml")["timing"]
    assert timing["window_overhead_cycles"]["value"] is None
    assert timing["index_arithmetic_cycles"]["value"] is None
    assert timing["clock_read_cycles"]["value"] is None


def test_topology_gives_raw_and_calibrated_latencies(tmp_path):
    import json

    timing_doc = {**analyse(_hand_trace(), provenance=PROV), "device_info": {}}
    stage1 = {
        "device": "synthetic",
        "analysis": "cache_stage1",
        "device_info": {},
        "elements": {
            "l1d": {
                "hit_latency_cycles": {
                    "value": 50.0,
                    "unit": "cycles",
                    "confidence": 1.0,
                    "method": "median latency of the accesses of the arrays that fit",
                    "evidence": "hand-made",
                },
                "miss_penalty_cycles": {
                    "value": 250.0,
                    "unit": "cycles",
                    "confidence": 1.0,
                    "method": "miss latency minus hit latency",
                    "evidence": "hand-made",
                },
            }
        },
    }
    paths = []
    for name, doc in (("cache_stage1", stage1), ("timing_overhead", timing_doc)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(doc))
    topo = build_topology("synthetic", paths, tuple(FAMILIES))
    validate_topology(topo)
    hit = topo["elements"]["l1d"]["hit_latency_cycles"]
    # 50 raw - the hand trace's overhead of 17 = 33 calibrated
    assert hit["timing"] == "raw" and hit["value"] == 50 and hit["calibrated_value"] == 33
    # the overhead of the L1's own load path
    assert hit["calibration"]["source"] == "/paths/ca/window_overhead_cycles"
    assert hit["calibration"]["path"] == "ca"
    assert hit["calibration"]["analysis"] == str(paths[1])
    assert topo["elements"]["l1d"]["miss_penalty_cycles"]["timing"] == "difference"
    assert "calibrated_value" not in topo["elements"]["l1d"]["miss_penalty_cycles"]
    assert topo["timing"]["window_overhead_cycles"]["value"] == 17
    table = "\n".join(to_markdown(topology_table(topo)))
    assert "50.0 raw / 33.0 calibrated" in table
    # without the timing_overhead analysis the raw latency says it is uncalibrated, and why
    alone = build_topology("synthetic", paths[:1], tuple(FAMILIES))
    validate_topology(alone)
    entry = alone["elements"]["l1d"]["hit_latency_cycles"]
    assert (
        entry["calibrated_value"] is None
        and "no timing_overhead" in (entry["calibration"]["undetermined"])
    )


def test_a_latency_is_calibrated_with_its_own_load_paths_overhead_or_not_at_all():
    from gpudissect.topology.calibrate import calibrate

    def raw(value):
        return {"value": value, "unit": "cycles", "experiment": "cache_stage1"}

    def overhead(value, path):
        return {
            "value": value, "analysis": "t.json", "source": f"/paths/{path}/window_overhead_cycles"
        }  # fmt: skip

    timing = {
        "calibration_path": "ca",
        "window_overhead_cycles": overhead(18.0, "ca"),
        "window_overhead_by_path": {"ca": overhead(18.0, "ca"), "tex": overhead(30.0, "tex")},
    }
    elements = {
        e: {"hit_latency_cycles": raw(v)}
        for e, v in (("l1d", 50.0), ("texture", 93.0), ("constant_l1", 41.0), ("l2", 293.0))
    }
    calibrate(elements, timing)
    got = {e: q["hit_latency_cycles"] for e, q in elements.items()}
    assert got["l1d"]["calibrated_value"] == 32.0 and got["l1d"]["calibration"]["path"] == "ca"
    assert got["texture"]["calibrated_value"] == 63.0  # its own path's 30 cycles, not ca's 18
    # the L2 is read by global loads: cg's overhead, or ca's standing in for it
    assert got["l2"]["calibrated_value"] == 275.0 and got["l2"]["calibration"]["path"] == "ca"
    # no overhead on the constant path: uncalibrated, naming the paths it was measured on
    const = got["constant_l1"]
    assert const["calibrated_value"] is None
    assert const["calibration"]["undetermined"] == (
        "the window overhead was measured on ca, tex, not on the const path that reads "
        "constant_l1's latencies"
    )


@pytest.mark.gpu
def test_gpu_calibrated_l1_hit_is_positive_and_below_the_raw_one(tmp_path, nvcc):
    from gpudissect.backends.cuda import CudaBackend
    from gpudissect.devices import detect_arch
    from gpudissect.kernels import compile_kernel

    arch = detect_arch(0)
    for kernel in t.KERNELS:
        compile_kernel(
            REPO / f"kernels/{kernel}.cu", arch=arch, output=tmp_path / f"{kernel}.cubin"
        )
    with CudaBackend(index=0, cubin_dir=tmp_path) as backend:
        data = t.run(backend, PARAMS, device=None)
    doc = analyse(data, provenance={"device": "gpu0"})
    raw = doc["paths"]["ca"]["raw_latency_cycles"]["value"]
    overhead = doc["timing"]["window_overhead_cycles"]
    assert overhead["value"] is not None, overhead
    calibrated = raw - overhead["value"]
    print(f"L1 hit: {raw} raw, {calibrated:.2f} calibrated; {doc['timing']}")
    assert 0 < calibrated < raw
    assert doc["timing"]["empty_window_cycles"]["value"] is not None


@pytest.mark.gpu
def test_gpu_texture_and_read_only_chains_follow_their_walk_and_are_below_the_raw_window(
    tmp_path, nvcc
):
    """On the GPU: the amortized chases on nc and tex (a texture object over the chain, as the
    P-chase's tex path reads it) end where the host's walk does (the backend raises
    otherwise), and each path's latency per load of a chain timed as a whole is positive and
    below its per-access window's raw latency."""
    from gpudissect.backends.cuda import CudaBackend
    from gpudissect.devices import detect_arch
    from gpudissect.kernels import compile_kernel

    arch = detect_arch(0)
    for kernel in t.KERNELS:
        compile_kernel(
            REPO / f"kernels/{kernel}.cu", arch=arch, output=tmp_path / f"{kernel}.cubin"
        )
    params = dataclasses.replace(PARAMS, paths=("ca", "cg", "nc", "tex"))
    with CudaBackend(index=0, cubin_dir=tmp_path) as backend:
        data = t.run(backend, params, device=None)
    assert set(data.loc[data["path"] == "tex", "kind"]) == {"window", "amortized_index"}
    doc = analyse(data, provenance={"device": "gpu0"})
    for path in ("nc", "tex"):
        q = doc["paths"][path]
        raw, chain = q["raw_latency_cycles"]["value"], q["load_to_use_latency_cycles"]["value"]
        print(f"{path}: raw {raw}, chain {chain}, overhead {q['window_overhead_cycles']}")
        assert raw is not None and chain is not None
        assert 0 < chain < raw
