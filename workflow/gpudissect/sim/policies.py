"""Replacement policies, one object per cache set (the gem5 / pycachesim object API).

A policy sees way numbers only: ``touch(way)`` on a hit, ``insert(way)`` when a line is filled,
``victim() -> way`` when the set is full and a line must go, ``reset()`` for a cold set. Filling
invalid ways first is the cache's job, not the policy's, so every policy behaves the same on a
cold set.

The numba kernels (``_kernels._victim`` / ``_touch``) implement the same rules on flat arrays;
the random policies draw from the same xorshift64* stream (``noise.Rng``), so a Python cache and
the compiled engine replace the same ways given the same seed.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import _kernels as K

POLICY_CODES = {
    "lru": K.LRU,
    "fifo": K.FIFO,
    "random": K.RANDOM,
    "plru": K.PLRU,
    "weighted_random": K.WEIGHTED,
    "srrip": K.SRRIP,
}
POLICY_KINDS = tuple(POLICY_CODES)


@dataclass(frozen=True)
class PolicySpec:
    """The ``policy:`` block: ``kind`` and, for ``weighted_random``, one weight per way."""

    kind: str = "lru"
    weights: tuple[float, ...] = ()


class Policy:
    """Base class of a per-set replacement policy over ``ways`` ways."""

    def __init__(self, *, ways: int) -> None:
        self.ways = ways
        self.reset()

    def reset(self) -> None:
        """Forget all history (a cold set)."""

    def touch(self, way: int) -> None:
        """The line in ``way`` was hit."""

    def insert(self, way: int) -> None:
        """A line was just filled into ``way``."""

    def victim(self) -> int:
        """The way to replace in a full set."""
        raise NotImplementedError


class LruPolicy(Policy):
    """Least recently used: the way touched or filled longest ago goes."""

    def reset(self) -> None:
        self._clock, self._stamp = 0, [0] * self.ways

    def touch(self, way: int) -> None:
        self._clock += 1
        self._stamp[way] = self._clock

    insert = touch

    def victim(self) -> int:
        return min(range(self.ways), key=self._stamp.__getitem__)


class FifoPolicy(LruPolicy):
    """First in, first out: hits do not refresh a line; the oldest fill goes."""

    def touch(self, way: int) -> None:
        pass

    def insert(self, way: int) -> None:
        LruPolicy.touch(self, way)


class RandomPolicy(Policy):
    """Uniformly random way (draws from ``rng.uniform()``)."""

    def __init__(self, *, ways: int, rng) -> None:
        self.rng = rng
        super().__init__(ways=ways)

    def victim(self) -> int:
        return min(int(self.rng.uniform() * self.ways), self.ways - 1)


class WeightedRandomPolicy(Policy):
    """Way ``k`` replaced with probability ``weights[k] / sum(weights)``.

    The Fermi L1 data cache replaces its four ways with probabilities 1/6, 1/2, 1/6, 1/6
    (TPDS section 4.5). A set with fewer ways than weights uses the first ``ways`` weights.
    """

    def __init__(self, *, ways: int, weights, rng) -> None:
        self.rng = rng
        self.cumulative = []
        total = 0.0
        for w in list(weights)[:ways]:
            total += float(w)
            self.cumulative.append(total)
        super().__init__(ways=ways)

    def victim(self) -> int:
        u = self.rng.uniform() * self.cumulative[-1]
        for way, edge in enumerate(self.cumulative[:-1]):
            if u < edge:
                return way
        return self.ways - 1


class TreePlruPolicy(Policy):
    """Tree pseudo-LRU over a power-of-two number of ways.

    Node ``n`` (heap numbering from 1) holds one bit: 0 = the victim is in the left half,
    1 = in the right half. A use turns every node on the way's path to point away from it.
    """

    def reset(self) -> None:
        self.bits = 0

    def touch(self, way: int) -> None:
        node, lo, size = 1, 0, self.ways
        while node < self.ways:
            half = size // 2
            if way < lo + half:
                self.bits |= 1 << node
                node = 2 * node
            else:
                self.bits &= ~(1 << node)
                node, lo = 2 * node + 1, lo + half
            size = half

    insert = touch

    def victim(self) -> int:
        node = 1
        while node < self.ways:
            node = 2 * node + ((self.bits >> node) & 1)
        return node - self.ways


class SrripPolicy(Policy):
    """Static re-reference interval prediction with hit priority (Jaleel et al., ISCA 2010),
    2-bit values: a filled line is predicted a long interval (2), a hit line a near one (0);
    the victim is the first way at the most distant value (3), after ageing every way of the
    set by one step as often as none is. Lines that hit outlive any number of lines touched
    once (scan resistance)."""

    def reset(self) -> None:
        self.rrpv = [K.RRPV_MAX] * self.ways

    def touch(self, way: int) -> None:
        self.rrpv[way] = 0

    def insert(self, way: int) -> None:
        self.rrpv[way] = K.RRPV_MAX - 1

    def victim(self) -> int:
        while True:
            for way, v in enumerate(self.rrpv):
                if v >= K.RRPV_MAX:
                    return way
            self.rrpv = [v + 1 for v in self.rrpv]


def make_policy(spec: PolicySpec, *, ways: int, rng=None) -> Policy:
    """A fresh per-set policy object; ``rng`` (``noise.Rng``) is needed by the random ones."""
    if spec.kind == "lru":
        return LruPolicy(ways=ways)
    if spec.kind == "fifo":
        return FifoPolicy(ways=ways)
    if spec.kind == "plru":
        return TreePlruPolicy(ways=ways)
    if spec.kind == "random":
        return RandomPolicy(ways=ways, rng=rng)
    if spec.kind == "srrip":
        return SrripPolicy(ways=ways)
    if spec.kind == "weighted_random":
        return WeightedRandomPolicy(ways=ways, weights=spec.weights, rng=rng)
    raise ValueError(f"unknown policy {spec.kind!r}; allowed: {', '.join(POLICY_KINDS)}")
