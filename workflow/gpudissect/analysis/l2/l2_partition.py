"""Which lines an SM reads near and which far, and the partition function over address bits.

Per SM, the latencies of its lines split into two groups (near and far: `l2_near_far.near_far`,
Otsu's split with a separation test). The far lines are then fitted by the best affine function
over GF(2) of the line's address bits `LOW_BIT`..`HIGH_BIT` (far = c XOR parity(address & m)):
for every mask m at once by a Walsh-Hadamard transform of the +-1 labels (the correlation of
the labels with each linear function), so the fit is exact, not greedy. A function is "linear"
when at most `LINEAR_TOLERANCE` of the lines disagree with it (timing noise misplaces a few).
Sees only latencies and addresses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .l2_near_far import near_far

LOW_BIT, HIGH_BIT = 7, 20  # the address bits a 2 MiB-aligned region of 128-B lines spans
LINEAR_TOLERANCE = 0.005  # share of lines a linear function may misplace


@dataclass(frozen=True)
class NearFar:
    """One SM's split: `far` per line (None when the latencies do not split) and the split's
    evidence."""

    far: np.ndarray | None
    near_cycles: float | None
    far_cycles: float | None
    evidence: str


def split_lines(latency_cycles: np.ndarray) -> NearFar:
    """Near and far lines of one SM from its per-line latencies (`l2_near_far.near_far`)."""
    q = near_far(latency_cycles)
    far_q = q.get("far_hit_latency_cycles", {})
    if far_q.get("value") is None:
        reason = far_q.get("undetermined", "")
        return NearFar(None, q["hit_latency_cycles"]["value"], None, reason)
    near, far = q["hit_latency_cycles"]["value"], far_q["value"]
    threshold = (near + far) / 2
    return NearFar(latency_cycles > threshold, near, far, far_q["evidence"])


def _walsh(values: np.ndarray) -> np.ndarray:
    """Fast Walsh-Hadamard transform of a length-2^k vector (no normalisation)."""
    w = values.astype(np.int64).copy()
    h = 1
    while h < w.size:
        w = w.reshape(-1, 2, h)
        w = np.stack([w[:, 0] + w[:, 1], w[:, 0] - w[:, 1]], axis=1).reshape(-1)
        h *= 2
    return w


@dataclass(frozen=True)
class AffineFit:
    mask: int  # over address bits (bit b of the address is bit b of the mask)
    constant: int
    mismatches: int  # lines the best affine function misplaces
    runner_up_mismatches: int  # the same of the second-best function
    lines: int

    @property
    def bits(self) -> list[int]:
        return [b for b in range(LOW_BIT, HIGH_BIT + 1) if self.mask >> b & 1]

    @property
    def linear(self) -> bool:
        return self.mismatches <= LINEAR_TOLERANCE * self.lines

    def predict(self, offsets_bytes: np.ndarray) -> np.ndarray:
        x = np.asarray(offsets_bytes, dtype=np.int64) & self.mask
        parity = np.zeros(x.shape, dtype=bool)
        for b in self.bits:
            parity ^= (x >> b & 1).astype(bool)
        return parity ^ bool(self.constant)


def fit_affine(offsets_bytes: np.ndarray, far: np.ndarray) -> AffineFit:
    """The affine function over bits LOW_BIT..HIGH_BIT that misplaces the fewest lines."""
    width = HIGH_BIT - LOW_BIT + 1
    x = (np.asarray(offsets_bytes, dtype=np.int64) >> LOW_BIT) & ((1 << width) - 1)
    signs = np.zeros(1 << width, dtype=np.int64)
    np.add.at(signs, x, np.where(far, -1, 1))
    w = _walsh(signs)  # w[m] = sum over lines of (-1)^(far XOR m.x)
    n = int(far.size)
    # the affine function (m, c) misplaces (n - (-1)^c w[m]) / 2 lines
    errors = np.minimum(n - w, n + w) // 2
    order = np.argsort(errors, kind="stable")
    best = int(order[0])
    constant = 0 if w[best] >= 0 else 1
    return AffineFit(
        mask=best << LOW_BIT,
        constant=constant,
        mismatches=int(errors[best]),
        runner_up_mismatches=int(errors[order[1]]),
        lines=n,
    )


def near_groups(near_sets: dict[int, np.ndarray], *, tolerance: float) -> list[list[int]]:
    """SMs whose near sets coincide (differ on at most `tolerance` of the lines), greedily in
    SM order."""
    groups: list[tuple[np.ndarray, list[int]]] = []
    for sm, near in near_sets.items():
        for ref, members in groups:
            if np.count_nonzero(ref != near) <= tolerance * near.size:
                members.append(sm)
                break
        else:
            groups.append((near, [sm]))
    return [members for _, members in groups]
