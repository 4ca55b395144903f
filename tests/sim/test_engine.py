"""SimGPU: the P-chase follows the chain, noise is seeded, state persists until reset()."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpudissect.exceptions import ProfileError
from gpudissect.sim import SimGPU, load_profile
from gpudissect.sim.noise import Noise, NoiseSpec

SMALL = Path(__file__).parent / "profiles" / "small.yaml"
NOISE = {"jitter_cycles": 3.0, "outlier_probability": 0.01, "outlier_cycles": 400}


def random_chain(n: int, seed: int) -> np.ndarray:
    """One random cycle through all n elements (Sattolo's algorithm)."""
    order = np.random.default_rng(seed).permutation(n)
    chain = np.empty(n, dtype=np.uint32)
    chain[order] = np.roll(order, -1)
    return chain


def chase(gpu, chain, **kw):
    args = {
        "element_bytes": 4,
        "base_address_bytes": 0,
        "start_index": 0,
        "warmup_steps": 0,
        "record_steps": 100,
        **kw,
    }
    return gpu.chase("ca", chain, **args)


def test_chase_follows_the_chain_exactly():
    gpu = SimGPU(load_profile(SMALL), seed=0)
    chain = random_chain(1000, seed=1)
    lat, ind = chase(gpu, chain, start_index=17, warmup_steps=5, record_steps=3000)
    j, expected = 17, []
    for _ in range(5):
        j = chain[j]
    for _ in range(3000):
        j = chain[j]
        expected.append(j)
    assert ind.dtype == np.uint32 and lat.dtype == np.uint32
    assert list(ind) == expected


def test_chase_addresses_the_elements(base_profile, make_gpu):
    # elements of 8 B from base 4096 on a cache of 32 B lines: element j is at 4096 + 8 j,
    # so a chase 0 -> 4 -> 8 (32 B apart) misses every time, and 0 -> 1 -> 2 -> 3 hits after
    # the first (one line); the warm-up loads count for the cache but are not recorded.
    gpu = make_gpu(base_profile())
    far = np.array([4, 0, 0, 0, 8, 0, 0, 0, 0], dtype=np.uint32)
    lat, ind = chase(gpu, far, element_bytes=8, base_address_bytes=4096, record_steps=2)
    assert list(lat) == [100, 100] and list(ind) == [4, 8]
    gpu.reset()
    near = np.array([1, 2, 3, 0], dtype=np.uint32)
    lat, _ = chase(
        gpu, near, element_bytes=8, base_address_bytes=4096, warmup_steps=1, record_steps=4
    )
    assert list(lat) == [1, 1, 1, 1]


def test_same_seed_same_trace_different_seed_different(base_profile, make_gpu):
    doc = base_profile(noise=NOISE)
    doc["caches"]["l1d"]["policy"] = {"kind": "random"}
    chain = random_chain(2048, seed=2)
    a = chase(make_gpu(doc, seed=7), chain, record_steps=20_000)[0]
    b = chase(make_gpu(doc, seed=7), chain, record_steps=20_000)[0]
    c = chase(make_gpu(doc, seed=8), chain, record_steps=20_000)[0]
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_reset_replays_the_same_trace(base_profile, make_gpu):
    gpu = make_gpu(base_profile(noise=NOISE), seed=3)
    chain = random_chain(512, seed=4)
    first = chase(gpu, chain, record_steps=5000)[0]
    warm = chase(gpu, chain, record_steps=5000)[0]
    gpu.reset()
    again = chase(gpu, chain, record_steps=5000)[0]
    assert np.array_equal(first, again)
    # state persisted between the first two calls: the second started with a warm cache
    assert np.median(warm[:100]) < np.median(first[:100])


def noisy_profile(base_profile) -> dict:
    doc = base_profile(noise=NOISE)
    doc["caches"]["l1d"]["hit_latency_cycles"] = 50  # far from 0: the clamp at 0 never acts
    return doc


def test_noise_statistics(base_profile, make_gpu):
    # every load hits (one line): latency = 50 + round(N(0, 3)) + 400 with probability 0.01
    gpu = make_gpu(noisy_profile(base_profile), seed=5)
    lat = gpu.load_sequence("ca", np.zeros(200_000, dtype=np.int64))[1:].astype(float)
    outliers = lat > 250
    assert np.mean(outliers) == pytest.approx(0.01, abs=0.002)
    jitter = lat[~outliers] - 50
    assert np.mean(jitter) == pytest.approx(0.0, abs=0.05)
    assert np.std(jitter) == pytest.approx(np.sqrt(9 + 1 / 12), abs=0.1)  # + rounding


def test_noise_object_matches_engine_stream(base_profile, make_gpu):
    # the standalone Noise draws the same numbers as the engine for the same seed
    gpu = make_gpu(noisy_profile(base_profile), seed=9)
    lat = gpu.load_sequence("ca", np.zeros(1000, dtype=np.int64)).astype(int)
    noise = Noise(NoiseSpec(**NOISE), seed=9).sample(1000)
    assert list(lat[1:]) == list(50 + noise[1:])
    assert lat[0] == 100 + noise[0]


def test_noise_sample_continues_the_draws():
    # sample(n) is n successive draw()s: interleaving the two gives the one stream
    one = Noise(NoiseSpec(**NOISE), seed=4)
    drawn = [one.draw() for _ in range(7)] + list(one.sample(500)) + [one.draw()]
    other = Noise(NoiseSpec(**NOISE), seed=4)
    assert drawn == [other.draw() for _ in range(508)]


def test_missing_path_is_a_clear_error(base_profile, make_gpu):
    gpu = make_gpu(base_profile())
    with pytest.raises(ProfileError, match="has no load path 'tex'.*its paths: ca"):
        gpu.load_sequence("tex", np.array([0]))
    with pytest.raises(ProfileError, match="knows no load path 'global'"):
        gpu.chase(
            "global",
            np.array([0], dtype=np.uint32),
            element_bytes=4,
            base_address_bytes=0,
            start_index=0,
            warmup_steps=0,
            record_steps=1,
        )
    assert gpu.paths == ("ca",)


def test_bad_chase_arguments(base_profile, make_gpu):
    gpu = make_gpu(base_profile())
    with pytest.raises(ValueError, match="indices into the chain"):
        chase(gpu, np.array([1, 5], dtype=np.uint32))
    with pytest.raises(ValueError, match="negative"):
        gpu.load_sequence("ca", np.array([-8]))


def test_shared_cache_between_paths(base_profile, make_gpu):
    # a cache named by two paths is one cache (Maxwell's unified L1/texture): a line loaded
    # on one path hits on the other
    gpu = make_gpu(base_profile(paths={"ca": ["l1d"], "tex": ["l1d"]}))
    assert list(gpu.load_sequence("ca", np.array([64]))) == [100]
    assert list(gpu.load_sequence("tex", np.array([64]))) == [1]
