"""Profile loading: typed results, and bad profiles refused with the field named."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpudissect.exceptions import ProfileError
from gpudissect.sim import load_profile, profile_sha256
from gpudissect.sim.profile import DeviceProfile

PROFILES = Path(__file__).parent / "profiles"


def test_small_profile_loads_typed():
    p = load_profile(PROFILES / "small.yaml")
    assert isinstance(p, DeviceProfile)
    l1 = p.caches["l1d"]
    # 16384 B / (128 B x 4 ways) = 32 sets of 4 ways
    assert l1.set_ways == (4,) * 32 and l1.sets == 32 and l1.sector == 128
    assert p.paths["cg"] == ("l2",)
    assert [c.name for c in p.path_caches("ca")] == ["l1d", "l2"]
    assert p.tlbs.levels[1].set_ways == (17, 8, 8, 8, 8, 8, 8)
    assert p.tlbs.page_table_window_bytes == 512 << 20
    assert p.citations["caches.l1d"]["size_bytes"] == "assumed: test"
    assert p.noise.jitter_cycles == 0.0  # no noise block: noiseless
    assert re.fullmatch(r"[0-9a-f]{64}", profile_sha256(PROFILES / "small.yaml"))


def test_unequal_sets_and_all_index_kinds_load(write_profile, base_profile):
    caches = {
        # 3 sets (not a power of two) with contiguous bits: set = (addr >> 3) mod 3
        "l1d": {"size_bytes": 48, "line_bytes": 8, "ways": 2, "hit_latency_cycles": 1},
        # Kepler texture L1: 4 sets of 96 lines of 32 B, set = address bits 7-8 (TPDS 4.3)
        "texture": {
            "size_bytes": 12288,
            "line_bytes": 32,
            "set_ways": [96] * 4,
            "index": {"kind": "bit_list", "bits": [7, 8]},
            "hit_latency_cycles": 1,
        },
        "readonly": {
            "size_bytes": 12288,
            "line_bytes": 32,
            "ways": 96,
            "index": {"kind": "xor", "masks": [0x180, 0x300]},
            "hit_latency_cycles": 1,
        },
        "l2": {
            "size_bytes": 256,
            "line_bytes": 32,
            "set_ways": [3, 5],
            "index": {"kind": "table", "period_bytes": 128, "sets_of_lines": [0, 1, 1, 0]},
            "policy": {"kind": "fifo"},
            "hit_latency_cycles": 1,
        },
    }
    p = load_profile(write_profile(base_profile(caches=caches, paths={"ca": ["l1d", "l2"]})))
    assert p.caches["l1d"].sets == 3
    assert p.caches["texture"].index.bits == (7, 8)
    assert p.caches["l2"].set_ways == (3, 5)


def _refused(write_profile, doc) -> str:
    with pytest.raises(ProfileError) as e:
        load_profile(write_profile(doc))
    return str(e.value)


def test_ways_not_adding_up_to_size(write_profile, base_profile):
    # 120 lines x 128 B = 15360 B, one line short of 16 KB
    doc = base_profile()
    doc["caches"]["l1d"] = {
        "size_bytes": 16384,
        "line_bytes": 128,
        "set_ways": [4] * 30,
        "hit_latency_cycles": 1,
    }
    msg = _refused(write_profile, doc)
    assert "caches.l1d.set_ways" in msg
    assert "120 lines x 128 B = 15360 B, but size_bytes is 16384" in msg
    assert "profile_0.yaml" in msg


def test_uniform_ways_must_divide_size(write_profile, base_profile):
    doc = base_profile()
    doc["caches"]["l1d"]["ways"] = 5  # 1024 / 32 = 32 lines do not split into sets of 5
    assert "caches.l1d.ways" in _refused(write_profile, doc)


def test_bit_list_must_match_set_count(write_profile, base_profile):
    # 1024 B / (32 B x 4 ways) = 8 sets need 3 bits; 2 bits select only 4 sets
    doc = base_profile()
    doc["caches"]["l1d"]["index"] = {"kind": "bit_list", "bits": [5, 6]}
    msg = _refused(write_profile, doc)
    assert "caches.l1d.index.bits" in msg and "8 sets" in msg


def test_negative_latency(write_profile, base_profile):
    doc = base_profile()
    doc["caches"]["l1d"]["hit_latency_cycles"] = -5
    msg = _refused(write_profile, doc)
    assert "caches.l1d.hit_latency_cycles" in msg and "negative" in msg


def test_unknown_policy_lists_allowed(write_profile, base_profile):
    doc = base_profile()
    doc["caches"]["l1d"]["policy"] = {"kind": "mru"}
    msg = _refused(write_profile, doc)
    assert "caches.l1d.policy.kind" in msg
    for kind in ("lru", "fifo", "random", "plru", "weighted_random"):
        assert kind in msg


def test_unknown_key(write_profile, base_profile):
    doc = base_profile()
    doc["caches"]["l1d"]["assoc"] = 4
    msg = _refused(write_profile, doc)
    assert "caches.l1d" in msg and "assoc" in msg and "allowed keys" in msg


def test_unknown_top_level_key(write_profile, base_profile):
    msg = _refused(write_profile, base_profile(l3={"size_bytes": 1}))
    assert "l3" in msg and "allowed keys" in msg


def test_path_naming_undefined_cache(write_profile, base_profile):
    msg = _refused(write_profile, base_profile(paths={"ca": ["l1d", "l2"]}))
    assert "paths.ca" in msg and "'l2'" in msg and "defined caches: l1d" in msg


def test_plru_needs_power_of_two_ways(write_profile, base_profile):
    doc = base_profile()
    doc["caches"]["l1d"] = {
        "size_bytes": 96,
        "line_bytes": 32,
        "set_ways": [3],
        "policy": {"kind": "plru"},
        "hit_latency_cycles": 1,
    }
    msg = _refused(write_profile, doc)
    assert "caches.l1d.policy.kind" in msg and "power of two" in msg


def test_weights_one_per_way_summing_to_one(write_profile, base_profile):
    doc = base_profile()
    doc["caches"]["l1d"]["policy"] = {"kind": "weighted_random", "weights": [0.5, 0.5]}
    assert "caches.l1d.policy.weights" in _refused(write_profile, doc)
    doc["caches"]["l1d"]["policy"]["weights"] = [0.5, 0.5, 0.5, 0.5]
    assert "sum to 1" in _refused(write_profile, doc)


def test_tlb_entries_must_match_ways(write_profile, base_profile):
    tlbs = {
        "levels": [
            {
                "name": "l2_tlb",
                "entries": 65,
                "page_bytes": 2 << 20,
                "set_ways": [16, 8, 8, 8, 8, 8, 8],
                "miss_penalty_cycles": 1,
            }
        ]
    }
    msg = _refused(write_profile, base_profile(tlbs=tlbs))
    assert "tlbs.levels.0.set_ways" in msg and "64 entries" in msg


def test_index_keys_must_fit_kind(write_profile, base_profile):
    doc = base_profile()
    doc["caches"]["l1d"]["index"] = {"kind": "bits", "masks": [1, 2, 4]}
    assert "caches.l1d.index" in _refused(write_profile, doc)


def test_table_length_must_cover_period(write_profile, base_profile):
    doc = base_profile()
    doc["caches"]["l1d"]["index"] = {
        "kind": "table",
        "period_bytes": 256,
        "sets_of_lines": [0, 1, 2],
    }
    assert "caches.l1d.index.sets_of_lines" in _refused(write_profile, doc)


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ProfileError, match="cannot read"):
        load_profile(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("caches: [unclosed\n")
    with pytest.raises(ProfileError, match="not valid YAML"):
        load_profile(bad)
