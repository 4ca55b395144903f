"""The L1 index over every address bit the probe window spans (`l1_sets`): the automatic probe
window from the device's memory, the power-of-two strides up to 32 MiB, and a simulated L1
whose index uses bits 26-33, which a probe range of bits 7-25 misses and the automatic one
recovers (the partition of addresses, and the capacity at every stride predicted beside the
one measured); a GPU check (`pytest -m gpu`)."""

from pathlib import Path

import numpy as np
import pytest
import yaml
from test_l1_sets import _params as l1_sets_params

from gpudissect.analysis.caches.l1_sets import analyse, predict_capacity
from gpudissect.analysis.common import gf2
from gpudissect.backends.sim import SimBackend
from gpudissect.exceptions import ConfigError
from gpudissect.experiments import l1_sets as e

REPO = Path(__file__).resolve().parents[1]
PROFILE = REPO / "tests/data/unseen_l1_high_bits.yaml"
# the profile's masks, as its comment derives them: set bit k folds bits 7 + k + 5 g, g = 0..5,
# up to bit 33
TRUE_MASKS = [0x108421080, 0x210842100, 0x21084200, 0x42108400, 0x84210800]
GIB = 1 << 30


def _params(**over) -> e.L1SetsParams:
    """test_l1_sets' small sweep, with strides of up to 8 lines and the power-of-two strides to
    32 MiB."""
    return l1_sets_params(**{"max_stride_lines": 8, "max_stride_bytes": 1 << 25, **over})


def _run(probe_window):
    p = _params(probe_window_bytes=probe_window)
    data = e.run(SimBackend(profile_path=PROFILE, seed=3), p, device=None)
    names = ("probe_window_bytes", "max_probe_window_bytes", "memory_reserve_bytes")
    prov = {"device": "sim", "config": {"parameters": {n: getattr(p, n) for n in names}}}
    return analyse(data, provenance=prov)


@pytest.fixture(scope="module")
def wide():
    return _run("auto")


@pytest.fixture(scope="module")
def narrow():
    return _run(1 << 26)  # bits 7-25, the range the index was solved over before


def _masks(doc) -> list[int]:
    return [int(m, 16) for m in doc["index_function"]["masks"]["value"]]


def _same_partition(masks, addresses) -> bool:
    """Whether `masks` put every two of `addresses` in one set exactly when the profile does
    (labels agree up to a relabelling: the map between them is one-to-one)."""
    got, want = gf2.labels(masks, addresses), gf2.labels(TRUE_MASKS, addresses)
    pairs = set(zip(got.tolist(), want.tolist(), strict=True))
    return len(pairs) == len({g for g, _ in pairs}) == len({w for _, w in pairs})


def _addresses(window_bytes: int) -> np.ndarray:
    rng = np.random.default_rng(7)
    return rng.integers(0, window_bytes // 128, 4000, dtype=np.int64) * 128


def test_the_automatic_window_is_the_largest_that_twice_fits_the_memory():
    p = _params(window_bytes=1 << 26, probe_window_bytes="auto")
    # the memory an H200's driver reports (results/reference/h200, device_facts) less 8 GiB:
    # 2 x 64 GiB fits, 2 x 128 GiB does not
    assert e.probe_window(p, 150109880320) == 64 * GIB
    # an 80 GB H100's (results/reference/h100) less 8 GiB: 2 x 32 GiB fits, 2 x 64 GiB does not
    assert e.probe_window(p, 85017493504) == 32 * GIB
    assert e.probe_window(p, None) == 1 << 26  # no memory size: the pools' window
    assert e.probe_window(p, 4 * GIB) == 1 << 26  # nothing larger fits
    bounded = _params(probe_window_bytes="auto", max_probe_window_bytes=16 * GIB)
    assert e.probe_window(bounded, 150109880320) == 16 * GIB
    assert e.probe_window(_params(), 150109880320) == 1 << 21  # unset: window_bytes


def test_the_strides_are_1_to_max_then_powers_of_two_to_32_mib():
    k = e.strides(_params(max_stride_lines=40, max_stride_bytes=1 << 25))
    assert k[:40] == list(range(1, 41))
    # 64 lines (8 KiB) .. 262144 lines (32 MiB of 128-B lines)
    assert k[40:] == [1 << j for j in range(6, 19)]


def _section(**over) -> dict:
    from gpudissect import config

    raw = yaml.safe_load(open(REPO / "config/gpu.yaml"))
    raw["experiments"]["l1_sets"].update(over)
    return config.validate(raw)["experiments"]["l1_sets"]


def test_a_probe_window_that_is_no_power_of_two_is_refused():
    for bad in (3 << 30, "all", 1 << 20):  # 1 MiB: below window_bytes
        with pytest.raises(ConfigError, match=r"l1_sets.probe_window_bytes: .*allowed: auto"):
            e.parse_params(_section(probe_window_bytes=bad), "experiments.l1_sets")
    with pytest.raises(ConfigError, match="max_stride_bytes: 3000; allowed: 0 or a power"):
        e.parse_params(_section(max_stride_bytes=3000), "experiments.l1_sets")


def test_the_wide_window_recovers_the_high_bits_of_the_index(wide):
    # 16 GiB window: 2 x 16 GiB fits the profile's 64 GiB less 8 GiB, 2 x 32 GiB does not
    assert wide["probed_bits"]["value"] == [7, 33]
    assert "bits 34 and above" in wide["probed_bits"]["not_probed"]
    assert wide["elements"]["l1d"]["ways_per_set"]["value"] == [4]
    assert wide["elements"]["l1d"]["sets"]["value"] == 32
    assert gf2.same_row_space(_masks(wide), TRUE_MASKS)
    assert _same_partition(_masks(wide), _addresses(16 * GIB))


def test_the_wide_window_predicts_the_capacity_at_every_stride_to_32_mib(wide):
    rows = {r["stride_lines"]: r for r in wide["stride_validation"]["strides"]}
    assert set(rows) == set(range(1, 9)) | {1 << j for j in range(4, 19)}
    assert all(r["agree"] for r in rows.values()), rows
    assert wide["stride_validation"]["agree"]["value"] is True
    # at 32 MiB the walk's lines fold bits 25-33 into every set: more than one set's ways
    assert rows[1 << 18]["measured_lines"] > 4
    assert rows[1 << 18]["stride_bytes"] == 1 << 25


def test_bits_7_to_25_miss_the_high_bits(wide, narrow):
    assert narrow["probed_bits"]["value"] == [7, 25]
    assert "the config fixed" in narrow["probed_bits"]["not_probed"]
    old = _masks(narrow)
    assert len(old) == 5 and not gf2.same_row_space(old, TRUE_MASKS)
    assert _same_partition(old, _addresses(1 << 26))  # right inside its own window
    assert not _same_partition(old, _addresses(16 * GIB))  # wrong beyond it
    # the old masks put a 32 MiB walk in too few sets: they predict less than it holds
    big = {r["stride_lines"]: r for r in wide["stride_validation"]["strides"]}[1 << 18]
    pred = predict_capacity(lambda a: gf2.labels(old, a), 4, 1 << 18, 128, big["top_lines"])
    assert pred < big["measured_lines"]


@pytest.mark.gpu
def test_gpu_l1_index_over_every_bit_predicts_every_stride(tmp_path, nvcc):
    # config/gpu.yaml's l1_sets on GPU 0: the automatic probe window (H200: 64 GiB, bits 7-35;
    # H100: 32 GiB, bits 7-34), strides 1-40 lines and 8 KiB-32 MiB: the model predicts each
    import time

    from gpudissect.backends.cuda import CudaBackend
    from gpudissect.devices import detect_arch
    from gpudissect.kernels import compile_kernel

    arch = detect_arch(0)
    for kernel in e.KERNELS:
        compile_kernel(
            REPO / f"kernels/{kernel}.cu", arch=arch, output=tmp_path / f"{kernel}.cubin"
        )
    section = _section()
    p = e.parse_params(section, "experiments.l1_sets")
    start = time.monotonic()
    with CudaBackend(index=0, cubin_dir=tmp_path) as backend:
        data = e.run(backend, p, device=None)
        backend_name = backend.facts().name or ""
    elapsed_s = time.monotonic() - start
    # where no set overflows first, the walk stops when the data array beside the shared
    # buffer is full: the L1 size l1_size measured on this GPU model at the same carveout and
    # buffer (the committed reference run) caps the prediction, as in the pipeline
    model = "h200" if "H200" in backend_name else "h100" if "H100" in backend_name else None
    size_doc = REPO / f"results/reference/{model}/analysis/gpu0/l1_size.json"
    inputs = {"l1_size": str(size_doc)} if model and size_doc.exists() else None
    prov = {"device": "gpu0", "config": {"parameters": section}}
    doc = analyse(data, provenance=prov, inputs=inputs)
    rows = doc["stride_validation"]["strides"]
    print(backend_name, "l1_size from", inputs)
    print(f"{elapsed_s:.1f} s, {doc['launches']} launches; probed {doc['probed_bits']}")
    print("masks", doc["index_function"].get("masks", {}).get("value"))
    for r in rows:
        print(
            f"stride {r['stride_bytes']:>9} B: measured {r['measured_lines']}, predicted "
            f"{r['predicted_lines']} (top {r['top_lines']}) {'ok' if r['agree'] else 'DIFFERS'}"
        )
    assert doc["probed_bits"]["value"][1] >= 34
    assert {r["stride_bytes"] for r in rows} >= {128 << j for j in range(19)}
    assert elapsed_s < 30
    assert inputs is not None, "no reference l1_size for this GPU model: the data-array limit"
    assert all(r["agree"] for r in rows)
