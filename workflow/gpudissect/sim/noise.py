"""Seeded timing noise and the random streams of the simulator.

Real P-chase latencies jitter by a few cycles and, rarely, jump by hundreds (an interrupt, a
refresh). The simulator adds rounded Gaussian jitter with standard deviation ``jitter_cycles``
to every access and, with probability ``outlier_probability``, ``outlier_cycles`` more. The
same seed gives the same noise, access for access.

Random numbers come from xorshift64* (``_noise_kernels.rng_*``), seeded through splitmix64. A device
has two independent streams: 0 for replacement decisions, 1 for noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _noise_kernels as K

_MASK64 = (1 << 64) - 1
REPLACEMENT_STREAM, NOISE_STREAM = 0, 1


@dataclass(frozen=True)
class NoiseSpec:
    """The ``noise:`` block. All zero (the default) means noiseless latencies."""

    jitter_cycles: float = 0.0
    outlier_probability: float = 0.0
    outlier_cycles: int = 0


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def seed_states(seed: int) -> np.ndarray:
    """The two xorshift64* states (replacement, noise) for ``seed``; never zero."""
    states = []
    for stream in (REPLACEMENT_STREAM, NOISE_STREAM):
        x = _splitmix64(((int(seed) & _MASK64) * 2 + stream) & _MASK64)
        states.append(x or 0x2545F4914F6CDD1D)
    return np.array(states, dtype=np.uint64)


class Rng:
    """One xorshift64* stream, the same generator the kernels use (for the Python models)."""

    def __init__(self, *, seed: int, stream: int = REPLACEMENT_STREAM) -> None:
        self.seed, self.stream = seed, stream
        self.reset()

    def reset(self) -> None:
        """Back to the first number of the stream."""
        self.state = seed_states(self.seed)

    def uniform(self) -> float:
        """A float in [0, 1)."""
        return K.rng_uniform(self.state, self.stream)


class Noise:
    """Per-access noise in cycles (for use outside the engine, which draws it in its kernel)."""

    def __init__(self, spec: NoiseSpec, *, seed: int) -> None:
        self.spec, self.seed = spec, seed
        self.reset()

    def reset(self) -> None:
        """Back to the first draw for this seed."""
        self.state = seed_states(self.seed)
        self.spare = np.zeros(3, dtype=np.float64)

    def draw(self) -> int:
        """Noise for one access, in cycles (may be negative: jitter is centred on zero)."""
        return int(self.sample(1)[0])

    def sample(self, n: int) -> np.ndarray:
        """``n`` successive draws as an int64 array."""
        out = np.empty(int(n), dtype=np.int64)
        s = self.spec
        K.noise_fill(
            out,
            self.state,
            self.spare,
            float(s.jitter_cycles),
            float(s.outlier_probability),
            int(s.outlier_cycles),
            np.empty((5, min(max(int(n), 1), 4096)), dtype=np.float64),
        )
        return out
