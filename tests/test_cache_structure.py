"""The two-stage fine-grained P-chase families (cache_stage1, caches) on simulated twins and on
profiles the code has never seen, through the real sweep and analysis code.

Expected values are the papers' (TPDS Table V and Secs. 4.3-4.6; NPC Table 4; Thesis Table
5.4 for the K20c) or, for the unseen profiles in tests/data, the structure written there by
hand. The analysis sees only the traces (and the stage-1 result): the profiles are never read.
"""

import json

import numpy as np
import pytest

from gpudissect.backends.sim import SimBackend
from gpudissect.config import validate
from gpudissect.families import family

DEVICES = "config/devices"


class _Device:
    carveouts = (0,)


def _dissect(tmp_path_factory, profile, *, stage1=None, stage2=None):
    """Run cache_stage1 then caches on the sim backend; return both result documents."""
    raw = {
        "devices": [{"name": "t", "backend": "sim", "profile": profile}],
        "experiments": {"cache_stage1": stage1 or {}, "caches": stage2 or {}},
    }
    sections = validate(raw)["experiments"]
    s1, s2 = family("cache_stage1"), family("caches")
    backend = SimBackend(profile_path=profile, seed=3)
    data1 = s1.run(backend, s1.parse_params(sections["cache_stage1"], "s1"), device=_Device)
    prov = {"device": "t", "config": {"parameters": sections["cache_stage1"]}}
    doc1 = s1.analyse(data1, provenance=prov | {"device_info": backend.device_info()})
    path = tmp_path_factory.mktemp("s1") / "cache_stage1.json"
    path.write_text(json.dumps(doc1, default=float))
    inputs = {"cache_stage1": str(path)}
    params2 = s2.parse_params(sections["caches"], "s2")
    data2 = s2.run(backend, params2, device=_Device, inputs=inputs)
    doc2 = s2.analyse(data2, provenance={"device": "t", "backend": "sim"}, inputs=inputs)
    return doc1, doc2


def _v(doc, element, key):
    return doc["elements"][element][key]["value"]


def _only(*paths, l2=False):
    on = set(paths) | ({"cg"} if l2 else set())
    return {"paths": {p: {"enabled": p in on} for p in ("ca", "cg", "nc", "tex", "const")}}


@pytest.fixture(scope="module")
def gtx560ti(tmp_path_factory):
    return _dissect(
        tmp_path_factory, f"{DEVICES}/gtx560ti.yaml", stage1=_only("ca", "tex", l2=True)
    )


@pytest.fixture(scope="module")
def gtx780(tmp_path_factory):
    return _dissect(
        tmp_path_factory, f"{DEVICES}/gtx780.yaml", stage1=_only("ca", "nc", "tex", l2=True)
    )


@pytest.fixture(scope="module")
def gtx980(tmp_path_factory):
    return _dissect(tmp_path_factory, f"{DEVICES}/gtx980.yaml", stage1=_only("ca", "nc", "tex"))


@pytest.fixture(scope="module")
def k20c(tmp_path_factory):
    return _dissect(
        tmp_path_factory, f"{DEVICES}/tesla_k20c.yaml", stage1=_only("ca", "nc", "tex", "const")
    )


def test_fermi_l1_table5(gtx560ti):
    # TPDS Table V / NPC Table 4: 16 KB, 128 B lines, 32 sets, LRU no; Sec. 4.5: 4 ways,
    # replacement probabilities 1/6, 1/2, 1/6, 1/6; the mapping is not bits-defined
    _, doc = gtx560ti
    assert _v(doc, "l1d", "size_bytes") == 16384
    assert _v(doc, "l1d", "line_bytes") == 128
    assert _v(doc, "l1d", "sets") == 32
    assert _v(doc, "l1d", "ways_per_set") == [4] * 32
    assert _v(doc, "l1d", "set_index_bits") is None
    assert "not bit-defined" in doc["elements"]["l1d"]["set_index_bits"]["undetermined"]
    assert _v(doc, "l1d", "policy") == "non-lru"
    freq = _v(doc, "l1d", "way_replacement_freq")
    assert freq == pytest.approx([1 / 6, 1 / 2, 1 / 6, 1 / 6], abs=0.03)
    # NPC Table 5: global L1 hit 116 cycles
    assert _v(doc, "l1d", "hit_latency_cycles") == pytest.approx(116, rel=0.03)


def test_fermi_texture_and_l2(gtx560ti):
    # TPDS Table V: texture L1 12 KB, 32 B lines, 4 sets, LRU; Sec. 4.3: bits 7-8, 96 lines/set
    _, doc = gtx560ti
    assert _v(doc, "texture", "size_bytes") == 12288
    assert _v(doc, "texture", "line_bytes") == 32
    assert _v(doc, "texture", "sets") == 4
    assert _v(doc, "texture", "ways_per_set") == [96] * 4
    assert _v(doc, "texture", "set_index_bits") == [7, 8]
    assert _v(doc, "texture", "policy") == "lru"
    # NPC Table 5: Fermi texture L1 hit about 240 cycles
    assert _v(doc, "texture", "hit_latency_cycles") == pytest.approx(240, rel=0.03)
    # TPDS Sec. 4.6: 512 KB L2 of 32-byte lines; stage 2 is off for the L2 by default
    assert _v(doc, "l2", "size_bytes") == 524288
    assert _v(doc, "l2", "line_bytes") == 32
    assert _v(doc, "l2", "sets") is None and "undetermined" in doc["elements"]["l2"]["sets"]


def test_kepler_texture_readonly_table5(gtx780):
    stage1, doc = gtx780
    for element in ("texture", "readonly"):
        # TPDS Table V: 12 KB, 32 B lines, 4 sets, LRU yes (texture L1 and Kepler read-only)
        assert _v(doc, element, "size_bytes") == 12288
        assert _v(doc, element, "line_bytes") == 32
        assert _v(doc, element, "sets") == 4
        assert _v(doc, element, "ways_per_set") == [96] * 4
        assert _v(doc, element, "policy") == "lru"
    # TPDS Sec. 4.3: texture bits 7-8; read-only: 128 B in one set, not bits-defined
    assert _v(doc, "texture", "set_index_bits") == [7, 8]
    ro = doc["elements"]["readonly"]["set_index_bits"]
    assert ro["value"] is None and "not bit-defined" in ro["undetermined"]
    assert "5" not in ro["undetermined"].split("bits [")[1].split("]")[0].split(", ")
    # NPC Table 5: Kepler texture L1 hit about 110, miss (L2 hit) about 220
    assert _v(doc, "texture", "hit_latency_cycles") == pytest.approx(110, rel=0.03)
    assert _v(doc, "texture", "miss_latency_cycles") == pytest.approx(220, rel=0.03)
    # Kepler global loads skip the L1: the ca path hits at the L2's latency level
    assert stage1["paths"]["ca"]["levels"][0]["served_by"] == "l2"
    assert _v(doc, "l2", "size_bytes") == 1572864  # TPDS Sec. 4.6: 1536 KB


def test_maxwell_unified_l1_table5(gtx980):
    # TPDS Table V: Maxwell L1 data / texture L1 / read-only: 24 KB, 32 B lines, 4 sets, LRU
    _, doc = gtx980
    for element in ("l1d", "texture", "readonly"):
        assert _v(doc, element, "size_bytes") == 24576
        assert _v(doc, element, "line_bytes") == 32
        assert _v(doc, element, "sets") == 4
        assert _v(doc, element, "ways_per_set") == [192] * 4  # Sec. 4.3: 768 lines
        assert _v(doc, element, "policy") == "lru"


def test_k20c_thesis_table_5_4(k20c):
    # Thesis Table 5.4: L1 16 KiB / 128 B / 64 cycles; texture 12 KiB / 32 B / 111;
    # constant L1 ~2 KiB / 64 B / 50; constant L1.5 ~32 KiB / 256 B / 120
    _, doc = k20c
    expect = {
        "l1d": (16384, 128, 64),
        "texture": (12288, 32, 111),
        "readonly": (12288, 32, None),  # the twin's nc path is the texture cache (111, not 130)
        "constant_l1": (2048, 64, 50),
        "constant_l15": (32768, 256, 120),
    }
    for element, (size, line, hit) in expect.items():
        assert _v(doc, element, "size_bytes") == size, element
        assert _v(doc, element, "line_bytes") == line, element
        if hit is not None:
            assert _v(doc, element, "hit_latency_cycles") == pytest.approx(hit, rel=0.03)


# --- profiles the code has never seen (tests/data/unseen_*.yaml) ----------------------------


@pytest.fixture(scope="module")
def unseen_a(tmp_path_factory):
    return _dissect(tmp_path_factory, "tests/data/unseen_a.yaml", stage1=_only("ca"))


@pytest.fixture(scope="module")
def unseen_b(tmp_path_factory):
    return _dissect(tmp_path_factory, "tests/data/unseen_b.yaml", stage1=_only("ca", "tex"))


@pytest.fixture(scope="module")
def unseen_c(tmp_path_factory):
    return _dissect(
        tmp_path_factory,
        "tests/data/unseen_c.yaml",
        stage1=_only("ca", "nc"),
        stage2={"set_passes": 8},
    )


@pytest.fixture(scope="module")
def unseen_48_sets(tmp_path_factory):
    return _dissect(tmp_path_factory, "tests/data/unseen_l1_48_sets.yaml", stage1=_only("ca"))


def test_unseen_48_sets_line_from_the_third_stride(unseen_48_sets):
    # 12 KiB, 4 ways of 64-byte lines in 48 sets (line mod 48). At P = 64 the walk of 168
    # elements overflows at stride 128 (24 even sets hold 96) and at 96 (lines 2 mod 3 never
    # touched: 32 sets hold 128); at 160 it touches lines 5j and 5j + 2 (j < 84), at most 4 a set
    stage1, doc = unseen_48_sets
    line = stage1["elements"]["l1d"]["line_bytes"]
    assert line["value"] == 64 and "at stride 160 B" in line["evidence"]
    assert _v(doc, "l1d", "sets") == 48
    assert _v(doc, "l1d", "ways_per_set") == [4] * 48
    assert _v(doc, "l1d", "policy") == "lru"


def test_unseen_small_two_way_lru(unseen_a):
    # 8 KiB, 2 ways of 64-byte lines -> 64 sets on bits 6-11, LRU (2-way PLRU is LRU)
    _, doc = unseen_a
    assert _v(doc, "l1d", "size_bytes") == 8192
    assert _v(doc, "l1d", "line_bytes") == 64
    assert _v(doc, "l1d", "sets") == 64
    assert _v(doc, "l1d", "ways_per_set") == [2] * 64
    assert _v(doc, "l1d", "set_index_bits") == [6, 7, 8, 9, 10, 11]
    assert _v(doc, "l1d", "policy") == "lru"
    assert _v(doc, "l1d", "hit_latency_cycles") == pytest.approx(42, rel=0.03)


def test_unseen_fifo_and_unequal_sets(unseen_b):
    # L1: 48 KiB / 128 B / 6 ways -> 64 sets on bits 7-12, FIFO
    _, doc = unseen_b
    assert _v(doc, "l1d", "size_bytes") == 49152
    assert _v(doc, "l1d", "sets") == 64
    assert _v(doc, "l1d", "ways_per_set") == [6] * 64
    assert _v(doc, "l1d", "set_index_bits") == [7, 8, 9, 10, 11, 12]
    assert _v(doc, "l1d", "policy") == "fifo"
    # texture: 6 KiB of 32 B lines, one set of 48 ways and six of 24 (table-mapped), LRU
    assert _v(doc, "texture", "size_bytes") == 6144
    assert _v(doc, "texture", "line_bytes") == 32
    assert sorted(_v(doc, "texture", "ways_per_set")) == [24] * 6 + [48]
    assert _v(doc, "texture", "set_index_bits") is None
    assert "not XOR-linear" in doc["elements"]["texture"]["set_index_bits"]["undetermined"]
    assert _v(doc, "texture", "policy") == "lru"


def test_unseen_plru_hash_and_sectors(unseen_c):
    # L1: 32 KiB / 64 B / 8 ways, XOR-hashed -> 64 sets, not bit-defined, tree-PLRU
    _, doc = unseen_c
    assert _v(doc, "l1d", "size_bytes") == 32768
    assert _v(doc, "l1d", "line_bytes") == 64
    assert _v(doc, "l1d", "sets") == 64
    assert _v(doc, "l1d", "ways_per_set") == [8] * 64
    assert "XOR-linear" in doc["elements"]["l1d"]["set_index_bits"]["undetermined"]
    assert _v(doc, "l1d", "policy") == "plru"
    # read-only: 16 KiB of 128-byte lines in 32-byte sectors, 4 ways -> 32 sets, LRU
    assert _v(doc, "readonly", "size_bytes") == 16384
    assert _v(doc, "readonly", "sector_bytes") == 32
    assert _v(doc, "readonly", "line_bytes") == 128
    assert _v(doc, "readonly", "sets") == 32
    assert _v(doc, "readonly", "set_index_bits") == [7, 8, 9, 10, 11]
    assert _v(doc, "readonly", "policy") == "lru"


def _stage1(profile, stage1):
    """Run and analyse cache_stage1 alone on the sim backend."""
    raw = {"devices": [{"name": "t", "backend": "sim"}], "experiments": {"cache_stage1": stage1}}
    sec = validate(raw)["experiments"]["cache_stage1"]
    fam = family("cache_stage1")
    data = fam.run(
        SimBackend(profile_path=profile, seed=3), fam.parse_params(sec, "s1"), device=_Device
    )
    return data, fam.analyse(data, provenance={"device": "t", "config": {"parameters": sec}})


def test_unseen_random_sectored_l1_granule_cold_line_by_capacity():
    # tests/data/unseen_d.yaml: 48 KiB of 128-byte lines in 32-byte sectors, XOR-hashed sets,
    # random replacement (not LRU). The cold walk gives the sector; the line is the first
    # candidate whose walk of 7/8 C / P elements fits (P = 32 and 64 overflow)
    data, doc = _stage1("tests/data/unseen_d.yaml", _only("ca"))
    l1 = doc["elements"]["l1d"]
    assert l1["size_bytes"]["value"] == 49152
    assert l1["fetch_granularity_bytes"]["value"] == 32
    assert "cold walk" in l1["fetch_granularity_bytes"]["method"]
    assert l1["line_bytes"]["value"] == 128
    assert l1["sector_bytes"]["value"] == 32  # 128-B lines filled from the L2 in 32-B parts
    # the granule needed no warm walk; the line search ran 4 overflowing walks, one that fits
    # and its check, each one launch (walks of at most 1344 elements, 4096 timed loads)
    launches = data.groupby("phase")["point"].nunique()
    assert "granule" not in launches
    assert (launches["granule_cold"], launches["line"], launches["line_check"]) == (1, 5, 1)


def test_a_level_the_copy_filled_gets_its_granule_from_the_warm_walk(monkeypatch):
    # On a GPU the host copy of the chain passes through the L2, so a cold walk on the cg path
    # hits; the sweep then falls back to TPDS's warm walks just past C. Simulated here by a
    # copy engine that writes every chain through the L2 before the launch.
    from gpudissect.sim import engine

    class CopyThroughL2(engine.SimGPU):
        def chase(self, path, chain, **kw):
            self.fill("l2", kw["base_address_bytes"] + np.arange(len(chain)) * kw["element_bytes"])
            return super().chase(path, chain, **kw)

    monkeypatch.setattr(engine, "SimGPU", CopyThroughL2)
    data, doc = _stage1("tests/data/unseen_c.yaml", _only("cg"))
    l2 = doc["elements"]["l2"]  # 256 KiB, 32-byte lines, 16 ways, LRU
    assert set(data["phase"]) >= {"granule_cold", "granule"}
    assert l2["size_bytes"]["value"] == 262144
    assert l2["fetch_granularity_bytes"]["value"] == 32
    assert "the cold walk saw no misses" in l2["fetch_granularity_bytes"]["method"]
    assert l2["line_bytes"]["value"] == 32
    # a miss fills the whole 32-B line: no sector shows
    assert l2["sector_bytes"]["value"] is None
    assert "fills the whole 32-B line" in l2["sector_bytes"]["undetermined"]


def test_unseen_sector_apart_from_the_fetch_granularity():
    # tests/data/unseen_sectors.yaml: an L1 of 256-B lines in 64-B sectors filled from the L2, a
    # texture cache of whole 64-B lines, an L2 of 128-B lines in 32-B sectors filled from DRAM.
    # The simulator fills one sector per miss (its sector is its fetch granule: it cannot hold
    # a 32-B sector filled 64 B at a time), so every fetch granularity is the profile's sector
    # or line; the sector shows only on the L1, whose fills come from a cache
    _, doc = _stage1("tests/data/unseen_sectors.yaml", _only("ca", "tex", l2=True))
    el = doc["elements"]
    assert el["l1d"]["size_bytes"]["value"] == 32768
    assert el["l1d"]["line_bytes"]["value"] == 256
    assert el["l1d"]["fetch_granularity_bytes"]["value"] == 64
    assert el["l1d"]["sector_bytes"]["value"] == 64
    assert "4 parts of 64 B" in el["l1d"]["sector_bytes"]["evidence"]
    assert el["texture"]["line_bytes"]["value"] == 64
    assert el["texture"]["fetch_granularity_bytes"]["value"] == 64
    assert el["texture"]["sector_bytes"]["value"] is None
    assert "fills the whole 64-B line" in el["texture"]["sector_bytes"]["undetermined"]
    assert el["l2"]["line_bytes"]["value"] == 128
    assert el["l2"]["fetch_granularity_bytes"]["value"] == 32
    assert el["l2"]["sector_bytes"]["value"] is None
    assert "from DRAM" in el["l2"]["sector_bytes"]["undetermined"]
    assert "at most 32 B" in el["l2"]["sector_bytes"]["undetermined"]
    # the report's stage-1 table shows both, the sector's reason beneath it
    from gpudissect.report.sections_caches import stage1_section

    text = "\n".join(stage1_section(doc, []))
    assert "| first-miss size | fetch granularity | sector | line |" in text
    assert "| ca | 1 | l1d | 32 KiB | 64 B | 64 B | 256 B |" in text
    assert "| cg | 1 | l2 | " in text and "| 32 B | undetermined | 128 B |" in text
    assert "`cg` level 1 sector_bytes: a miss fills 32 B of the 128-B line from DRAM" in text


def test_report_shows_paper_column_only_for_paper_gpus(gtx560ti, unseen_a):
    from gpudissect.report.sections_caches import caches_section

    _, doc = gtx560ti
    doc = doc | {"device_info": {"name": "GeForce GTX 560 Ti"}}
    text = "\n".join(caches_section(doc, []))
    assert "| paper |" in text and "TPDS Table V" in text and "recovered on the twin" in text
    text = "\n".join(caches_section(unseen_a[1] | {"device_info": {"name": "Unseen GPU A"}}, []))
    assert "| paper |" not in text


@pytest.mark.gpu
def test_gpu_stage1_l1_sane(tmp_path, nvcc):
    """On the GPU: stage 1 on the ca path finds an L1 at the lowest latency level with a
    power-of-two fetch granularity of 32-128 bytes and a line of at least that; every load followed
    the chain (the recorder checks the returned indices against the chain and raises
    otherwise)."""
    from gpudissect.backends.cuda import CudaBackend
    from gpudissect.devices import detect_arch
    from gpudissect.kernels import compile_kernel

    compile_kernel("kernels/pchase.cu", arch=detect_arch(0), output=tmp_path / "pchase.cubin")
    raw = {"devices": [{"name": "g", "backend": "cuda"}]}
    sec = validate(raw)["experiments"]["cache_stage1"]
    sec["paths"] = {p: {**sec["paths"][p], "enabled": p == "ca"} for p in sec["paths"]}
    sec["paths"]["ca"]["levels"] = [
        {
            "array_bytes": {"start": 16384, "stop": 262144, "step": 8192},
            "stride_bytes": 32,
            "size_resolution_bytes": 1024,
        }
    ]
    fam = family("cache_stage1")
    with CudaBackend(index=0, cubin_dir=tmp_path) as backend:
        data = fam.run(backend, fam.parse_params(sec, "s1"), device=_Device)
    doc = fam.analyse(data, provenance={"device": "g", "config": {"parameters": sec}})
    lv = doc["paths"]["ca"]["levels"][0]
    assert set(data["carveout_pct"]) == {0}
    assert 16384 <= (lv["size_bytes"]["value"] or 0) <= 262144
    fetch = lv["fetch_granularity_bytes"]["value"]
    assert fetch in (32, 64, 128)
    line = lv["line_bytes"]["value"]  # the H100: 128 (32-byte sectors)
    assert line in (32, 64, 128, 256) and line >= fetch
    assert lv["sector_bytes"]["value"] in (fetch, None)
    assert 10 < lv["hit_latency_cycles"]["value"] < 200
