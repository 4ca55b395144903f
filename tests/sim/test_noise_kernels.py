"""The fast noise (polynomial sine and cosine, guarded rounding, drawn a block at a time) gives
the draws of the plain libm formula, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from gpudissect.sim import _noise_kernels as NK
from gpudissect.sim.noise import Noise, NoiseSpec, seed_states


@njit(cache=False)
def _libm_rounded(r, t, cosine, jitter_cycles):
    """The reference's rounding with libm's cos or sin (compiled as the kernels are)."""
    return np.int64(np.floor(r * (np.cos(t) if cosine else np.sin(t)) * jitter_cycles + 0.5))


@njit(cache=False)
def _poly(t):
    return NK._cos_sin(t)


@njit(cache=False)
def _libm_cos_sin(t):
    return np.cos(t), np.sin(t)


@njit(cache=False)
def _guarded(r, t, cosine, jitter_cycles):
    c, s = NK._cos_sin(t)
    return NK.jitter_of(r, t, c if cosine else s, cosine, jitter_cycles)


def _fast(n, seed, jitter, p, block):
    out = np.empty(n, dtype=np.int64)
    NK.noise_fill(out, seed_states(seed), np.zeros(3), jitter, p, 400, np.empty((5, block)))
    return out


def _reference(n, seed, jitter, p):
    out = np.empty(n, dtype=np.int64)
    NK.noise_reference(out, seed_states(seed), np.zeros(3), jitter, p, 400)
    return out


@pytest.mark.parametrize(
    "jitter, p",
    # 1e9: the guard (1e-11 of jitter + |y|) spans a few % of every unit, so libm decides some
    # draws of a block and the series the others; 1e15: the guard spans whole units, libm
    # decides every draw, where the series alone would round many otherwise (the case that
    # fails without the block's fall-back)
    [(2.0, 0.0005), (0.5, 0.0), (3.7, 0.01), (1000.0, 0.2), (0.0, 0.01), (1e9, 0.01), (1e15, 0.01)],
)
def test_block_draws_equal_the_libm_formula(jitter, p):
    # blocks of odd and even sizes: a pair's pending sine crosses block boundaries both ways
    for seed, block in [(0, 256), (11, 7), (12, 1)]:
        fast = _fast(60_000, seed, jitter, p, block)
        assert np.array_equal(fast, _reference(60_000, seed, jitter, p))
    assert fast.std() > 0


def test_noise_object_continues_across_samples_of_any_size():
    spec = NoiseSpec(jitter_cycles=2.0, outlier_probability=0.01, outlier_cycles=400)
    noise = Noise(spec, seed=5)
    parts = [noise.sample(n) for n in (1, 3, 255, 256, 257, 4097, 2)]
    assert np.array_equal(np.concatenate(parts), _reference(sum(map(len, parts)), 5, 2.0, 0.01))


def test_polynomials_stay_within_the_guards_premise():
    # the guard assumes |polynomial - libm| < 2e-15; quadrant edges (multiples of pi/4) included
    rng = np.random.default_rng(3)
    edges = np.repeat(np.arange(9) * np.pi / 4, 2000) + rng.normal(0, 1e-9, 18000)
    ts = np.concatenate(
        [rng.random(400_000) * 2 * np.pi, np.clip(edges, 0, np.nextafter(2 * np.pi, 0))]
    )
    worst = 0.0
    for t in ts[::7]:
        (c, s), (lc, ls) = _poly(t), _libm_cos_sin(t)
        worst = max(worst, abs(c - lc), abs(s - ls))
    assert worst < 2e-15


def test_guarded_rounding_equals_libm_at_the_rounding_boundaries():
    # radii that put r cos(t) J + 1/2 within a few ulps of an integer: the polynomial alone
    # rounds some of them the other way, the guard sends them to libm
    rng = np.random.default_rng(4)
    naive_differs = 0
    for _ in range(30_000):
        t, jitter, cosine = (
            rng.random() * 2 * np.pi,
            rng.choice([0.5, 2.0, 3.0, 77.0]),
            rng.random() < 0.5,
        )
        lc, ls = _libm_cos_sin(t)
        v = lc if cosine else ls
        if abs(v) < 1e-3:
            continue
        k = rng.integers(-40, 40)
        r0 = (k - 0.5) / (v * jitter)
        if not 0 < r0 < 37.0:
            continue
        for r in (np.nextafter(r0, 0), r0, np.nextafter(r0, np.inf)):
            exact = _libm_rounded(r, t, cosine, jitter)
            assert _guarded(r, t, cosine, jitter) == exact
            c, s = _poly(t)
            naive_differs += int(np.floor(r * (c if cosine else s) * jitter + 0.5)) != exact
    assert naive_differs > 0  # the cases reach where the guard is needed


@njit(cache=False)
def _series_log(u):
    return NK._log(u)


def test_log_series_stays_within_the_guards_premise():
    # the guard assumes |series - libm| < 1e-15 ln(u), relative, for every first uniform of a pair:
    # multiples of 2^-53 in (0, 1) and the clamp 1e-300; near 1, near sqrt(2)/2 (where the
    # mantissa is halved) and near powers of two included
    rng = np.random.default_rng(4)
    k = np.concatenate(
        [
            rng.integers(1, 1 << 53, 200_000),
            (1 << 53) - np.arange(1, 2000),
            np.arange(1, 2000),
            np.round(2.0**53 / np.sqrt(2)).astype(np.int64) + np.arange(-1000, 1000),
            (np.int64(1) << np.arange(1, 53)) + 1,
            np.int64(1) << np.arange(1, 53),
        ]
    )
    us = np.concatenate([k.astype(np.float64) * 2.0**-53, [1e-300]])
    worst = max(abs(_series_log(u) - np.log(u)) / -np.log(u) for u in us[us < 1.0])
    assert worst < 1e-15
