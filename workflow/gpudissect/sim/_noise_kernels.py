"""Numba kernels of the random streams and of the timing noise (used by ``_kernels``).

``rng`` (uint64[2]) holds the xorshift64* states: ``rng[0]`` for replacement decisions,
``rng[1]`` for timing noise. ``spare`` (float64[3]) is the pending second normal variate of a
Box-Muller pair: ``[has_spare, r, t]``, the variate being ``r * sin(t)``.

The jitter of a load is ``floor(z * jitter_cycles + 0.5)`` with ``z`` = ``r * cos(t)`` or
``r * sin(t)`` (Box-Muller, ``r = sqrt(-2 ln u1)``, ``t = 2 pi u2``) as libm computes them.
libm's sine and cosine cost more than the rest of a cached load, and only the rounded value is
kept, so ``jitter_of`` rounds the value of polynomials (within 2e-15 of libm's, a test checks)
and calls libm only where the value lies so near a rounding boundary (closer than ``_GUARD``
times the scale, 10^2 times the error bound) that the difference might move it across: every
draw equals libm's, bit for bit. ``noise_block`` draws the noise of many loads at once, the
stream first (in the order load-by-load drawing takes it), then the polynomials in one
vectorised loop, then the radii (by a series for the logarithm, ``_log``, guarded the same way)
and the rounding in another. ``noise_reference`` is the plain libm formula, load by
load, kept for tests to check that equality on the streams themselves.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

_S12, _S25, _S27, _S11 = np.uint64(12), np.uint64(25), np.uint64(27), np.uint64(11)
_MULT = np.uint64(0x2545F4914F6CDD1D)
_TWO53_INV = 1.0 / 9007199254740992.0
NOISE_STREAM = 1

# pi/2 in two parts (fdlibm's pio2_1, 33 bits, and pio2_1t): k * _PIO2_HI is exact for k <= 4
_PIO2_HI = 1.57079632673412561417e00
_PIO2_LO = 6.07710050650619224932e-11
_TWO_OVER_PI = 0.63661977236758134308
# Taylor coefficients of sin (x^3 .. x^15) and cos (x^2 .. x^16): on |x| <= pi/4 the first
# omitted terms are below 5e-17 (sin) and 2e-18 (cos), rounding adds a few 1e-16
_S3, _S5, _S7, _S9 = -1.0 / 6.0, 1.0 / 120.0, -1.0 / 5040.0, 1.0 / 362880.0
_S11C, _S13, _S15 = -1.0 / 39916800.0, 1.0 / 6227020800.0, -1.0 / 1307674368000.0
_C2, _C4, _C6, _C8 = -0.5, 1.0 / 24.0, -1.0 / 720.0, 1.0 / 40320.0
_C10, _C12, _C14, _C16 = (
    -1.0 / 3628800.0,
    1.0 / 479001600.0,
    -1.0 / 87178291200.0,
    1.0 / 20922789888000.0,
)
# |polynomial - libm| < 2e-15 for the sine or cosine, |r| <= 37.3, so the product with the
# jitter moves by less than 1e-13 (jitter + |y|); the guard is 10^2 times that. The radius by
# ``_log`` is within 1e-15 of libm's, relative: the product moves by less than 4e-14 jitter more
_GUARD = 1e-11
_LN2_HI = 6.93147180369123816490e-01  # fdlibm's ln2_hi (32 bits: e * _LN2_HI is exact)
_LN2_LO = 1.90821492927058770002e-10
_SQRT2 = 1.4142135623730951
_MANTISSA = np.int64((1 << 52) - 1)
_EXP_ONE = np.int64(1023 << 52)


@intrinsic
def _bits(typingctx, x):
    """The IEEE bits of a float64, as an int64 (a bit cast, vectorisable)."""
    if x != types.float64:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(types.int64))

    return types.int64(types.float64), codegen


@intrinsic
def _float_of_bits(typingctx, b):
    """The float64 whose IEEE bits are the int64 ``b``."""
    if b != types.int64:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))

    return types.float64(types.int64), codegen


@njit(cache=True, _nrt=False, inline="always")
def rng_next(rng, stream):
    """xorshift64* step on ``rng[stream]``; returns the next 64-bit output."""
    x = rng[stream]
    x ^= x >> _S12
    x ^= x << _S25
    x ^= x >> _S27
    rng[stream] = x
    return x * _MULT


@njit(cache=True, _nrt=False, inline="always")
def rng_uniform(rng, stream):
    """A float in [0, 1) with 53 random bits."""
    return float(rng_next(rng, stream) >> _S11) * _TWO53_INV


@njit(cache=True, _nrt=False, inline="always")
def _step(x):
    """One xorshift64* step on the state ``x`` held in a register: (new state, uniform)."""
    x ^= x >> _S12
    x ^= x << _S25
    x ^= x >> _S27
    return x, float((x * _MULT) >> _S11) * _TWO53_INV


@njit(cache=True, _nrt=False, inline="always")
def _cos_sin(t):
    """cos(t) and sin(t) for 0 <= t < 2 pi by polynomials (error < 2e-15); without branches,
    so that a loop over many angles is vectorised."""
    # k = the nearest multiple of pi/2, 0..4, kept a float (as the integer is, exactly): a
    # conversion to an integer has no vector form here and would keep the loop scalar
    k = np.floor(t * _TWO_OVER_PI + 0.5)
    x = (t - k * _PIO2_HI) - k * _PIO2_LO
    z = x * x
    s = x + x * z * (_S3 + z * (_S5 + z * (_S7 + z * (_S9 + z * (_S11C + z * (_S13 + z * _S15))))))
    c = 1.0 + z * (
        _C2 + z * (_C4 + z * (_C6 + z * (_C8 + z * (_C10 + z * (_C12 + z * (_C14 + z * _C16))))))
    )
    q = k - 4.0 if k >= 4.0 else k  # the quadrant: (cos, sin) = (c, s), (-s, c), (-c, -s), (s, -c)
    odd = (q == 1.0) | (q == 3.0)
    a = s if odd else c
    b = c if odd else s
    return (-1.0 if (q == 1.0) | (q == 2.0) else 1.0) * a, (-1.0 if q >= 2.0 else 1.0) * b


@njit(cache=True, _nrt=False, inline="always")
def jitter_of(r, t, approx, cosine, jitter_cycles):
    """``floor(r * cos(t) * jitter_cycles + 0.5)`` (``sin`` when not ``cosine``) as with libm's
    cos or sin, from ``approx``, the polynomial's value: it decides unless the result lies
    within the guard of an integer, where libm is called."""
    y = r * approx * jitter_cycles + 0.5
    f = np.floor(y)
    d = y - f
    tol = (jitter_cycles + abs(y)) * _GUARD
    if d < tol or d > 1.0 - tol:
        f = np.floor(r * (np.cos(t) if cosine else np.sin(t)) * jitter_cycles + 0.5)
    return np.int64(f)


@njit(cache=True, _nrt=False, inline="always")
def _log(u):
    """ln(u) for normal 0 < u < 1 by a series (relative error < 1e-15, a test checks), without
    branches, so that a loop over many is vectorised: u = 2^e m with sqrt(2)/2 <= m < sqrt(2),
    ln u = e ln 2 + 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172 (terms to s^21)."""
    b = _bits(u)
    e = (b >> 52) - 1023
    m = _float_of_bits((b & _MANTISSA) | _EXP_ONE)
    big = m > _SQRT2
    m = m * 0.5 if big else m
    k = np.float64(e + 1 if big else e)
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    p = 1.0 / 19.0 + z / 21.0
    for c in (1.0 / 17.0, 1.0 / 15.0, 1.0 / 13.0, 1.0 / 11.0, 1.0 / 9.0, 1.0 / 7.0, 1.0 / 5.0):
        p = c + z * p
    p = z * (1.0 / 3.0 + z * p)
    return k * _LN2_HI + (k * _LN2_LO + 2.0 * (s + s * p))


@njit(cache=True, _nrt=False, inline="always")
def _rounded(y, jitter_cycles):
    """``floor(y)`` as a float, or NaN when ``y`` lies within the guard of an integer (as
    ``jitter_of`` judges it): a select, not a branch, so that a loop over many is vectorised."""
    f = np.floor(y)
    d = y - f
    tol = (jitter_cycles + abs(y)) * _GUARD
    return np.nan if (d < tol) | (d > 1.0 - tol) else f


@njit(cache=True, _nrt=False)
def noise_block(out, off, n, rng, spare, jitter_cycles, outlier_probability, outlier_cycles, work):
    """The noise of the next ``n`` loads into ``out[off:off + n]``, drawn as load by load:
    per load, a new Box-Muller pair (``u1``, ``u2``) unless the previous pair's sine is
    pending, then the outlier's uniform. The stream is drawn first, then the angles' cosines
    and sines in one vectorised loop, then the radii (``_log``) and the rounding in another
    (libm for the few near a boundary), then each load's term.
    ``work``: float64[5, >= n] (the pairs' first uniforms, angles, cosines, sines, outlier
    uniforms)."""
    jit, p = jitter_cycles, outlier_probability
    carried = jit > 0.0 and spare[0] != 0.0
    x, m, pending = rng[NOISE_STREAM], 0, carried
    for t in range(n):
        if jit > 0.0:
            if pending:
                pending = False
            else:
                x, u1 = _step(x)
                x, u2 = _step(x)
                work[0, m], work[1, m] = max(u1, 1e-300), 2.0 * np.pi * u2
                m, pending = m + 1, True
        if p > 0.0:
            x, u = _step(x)
            work[4, t] = u
    rng[NOISE_STREAM] = x
    for i in range(m):
        work[2, i], work[3, i] = _cos_sin(work[1, i])
    if jit > 0.0:
        # the pairs' rounded cosine and sine terms in place of the polynomials, from the radii
        # by the series; NaN where libm decides (near a rounding boundary), then those few by
        # libm (its radius too)
        for i in range(m):
            r = np.sqrt(-2.0 * _log(work[0, i]))
            work[2, i] = _rounded(r * work[2, i] * jit + 0.5, jit)
            work[3, i] = _rounded(r * work[3, i] * jit + 0.5, jit)
        for i in range(m):
            if work[2, i] != work[2, i] or work[3, i] != work[3, i]:
                r = np.sqrt(-2.0 * np.log(work[0, i]))
                if work[2, i] != work[2, i]:
                    work[2, i] = np.floor(r * np.cos(work[1, i]) * jit + 0.5)
                if work[3, i] != work[3, i]:
                    work[3, i] = np.floor(r * np.sin(work[1, i]) * jit + 0.5)
    # load t takes the carried sine (t = 0, when carried), else term k = t - carried: the
    # cosine of pair k // 2 when k is even, its sine when odd
    first = 0
    if carried and n > 0:
        c, s = _cos_sin(spare[2])
        out[off] = jitter_of(spare[1], spare[2], s, False, jit)
        if p > 0.0 and work[4, 0] < p:
            out[off] += outlier_cycles
        first = 1
    for t in range(first, n):
        extra = 0
        if jit > 0.0:
            k = np.uint64(t - first)
            extra = np.int64(work[np.uint64(2) + (k & np.uint64(1)), k >> np.uint64(1)])
        if p > 0.0 and work[4, t] < p:
            extra += outlier_cycles
        out[off + t] = extra
    # the pending sine: the last pair's when the block ends on a cosine term; a carried one
    # stays pending through an empty block
    if jit > 0.0 and (n - first) % 2 == 1:
        i = (n - first) // 2
        spare[0], spare[1], spare[2] = 1.0, np.sqrt(-2.0 * np.log(work[0, i])), work[1, i]
    elif not (carried and n == 0):
        spare[0] = 0.0


@njit(cache=True, _nrt=False)
def noise_fill(out, rng, spare, jitter_cycles, outlier_probability, outlier_cycles, work):
    """``out.shape[0]`` successive draws into ``out``, in blocks of ``work.shape[1]``."""
    total, block = out.shape[0], work.shape[1]
    for t0 in range(0, total, block):
        n = min(block, total - t0)
        noise_block(
            out, t0, n, rng, spare, jitter_cycles, outlier_probability, outlier_cycles, work
        )


@njit(cache=True, _nrt=False, inline="always")
def rng_normal(rng, stream, spare):
    """A standard normal variate by libm (Box-Muller; the second variate of a pair is kept in
    ``spare[:2]`` = [has_spare, value] and returned by the next call): the reference form."""
    if spare[0] != 0.0:
        spare[0] = 0.0
        return spare[1]
    u1 = rng_uniform(rng, stream)
    u2 = rng_uniform(rng, stream)
    if u1 < 1e-300:
        u1 = 1e-300
    r = np.sqrt(-2.0 * np.log(u1))
    spare[0], spare[1] = 1.0, r * np.sin(2.0 * np.pi * u2)
    return r * np.cos(2.0 * np.pi * u2)


@njit(cache=True, _nrt=False)
def noise_reference(out, rng, spare, jitter_cycles, outlier_probability, outlier_cycles):
    """``noise_fill`` by the plain formula, libm's cos and sin on every draw (for tests; its
    ``spare`` holds the pending variate itself, so it does not mix with ``noise_fill``'s)."""
    for k in range(out.shape[0]):
        extra = 0
        if jitter_cycles > 0.0:
            extra = np.int64(np.floor(rng_normal(rng, NOISE_STREAM, spare) * jitter_cycles + 0.5))
        if outlier_probability > 0.0 and rng_uniform(rng, NOISE_STREAM) < outlier_probability:
            extra += outlier_cycles
        out[k] = extra
