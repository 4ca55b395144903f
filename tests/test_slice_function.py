"""The L2 address-to-slice function and the contiguous capacity it allows, from the classes the
`l2_slices` contention phase finds: on sim twins the analysis has never seen (a linear XOR
hash, 96 slices whose hash is XOR times a residue mod 3, a modulo hash of 40 slices, and a
table that loads some slices twice as much as others, with the L2's data split among the
slices), on the committed H200 trace, and the simulator's per-slice data array."""

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from gpudissect.analysis.common.gf2 import Basis, same_row_space
from gpudissect.analysis.l2.l2_slices import analyse
from gpudissect.analysis.l2.slice_function import elements, solve
from gpudissect.backends.sim import SimBackend
from gpudissect.exceptions import ProfileError
from gpudissect.experiments import l2_slices as e
from gpudissect.sim.profile import load_profile

REPO = Path(__file__).resolve().parents[1]
TWIN = REPO / "tests/data/l2_slices_twin.yaml"
H200 = REPO / "results/reference/h200"
LINE = 128


def _params(lines: int) -> e.L2SliceParams:
    return e.L2SliceParams(
        enabled=True,
        lines=lines,
        region_bytes=2 << 20,
        repetitions=1,
        sms=None,
        flush_bytes=None,
        line_seed=3,
        contention_lines=lines,
    )


def _twin(tmp_path, name: str, slices: int, index: dict, **extra) -> Path:
    """The l2_slices test twin with `slices` slices chosen by `index`, every slice at the same
    distance (only contention sorts the lines), slice k in partition k mod 2."""
    doc = yaml.safe_load(TWIN.read_text())
    s = doc["l2_slices"]
    del s["slice_cycles"]
    s |= {"slices": slices, "index": index, "atomic_cycles": 6}
    s["slice_partition"] = [k % 2 for k in range(slices)]
    for key, value in extra.items():
        section, field = key.split("__")
        where = doc["caches"]["l2"] if section == "l2" else doc[section]
        if value is None:
            where.pop(field, None)
        else:
            where[field] = value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _classes(path: Path, lines: int) -> dict:
    with SimBackend(profile_path=path, seed=7) as backend:
        data = e.run(backend, _params(lines), device=None)
    return analyse(data, provenance={"device": path.stem})


def _independent_masks(rng, count: int, bits=range(7, 21)) -> list[int]:
    basis, out = Basis(), []
    while len(out) < count:
        m = sum(1 << b for b in bits if rng.integers(2))
        if m and basis.insert(m):
            out.append(m)
    return out


def test_a_linear_xor_hash_is_recovered_up_to_relabelling(tmp_path):
    masks = _independent_masks(np.random.default_rng(41), 5)
    path = _twin(tmp_path, "xor32", 32, {"kind": "xor", "masks": masks})
    doc = _classes(path, 512)
    l2 = doc["elements"]["l2"]
    assert l2["slices"]["value"] == 32
    f = l2["slice_function"]["value"]
    assert f["kind"] == "xor"
    assert same_row_space([int(m, 16) for m in f["masks"]], masks)
    # masks over bits up to 20 have no period below the 2 MiB region
    assert (
        l2["slice_period_bytes"]["value"] is None and "not_applicable" in l2["slice_period_bytes"]
    )


def test_96_slices_of_xor_and_a_residue_mod_3_are_not_linear_and_the_xor_part_is_found(
    tmp_path,
):
    # slice = 32 * (line mod 3) + XOR hash of 5 masks: 96 slices, no linear function (a linear
    # one takes 2^r values); its linear part is exactly the 5 masks (line mod 3 is constant on
    # no mask's parity classes), and the period is 3 x 16384 lines, beyond the region
    masks = _independent_masks(np.random.default_rng(42), 5)
    lines = np.arange(3 * 16384, dtype=np.int64)
    xor = np.zeros(lines.size, np.int64)
    for k, m in enumerate(masks):
        xor |= np.array([bin(int(a) & m).count("1") & 1 for a in lines * LINE]) << k
    table = (32 * (lines % 3) + xor).tolist()
    index = {"kind": "table", "period_bytes": int(lines.size * LINE), "sets_of_lines": table}
    doc = _classes(_twin(tmp_path, "mixed96", 96, index), 1024)
    l2 = doc["elements"]["l2"]
    assert l2["slices"]["value"] == 96
    f = l2["slice_function"]["value"]
    assert f["kind"] == "not_linear"
    assert same_row_space([int(m, 16) for m in f["linear_masks"]], masks)
    ev = l2["slice_function"]["evidence"]
    assert "separate 32 groups of the 96 classes" in ev
    assert l2["slice_period_bytes"]["value"] is None


def test_a_modulo_hash_of_40_slices_is_found_as_modulo(tmp_path):
    doc = _classes(_twin(tmp_path, "mod40", 40, {"kind": "bits"}), 512)
    l2 = doc["elements"]["l2"]
    assert l2["slices"]["value"] == 40
    f = l2["slice_function"]["value"]
    assert f["kind"] == "modulo" and f["period_bytes"] == 40 * LINE
    assert l2["slice_period_bytes"]["value"] == 40 * LINE
    # line mod 40 fixes line mod 8: the linear part is address bits 7, 8 and 9, no more
    assert same_row_space([int(m, 16) for m in f["linear_masks"]], [1 << 7, 1 << 8, 1 << 9])


def _second_pass_misses(profile, lines: int) -> int:
    from gpudissect.sim.engine import SimGPU

    gpu = SimGPU(profile, seed=1)
    a = np.arange(lines, dtype=np.int64) * LINE
    gpu.load_sequence("cg", a, sm=0)
    # without noise a hit costs at most 260 + 16 + 200 cycles, a miss 700 (the twin)
    return int((gpu.load_sequence("cg", a, sm=0) >= profile.dram.latency_cycles).sum())


def test_an_unevenly_loaded_l2_has_the_contiguous_capacity_the_classes_predict(tmp_path):
    # 10 slices of 128 KiB (1.25 MiB, 640 sets of 16 ways, 64 sets per slice); the table sends
    # 2 of every 16 lines to each of slices 0-5 and 1 to each of 6-9, so a contiguous buffer
    # overflows slices 0-5 at 1024 / 2 * 16 = 8192 lines (1 MiB), 80% of the driver's size
    table = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5]
    index = {"kind": "table", "period_bytes": 16 * LINE, "sets_of_lines": table}
    driver_bytes = 1310720
    path = _twin(
        tmp_path,
        "uneven10",
        10,
        index,
        l2__size_bytes=driver_bytes,
        l2__index=None,
        l2_slices__data_per_slice=True,
    )
    doc = _classes(path, 512)
    cols = doc["columns"]
    assert doc["elements"]["l2"]["slice_function"]["value"]["kind"] == "table"
    predicted = elements(
        cols["offsets_bytes"], cols["column"], slices=10, driver_l2_bytes=driver_bytes
    )["predicted_contiguous_size_bytes"]
    # measured on the same twin without its timing noise: the largest contiguous buffer
    # whose second walk hits everywhere, in steps of 64 lines
    quiet = yaml.safe_load(path.read_text()) | {"noise": {}}
    path.write_text(yaml.safe_dump(quiet))
    profile = load_profile(path)
    fits = [
        n for n in range(64, driver_bytes // LINE + 1, 64) if not _second_pass_misses(profile, n)
    ]
    measured = max(fits) * LINE
    assert _second_pass_misses(profile, max(fits) + 64) > 0
    assert measured < 0.85 * driver_bytes
    # tolerance: one step of the measurement (64 lines, 8 KiB)
    assert abs(predicted["value"] - measured) <= 64 * LINE, (predicted, measured)
    from gpudissect.topology.l2_capacity import _reason

    assert "explained by slice imbalance" in _reason(measured, driver_bytes, predicted)


def test_the_h200_slices_are_not_a_linear_function_and_hold_the_partition_mask():
    from gpudissect.traces import read_trace

    trace = read_trace(H200 / "traces/gpu0/l2_slices.parquet")
    doc = analyse(trace.data, provenance=trace.provenance)
    l2 = doc["elements"]["l2"]
    committed = json.loads((H200 / "analysis/gpu0/l2_slices.json").read_text())
    assert l2["slices"]["value"] == committed["elements"]["l2"]["slices"]["value"]
    f = l2["slice_function"]["value"]
    assert f["kind"] == "not_linear"
    partition = sum(1 << b for b in committed["elements"]["l2"]["partition_function"]["value"])
    assert Basis(int(m, 16) for m in f["linear_masks"]).contains(partition)
    # the classes, read again from the committed document, give the same verdict
    again = solve(committed["columns"]["offsets_bytes"], committed["columns"]["column"])
    assert again.kind == "not_linear" and again.best_extra_misplaced > 0.1 * again.lines
    assert again.best_extra_misplaced < again.random_mean_misplaced


def test_data_per_slice_refuses_a_cache_index_and_sets_that_do_not_split(tmp_path):
    bad = _twin(tmp_path, "idx", 16, yaml.safe_load(TWIN.read_text())["l2_slices"]["index"],
                l2_slices__data_per_slice=True)  # fmt: skip
    with pytest.raises(ProfileError, match=r"caches\.l2\.index: is given, but l2_slices"):
        load_profile(bad)
    bad = _twin(tmp_path, "split", 24, {"kind": "bits"}, l2__index=None,
                l2_slices__data_per_slice=True)  # fmt: skip
    with pytest.raises(ProfileError, match=r"l2_slices\.data_per_slice: the cache's 512 sets"):
        load_profile(bad)


def test_without_data_per_slice_the_cache_keeps_its_own_index():
    profile = load_profile(TWIN)
    doc = yaml.safe_load(TWIN.read_text())
    assert profile.caches["l2"].index.kind == "xor"
    assert list(profile.caches["l2"].index.masks) == doc["caches"]["l2"]["index"]["masks"]


def _export(topology: dict, slices: int | None) -> str:
    from gpudissect.twin.accel_sim import accel_sim_config

    return accel_sim_config(topology, l2_slices=slices, command="test")


def _with_l2(topology: dict, l2: dict) -> dict:
    keys = ("slices", "slice_function")
    elements = topology["elements"] | {"l2": topology["elements"]["l2"] | {k: l2[k] for k in keys}}
    return topology | {"elements": elements}


def test_the_export_carries_a_modulo_function_and_says_what_it_cannot_express(tmp_path):
    from gpudissect.traces import read_trace

    topology = json.loads((H200 / "topology/gpu0.json").read_text())
    mod40 = _classes(_twin(tmp_path, "mod40", 40, {"kind": "bits"}), 512)["elements"]["l2"]
    text = _export(_with_l2(topology, mod40), None)
    assert "\n-gpgpu_memory_partition_indexing 0\n" in text
    assert "slice = line mod 40" in text and "begin it with dramid@7" in text
    trace = read_trace(H200 / "traces/gpu0/l2_slices.parquet")
    h200 = analyse(trace.data, provenance=trace.provenance)["elements"]["l2"]
    text = _export(_with_l2(topology, h200), None)
    assert "\n-gpgpu_memory_partition_indexing" not in text
    left = text.split("# Left for the user:", 1)[1]
    assert "L2 slice function: measured: not linear (linear part: masks ['0xab000'])" in left


def test_the_h200_topology_reports_the_l2_both_ways(tmp_path):
    from gpudissect.families import FAMILIES
    from gpudissect.topology import build_topology, validate_topology
    from gpudissect.traces import read_trace

    committed = json.loads((H200 / "topology/gpu0.json").read_text())
    trace = read_trace(H200 / "traces/gpu0/l2_slices.parquet")
    fresh = tmp_path / "l2_slices.json"
    fresh.write_text(json.dumps(analyse(trace.data, provenance=trace.provenance)))
    paths = [
        fresh if Path(s["analysis"]).name == "l2_slices.json" else REPO / s["analysis"]
        for s in committed["sources"]
    ]
    doc = build_topology("gpu0", paths, tuple(FAMILIES))
    validate_topology(doc)
    l2 = doc["elements"]["l2"]
    driver = committed["driver"]["l2_cache_size_bytes"]
    assert l2["driver_size_bytes"]["value"] == driver
    assert l2["contiguous_size_bytes"]["value"] == l2["size_bytes"]["value"] < driver
    reason = l2["contiguous_size_bytes"]["reason"]
    assert "below the driver's" in reason and "the slice classes do not decide it" in reason
    assert l2["slice_function"]["value"]["kind"] == "not_linear"
    assert l2["slice_function"]["experiment"] == "l2_slices"


def test_a_shortfall_the_balance_does_not_explain_is_ruled_out(tmp_path):
    from gpudissect.topology.l2_capacity import _reason

    # 40 slices of 32 KiB under a modulo hash (every slice loaded alike), but a data array of
    # 1 MiB behind 1.25 MiB of sets and ways: the contiguous capacity falls short of the
    # driver's size for a reason that is not the slices'
    driver_bytes = 1310720
    path = _twin(
        tmp_path,
        "mod40short",
        40,
        {"kind": "bits"},
        l2__size_bytes=driver_bytes,
        l2__index=None,
        l2__data_bytes=1 << 20,
        l2_slices__data_per_slice=True,
    )
    doc = _classes(path, 512)
    cols = doc["columns"]
    predicted = elements(
        cols["offsets_bytes"], cols["column"], slices=40, driver_l2_bytes=driver_bytes
    )["predicted_contiguous_size_bytes"]
    assert predicted["value"] == driver_bytes  # a modulo hash loads every slice alike
    quiet = yaml.safe_load(path.read_text()) | {"noise": {}}
    path.write_text(yaml.safe_dump(quiet))
    profile = load_profile(path)
    fits = [
        n for n in range(64, driver_bytes // LINE + 1, 64) if not _second_pass_misses(profile, n)
    ]
    measured = max(fits) * LINE
    assert measured <= 1 << 20
    assert "slice imbalance ruled out" in _reason(measured, driver_bytes, predicted)


def test_mask_misplacement_and_period_pairs_match_a_direct_count():
    from gpudissect.analysis.l2.slice_function import (
        misplaced_by_mask,
        period_agreement,
        region_bits,
    )

    rng = np.random.default_rng(9)
    lines = np.sort(rng.choice(4096, 300, replace=False)).astype(np.int64)
    offsets, labels = lines * LINE, rng.integers(0, 7, lines.size)
    bits = region_bits(offsets)
    assert bits[0] == 7 and bits[-1] == int(offsets.max()).bit_length() - 1
    mis = misplaced_by_mask(offsets, labels, bits)
    for index in rng.integers(1, 1 << len(bits), 20):
        mask = sum(1 << b for j, b in enumerate(bits) if index >> j & 1)
        par = np.array([bin(int(o) & mask).count("1") & 1 for o in offsets])
        want = sum(min(par[labels == k].sum(), (1 - par[labels == k]).sum()) for k in range(7))
        assert mis[index] == want
    total, agree = period_agreement(lines, labels, 200)
    d = np.abs(lines[:, None] - lines[None, :])
    same = labels[:, None] == labels[None, :]
    for p in (2, 3, 40, 97, 200):
        hit = np.triu((d % p == 0) & (d > 0), 1)
        assert (total[p], agree[p]) == (hit.sum(), (hit & same).sum())


def test_a_linear_function_survives_a_misplaced_line_and_predicts_an_even_capacity():
    # 32 slices by 5 masks over bits 7-20, 1024 sampled lines, one line put in the wrong class
    # (a contention misread): the linear part tolerates it (0.5% of the lines), and a linear
    # map is balanced over the region, so every slice of driver / 32 fills at the driver's size
    rng = np.random.default_rng(17)
    masks = _independent_masks(rng, 5)
    offsets = rng.choice(16384, 1024, replace=False).astype(np.int64) * LINE
    labels = np.zeros(offsets.size, np.int64)
    for k, m in enumerate(masks):
        labels |= np.array([bin(int(o) & m).count("1") & 1 for o in offsets]) << k
    labels = rng.permutation(32)[labels]  # relabelled
    labels[7] = (labels[7] + 1) % 32
    f = solve(offsets, labels)
    assert f.kind == "xor" and same_row_space(f.linear_masks, masks)
    got = elements(offsets, labels, slices=32, driver_l2_bytes=32 << 20)
    assert got["predicted_contiguous_size_bytes"]["value"] == 32 << 20
