"""Constant L1 sets and ways (`constant_sets`): the family on simulated constant caches it has
never seen (eight sets of unequal free ways, twelve sets indexed modulo 12, one fully associative
set, a hashed index no modulo model explains), the threshold on hand-made traces, the config
check of an `auto` line, and a GPU run (`pytest -m gpu`)."""

from pathlib import Path

import pandas as pd
import pytest
import yaml

from gpudissect.analysis.caches.constant_sets import analyse, predict, threshold
from gpudissect.backends.sim import SimBackend
from gpudissect.exceptions import ConfigError
from gpudissect.experiments import constant_sets as e

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / "tests/data/h100_like.yaml"
PARAMS = e.ConstantSetsParams(
    enabled=True,
    line_bytes=64,
    max_stride_lines=24,
    max_walk_lines=256,
    warm_passes=2,
    timed_passes=4,
    overflow_walks=2,
    miss_share=0.02,
)


def _doc(tmp_path, constant_l1: dict) -> dict:
    profile = yaml.safe_load(BASE.read_text())
    profile["caches"]["constant_l1"] = {
        "line_bytes": 64,
        "policy": {"kind": "lru"},
        "hit_latency_cycles": 30,
        **constant_l1,
    }
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(profile))
    data = e.run(SimBackend(profile_path=path, seed=2), PARAMS, device=None)
    return analyse(
        data, provenance={"device": "sim", "config": {"parameters": {"miss_share": 0.02}}}
    )


def _value(doc, q):
    return doc["elements"]["constant_l1"][q].get("value")


def test_unequal_free_ways_per_set(tmp_path):
    # 8 sets of 4 ways, some ways taken (as the kernel's own constants take them on a GPU):
    # free ways [4, 3, 4, 4, 2, 4, 3, 4], 28 lines. A stride-1 walk puts line i in set i mod 8;
    # set 4 (2 free) overflows at its third line, line 4 + 2 * 8 = 20: capacity 20 lines.
    # Stride 8 stays in set 0 (4 lines); stride 4 alternates sets 0 and 4: 2 * 2 + 1 = 5 lines.
    free = [4, 3, 4, 4, 2, 4, 3, 4]
    doc = _doc(tmp_path, {"size_bytes": 64 * sum(free), "set_ways": free})
    assert _value(doc, "sets") == 8
    assert _value(doc, "ways_per_set") == [4]
    assert _value(doc, "reserved_lines") == 32 - 28
    assert _value(doc, "set_index_bits") == [6, 7, 8]
    measured = {r["stride_lines"]: r["measured_lines"] for r in doc["strides"]}
    assert (measured[1], measured[4], measured[8]) == (20, 5, 4)
    assert all(r["agree"] for r in doc["strides"])
    assert [o["capacity_lines"] for o in doc["offsets"]][:8] == free


def test_twelve_sets_modulo(tmp_path):
    # 12 sets x 3 ways, set = line mod 12: stride 1 holds 36 lines, stride 12 (one set) 3,
    # stride 8 (gcd 4: sets 0, 8, 4) 9
    doc = _doc(tmp_path, {"size_bytes": 12 * 3 * 64, "set_ways": [3] * 12})
    assert (_value(doc, "sets"), _value(doc, "ways_per_set")) == (12, [3])
    assert _value(doc, "index_kind") == "modulo"
    measured = {r["stride_lines"]: r["measured_lines"] for r in doc["strides"]}
    assert (measured[1], measured[8], measured[12]) == (36, 9, 3)


def test_fully_associative(tmp_path):
    # one set of 27 ways: 27 lines at every stride while 27 lines fit in constant memory
    doc = _doc(tmp_path, {"size_bytes": 27 * 64, "ways": 27})
    assert (_value(doc, "sets"), _value(doc, "ways_per_set")) == (1, [27])
    assert _value(doc, "index_kind") == "fully_associative"
    assert _value(doc, "reserved_lines") == 0


def test_hashed_index_is_not_read_as_modulo(tmp_path):
    # 8 sets whose bits fold line bits 6-8 with bits 9-11: the stride-8 walk (512 B) spreads
    # over all sets, which no modulo model predicts beside the stride-1 capacity of 32
    masks = [0x240, 0x480, 0x900]
    doc = _doc(
        tmp_path,
        {"size_bytes": 2048, "ways": 4, "index": {"kind": "xor", "masks": masks}},
    )
    assert _value(doc, "sets") is None
    assert "no S sets" in doc["elements"]["constant_l1"]["sets"]["undetermined"]


def test_predict_by_hand():
    # sets [2, 1]: stride 1 puts lines in sets 0, 1, 0, 1: set 1 overflows at line 3
    assert predict([2, 1], 1) == 3
    # stride 2 stays in set 0 (2 lines); from offset 1 in set 1 (1 line)
    assert predict([2, 1], 2) == 2
    assert predict([2, 1], 2, 1) == 1


def test_threshold_needs_a_gap():
    def trace(hit, miss):
        return pd.DataFrame(
            {
                "kind": [0] * 6,
                "detail": [0, 0, 0, 1, 1, 1],
                "latency_cycles": [hit] * 3 + [miss] * 3,
            }
        )

    assert threshold(trace(40, 106)) == 73.0
    assert threshold(trace(40, 43)) is None


def test_auto_line_needs_caches(tmp_path):
    from gpudissect.config import load

    cfg = yaml.safe_load((REPO / "tests/data/tiny_config.yaml").read_text())
    cfg.setdefault("experiments", {})["constant_sets"] = {"enabled": True}
    cfg["experiments"]["caches"] = {"enabled": False}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match=r"constant_sets\.line_bytes: auto"):
        load(path, base_dir=REPO)


@pytest.mark.gpu
def test_gpu_constant_walks_find_a_model(tmp_path, nvcc):
    # on a GPU the walks separate hits from misses, and the sets and free ways the analysis
    # derives predict the capacity at every stride
    from gpudissect.backends.cuda import CudaBackend
    from gpudissect.devices import detect_arch
    from gpudissect.kernels import compile_kernel

    compile_kernel(
        REPO / "kernels/pchase.cu", arch=detect_arch(0), output=tmp_path / "pchase.cubin"
    )
    with CudaBackend(index=0, cubin_dir=tmp_path) as backend:
        data = e.run(backend, PARAMS, device=None)
    doc = analyse(
        data, provenance={"device": "gpu", "config": {"parameters": {"miss_share": 0.02}}}
    )
    assert doc["threshold_cycles"]["value"] > 0
    print({q: v.get("value") for q, v in doc["elements"]["constant_l1"].items()})
    print([(r["stride_lines"], r["measured_lines"], r["predicted_lines"]) for r in doc["strides"]])
    assert _value(doc, "sets") is not None, doc["elements"]["constant_l1"]["sets"]
    assert all(r["agree"] for r in doc["strides"])
    assert _value(doc, "ways_per_set")[0] >= 1
