"""The fill / disturb / re-walk families (Thesis Sec. 4.5, 4.6): the work, the sim handler's
scripted order, the statistics on seeded synthetic latencies, the instance-count rule, and the
twins recovering their profiles' sharing and copies."""

from __future__ import annotations

import json

import numpy as np
import pytest

import gpudissect.backends.multichase_sim  # noqa: F401 - registers the sim handler
from gpudissect.analysis.caches import cache_instances, cache_sharing
from gpudissect.analysis.caches.disturbance import disturbance
from gpudissect.backends.sim import SimBackend
from gpudissect.experiments import cache_instances as inst_exp
from gpudissect.experiments import cache_sharing as share_exp
from gpudissect.experiments.disturbance import CacheTarget, build_work
from gpudissect.experiments.multichase import MultiChaseWork, Step, Walker
from gpudissect.sim import load_profile

ELEMENT = {"ca": "l1d", "tex": "texture", "nc": "readonly", "const": "constant_l1"}


def test_work_layout_by_hand():
    # A: tex, 12288 B at 32 B, fill 0.8 -> 9830 B -> 307 lines; B: ca, 16384 B at 128 B ->
    # 102 lines, in warp 0 (thread 1). A's region is [0, 9824) B, so B's starts at the next
    # 4 KiB boundary, 12288 B = element 3072.
    a, b = CacheTarget("tex", 12288, 32), CacheTarget("ca", 16384, 128)
    work = build_work(a, b, warp_b=0, fill_fraction=0.8, shared_buffer_bytes=16384)
    assert [(w.thread, w.path, w.start_index) for w in work.walkers] == [
        (0, "tex", 0),
        (1, "ca", 3072),
    ]
    assert work.script == (Step(0, 307, False), Step(1, 102, False), Step(0, 307, True))
    assert work.block_threads == 32 and work.const_array is None
    assert work.array[0] == 8 and work.array[306 * 8] == 0  # A's chain wraps to its start
    assert work.array[3072] == 3072 + 32
    # B in warp 3 is thread 96; a const walker gets constant memory of its own
    c = CacheTarget("const", 2048, 64)
    work = build_work(a, c, warp_b=3, fill_fraction=0.8, shared_buffer_bytes=16384)
    assert work.walkers[1].thread == 96 and work.block_threads == 128
    assert len(work.const_array) == 1024 and work.walkers[1].start_index == 0


def test_work_refuses_what_the_kernel_cannot_run():
    array = np.zeros(64, np.uint32)
    with pytest.raises(ValueError, match="distinct"):
        MultiChaseWork(array, None, (Walker(0, "ca", 0), Walker(0, "nc", 1)), (), 32, 4096)
    with pytest.raises(ValueError, match="const needs const_array"):
        MultiChaseWork(array, None, (Walker(0, "const", 0),), (), 32, 4096)
    with pytest.raises(ValueError, match="cannot hold"):
        MultiChaseWork(array, None, (Walker(0, "ca", 0),), (Step(0, 600, True),), 32, 4096)


def _profile_with(tmp_path, shared: bool):
    """A 2 KB L1 on ca and a 2 KB texture cache on tex (32 B lines, LRU), one physical cache
    when `shared` (tex names l1d), over a 64 KB L2; no noise, no TLBs."""
    caches = {
        "l1d": {"size_bytes": 2048, "line_bytes": 32, "ways": 4, "hit_latency_cycles": 30},
        "l2": {"size_bytes": 65536, "line_bytes": 32, "ways": 8, "hit_latency_cycles": 200},
    }
    paths = {"ca": ["l1d", "l2"], "cg": ["l2"], "tex": ["l1d", "l2"]}
    if not shared:
        caches["texture"] = dict(caches["l1d"], hit_latency_cycles=90)
        paths["tex"] = ["texture", "l2"]
    doc = {
        "profile_version": 1, "name": "t", "clocks": {"sm_mhz": 1000, "memory_mhz": 1000},
        "sms": 1, "max_warps_per_sm": 8, "dram": {"latency_cycles": 400},
        "caches": caches, "paths": paths,
    }  # fmt: skip
    path = tmp_path / f"shared_{shared}.yaml"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("shared, expect", [(True, 200), (False, 30)])
def test_scripted_order_on_the_simulator(tmp_path, shared, expect):
    # A fills 48 of the 64 lines of its cache; B walks 64 other lines on tex. In one cache
    # (LRU) B's 64 newer lines evict all 48 of A's: A's re-walk hits the L2 (200 cycles) every
    # time; with a texture cache of its own, A re-walks its L1 (30 cycles).
    backend = SimBackend(profile_path=_profile_with(tmp_path, shared), seed=1)
    work = build_work(
        CacheTarget("ca", 1920, 32),  # 0.8 of 1920 B -> 48 lines
        CacheTarget("tex", 2560, 32),  # 0.8 of 2560 B -> 64 lines
        warp_b=0,
        fill_fraction=0.8,
        shared_buffer_bytes=4096,
    )
    result = backend.run(work, seed=0)
    assert len(result.latency_cycles) == 48
    assert set(result.latency_cycles.tolist()) == {expect}
    assert result.indices[-1] == 0  # the timed walk ends where A's chain starts again


def test_disturbance_statistics_on_seeded_latencies():
    rng = np.random.default_rng(4)
    base = np.round(rng.normal(50, 1, 400))
    hit, miss = np.round(rng.normal(50, 1, 400)), np.round(rng.normal(300, 5, 400))
    evicted = np.where(rng.random(400) < 0.6, miss, hit)  # 60% of A's lines evicted
    few = np.where(rng.random(400) < 0.03, miss, hit)  # a TLB-like handful
    d = disturbance(base, evicted, alpha=0.01, min_excess=0.25)
    assert d.disturbed and d.confidence > 0.99 and 0.5 < d.excess_fraction < 0.7
    d = disturbance(base, few, alpha=0.01, min_excess=0.25)
    assert not d.disturbed and d.p_value < 0.01 and d.confidence > 0.99
    d = disturbance(base, hit, alpha=0.01, min_excess=0.25)
    assert not d.disturbed and d.misses_disturbed == 0


def _pair(a, b, disturbed):
    return {"path_a": a, "path_b": b, "disturbed": disturbed, "confidence": 0.99, "evidence": "e"}


def test_one_direction_that_evicts_is_enough_for_one_storage():
    # B on nc evicts all of A's ca lines; B on ca leaves A's nc lines (one storage whose
    # replacement keeps one path's lines), and const is a cache of its own
    pairs = [
        _pair("ca", "nc", True),
        _pair("nc", "ca", False),
        _pair("ca", "const", False),
        _pair("const", "ca", False),
    ]
    entry = cache_sharing._shared_with("ca", pairs)
    assert entry["value"] == ["readonly"]
    assert entry["confidence"] == pytest.approx(0.99 * 0.5)
    assert "only the walk on nc evicts" in entry["evidence"]
    assert cache_sharing._shared_with("nc", pairs)["value"] == ["l1d"]
    assert cache_sharing._shared_with("const", pairs)["value"] == []


def _tests(sharing_warps, warps):
    return [
        {"warp": w, "disturbed": w in sharing_warps, "confidence": 0.99, "misses_disturbed": 0,
         "accesses_disturbed": 100, "misses_baseline": 0, "accesses_baseline": 100,
         "p_value": 1.0}
        for w in range(1, warps)
    ]  # fmt: skip


def test_instance_count_rule():
    assert cache_instances.instances(_tests({4}, 8))["value"] == 4  # repeats every 4 warps
    assert cache_instances.instances(_tests({2, 4, 6}, 8))["value"] == 2
    assert cache_instances.instances(_tests(set(range(1, 8)), 8))["value"] == 1
    none = cache_instances.instances(_tests(set(), 8))
    assert none["value"] is None and none["lower_bound"] == 8
    block = cache_instances.instances(_tests({1, 2, 3}, 8))  # not periodic: 8 / 4 warps
    assert block["value"] == 2 and block["confidence"] == pytest.approx(0.495)


def _stage1_doc(tmp_path, profile, paths):
    """The sweep input stage 1 would write: each path's first cache's size and line (taken
    from the profile here: this test is about sharing and copies, not sizes)."""
    doc = {"paths": {}, "shared_buffer_bytes": 16384, "carveout_pct": None}
    for p in paths:
        if p in profile.paths:
            c = profile.path_caches(p)[0]
            level = {"size_bytes": {"value": c.size_bytes}, "line_bytes": {"value": c.line_bytes}}
            doc["paths"][p] = {"measured": True, "levels": [{"level": 1} | level]}
    out = tmp_path / "cache_stage1.json"
    out.write_text(json.dumps(doc))
    return str(out)


def _run(tmp_path, profile_path, module, analysis, section, seed=3):
    from gpudissect.config import load_schema

    schema = load_schema()["$defs"]["experiments"]["properties"][module.NAME]
    defaults = {k: v["default"] for k, v in schema["properties"].items()}
    params = module.parse_params(defaults | section, f"experiments.{module.NAME}")
    backend = SimBackend(profile_path=profile_path, seed=seed)
    inputs = {"cache_stage1": _stage1_doc(tmp_path, backend.profile, params.paths)}
    data = module.run(backend, params, device=None, inputs=inputs)
    prov = {"device": "t", "config": {"parameters": defaults | section}, "backend": "sim"}
    return analysis.analyse(data, provenance=prov, inputs=inputs)


def _expected_sharing(profile):
    """Paths whose first cache is the same named cache share it (the profile's paths)."""
    first = {p: profile.paths[p][0] for p in ELEMENT if p in profile.paths}
    return {
        ELEMENT[p]: sorted(ELEMENT[q] for q in first if q != p and first[q] == first[p])
        for p in first
    }


def test_k20c_twin_recovers_thesis_table_5_4(tmp_path):
    # Thesis Table 5.4: texture and read-only shared with each other, not with the L1 data
    # or constant L1; copies per SM: L1 data 1, texture 4, read-only 4, constant L1 4
    share = _run(tmp_path, "config/devices/tesla_k20c.yaml", share_exp, cache_sharing, {})
    got = {k: sorted(v["shared_with"]["value"]) for k, v in share["elements"].items()}
    assert got == {"l1d": [], "texture": ["readonly"], "readonly": ["texture"], "constant_l1": []}
    inst = _run(tmp_path, "config/devices/tesla_k20c.yaml", inst_exp, cache_instances, {})
    got = {k: v["instances_per_sm"]["value"] for k, v in inst["elements"].items()}
    assert got == {"l1d": 1, "texture": 4, "readonly": 4, "constant_l1": 4}
    assert min(v["instances_per_sm"]["confidence"] for v in inst["elements"].values()) > 0.99


@pytest.mark.parametrize("twin", ["gtx980", "gtx780"])
def test_other_twins_recover_their_profiles(tmp_path, twin):
    path = f"config/devices/{twin}.yaml"
    profile = load_profile(path)
    share = _run(tmp_path, path, share_exp, cache_sharing, {})
    expected = _expected_sharing(profile)
    for name, el in share["elements"].items():
        if name in expected and el["shared_with"]["value"] is not None:
            assert sorted(el["shared_with"]["value"]) == expected[name], name
    inst = _run(tmp_path, path, inst_exp, cache_instances, {})
    checked = 0
    for p, name in ELEMENT.items():
        q = inst["elements"][name]["instances_per_sm"]
        if q["value"] is None:
            continue
        assert q["value"] == profile.path_caches(p)[0].instances_per_sm, name
        checked += 1
    assert checked >= 3


def test_warp_block_mapping_gives_a_non_periodic_estimate(tmp_path):
    # 2 copies mapped by blocks of 4 warps (max 8 warps): warps 1-3 share warp 0's copy,
    # 4-7 do not; S = {0, 1, 2, 3} is not periodic, so 8 / 4 = 2 copies at half confidence
    doc = json.loads(_profile_with(tmp_path, shared=False).read_text())
    doc["caches"]["l1d"] |= {"instances_per_sm": 2, "instance_select": "warp_block"}
    path = tmp_path / "block.yaml"
    path.write_text(json.dumps(doc))
    inst = _run(tmp_path, path, inst_exp, cache_instances, {"paths": ["ca"]})
    q = inst["elements"]["l1d"]["instances_per_sm"]
    assert q["value"] == 2 and 0.45 < q["confidence"] <= 0.5
    assert [t["warp"] for t in inst["elements"]["l1d"]["warps"] if t["disturbed"]] == [1, 2, 3]


def test_bad_parameters_name_key_value_and_allowed():
    from gpudissect.exceptions import ConfigError

    base = {"enabled": True, "paths": ["ca", "ca"], "fill_fraction": 0.8, "repetitions": 1,
            "alpha": 0.01, "min_excess_miss_fraction": 0.25}  # fmt: skip
    with pytest.raises(ConfigError, match=r"x\.paths: \['ca', 'ca'\] repeats"):
        share_exp.parse_params(base, "x")
    with pytest.raises(ConfigError, match=r"x\.warps: 40; allowed: 2 to 32"):
        inst_exp.parse_params(base | {"paths": ["ca"], "warps": 40}, "x")
    with pytest.raises(ConfigError, match="at least two paths"):
        share_exp.parse_params(base | {"paths": ["ca"]}, "x")
