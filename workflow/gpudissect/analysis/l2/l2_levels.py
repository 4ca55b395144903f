"""Latency levels of an L2 footprint sweep: near partition, far partition, DRAM.

A Hopper L2 is two partitions (the H100: two of about 25 MiB). Data that one SM uses is kept in
the partition near it (replicated there) while it fits, so a footprint sweep shows three
plateaus of latency against footprint: near-partition hits, then far-partition hits once the
data no longer fits one partition, then DRAM once it no longer fits the L2. This reading is this
project's (TPDS Sec. 4.6 is the paper's L2 footprint section; its GPUs have one L2 distance).

`PartitionLevels` reads the plateaus between the confirmed steps of median latency and decides
whether they show such a far level. The margins it requires (documented on the class, and
tested with seeded synthetic sweeps) are what keeps it from calling a mixture a level:

- a plateau between the first and the last is a far level only if nearly every access in it is
  slower than a near hit (its `far_quantile` above the `near_quantile` of the first plateau's
  footprints before its last, which may already spill part of its accesses past the step). A
  footprint just past a cache that replaces at random, or past a set-hashed one, still hits on
  part of its accesses: its plateau holds near hits and is a transition, not a level;
- the far level and the last plateau must be separated: each one's median outside the other's
  interquartile range (far- and DRAM-latencies overlap access by access, so a per-access margin
  cannot be asked there). Neighbouring middle plateaus that are not separated so are one level
  (the change points split a slowly rising level); a middle plateau not separated from the last
  is a transition into DRAM;
- exactly one far level, and the last plateau the highest (above every footprint's median
  before it) and free of near hits too. Two distinct middle levels (near, far, DRAM and a
  later TLB or other level) are not read.

The reading assumes that the last plateau is DRAM (the sweep reaches past the L2). A TLB level
cannot make a plateau of the median in this sweep: at a stride of S bytes a TLB miss touches one
access in page/S per pass, so it moves the median only with pages of at most 2 S bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..common.sweep_steps import Step

MIB = 1 << 20


def mib(n: float) -> str:
    return f"{n / MIB:g} MiB"


@dataclass(frozen=True, eq=False)
class Plateau:
    """The footprints x[start:stop] between two steps, with their per-access latencies."""

    start: int
    stop: int
    sizes: np.ndarray  # footprints (bytes) of the plateau
    medians: np.ndarray  # per-footprint median latency
    samples: np.ndarray  # pooled per-access latencies
    counts: np.ndarray  # accesses of each footprint, in order (they make up `samples`)

    @property
    def level_cycles(self) -> float:
        """The median of the per-footprint medians: a transition footprint at either edge moves
        it less than it moves the pooled median."""
        return float(np.median(self.medians))

    def q(self, p: float) -> float:
        return float(np.quantile(self.samples, p))

    @property
    def first_bytes(self) -> int:
        return int(self.sizes[0])

    @property
    def last_bytes(self) -> int:
        return int(self.sizes[-1])

    def interior(self) -> Plateau:
        """The plateau without its last footprint, where it has more than one: the footprint
        just before a step may already spill part of its accesses to the next level (an H200's
        near plateau ended at 30 MiB with 31 % of its accesses far)."""
        if len(self.sizes) < 2:
            return self
        return Plateau(
            start=self.start,
            stop=self.stop - 1,
            sizes=self.sizes[:-1],
            medians=self.medians[:-1],
            samples=self.samples[: self.samples.size - int(self.counts[-1])],
            counts=self.counts[:-1],
        )

    def joined(self, other: Plateau) -> Plateau:
        return Plateau(
            start=self.start,
            stop=other.stop,
            sizes=np.concatenate([self.sizes, other.sizes]),
            medians=np.concatenate([self.medians, other.medians]),
            samples=np.concatenate([self.samples, other.samples]),
            counts=np.concatenate([self.counts, other.counts]),
        )

    def describe(self) -> str:
        return (
            f"{mib(self.first_bytes)}-{mib(self.last_bytes)} ({len(self.sizes)} footprints, "
            f"{self.samples.size} accesses): median {self.level_cycles:.0f} cycles, IQR "
            f"{self.q(0.25):.0f}-{self.q(0.75):.0f}, p10-p90 {self.q(0.1):.0f}-{self.q(0.9):.0f}"
        )

    def as_dict(self, role: str) -> dict:
        return {
            "role": role,
            "first_footprint_bytes": self.first_bytes,
            "last_footprint_bytes": self.last_bytes,
            "footprints": len(self.sizes),
            "accesses": int(self.samples.size),
            "median_cycles": self.level_cycles,
            "p10_cycles": self.q(0.1),
            "p25_cycles": self.q(0.25),
            "p75_cycles": self.q(0.75),
            "p90_cycles": self.q(0.9),
        }


def plateaus(
    sizes: np.ndarray, groups: Sequence[np.ndarray], steps: Sequence[Step]
) -> list[Plateau]:
    """The plateaus between `steps` (their `index` is the first footprint of the next one)."""
    bounds = [0, *(s.index for s in steps), len(sizes)]
    out = []
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        out.append(
            Plateau(
                start=lo,
                stop=hi,
                sizes=np.asarray(sizes[lo:hi]),
                medians=np.array([np.median(g) for g in groups[lo:hi]], dtype=float),
                samples=np.concatenate([np.asarray(g, dtype=float) for g in groups[lo:hi]]),
                counts=np.array([len(g) for g in groups[lo:hi]], dtype=int),
            )
        )
    return out


def separated(lower: Plateau, upper: Plateau) -> bool:
    """Each plateau's median lies outside the other's interquartile range."""
    return upper.q(0.5) > lower.q(0.75) and lower.q(0.5) < upper.q(0.25)


@dataclass(frozen=True, eq=False)
class Levels:
    near: Plateau
    far: Plateau
    dram: Plateau
    near_step: Step  # the first step: the near partition stops holding the data
    last_step: Step  # the last step: the data no longer fits the L2
    transitions: tuple[Plateau, ...] = field(default=())

    def roles(self) -> list[tuple[Plateau, str]]:
        named = [(self.near, "near"), (self.far, "far"), (self.dram, "dram")]
        named += [(t, "transition") for t in self.transitions]
        return sorted(named, key=lambda pr: pr[0].start)


class PartitionLevels:
    """Near, far and DRAM levels from the plateaus of a footprint sweep, or why not.

    near_quantile, far_quantile: a middle plateau is a far level only if its `far_quantile`
    (p10) lies above the near hits' top, i.e. nearly every access in it is slower than a near
    hit. The near hits' top is the first plateau's `near_quantile` (p90), or its upper Tukey fence
    (p75 + 1.5 IQR) where that is lower: a near plateau whose footprints already spill a tenth of
    their accesses to the far partition (an H100 run read its p90 at 469 cycles between near hits
    of 302 and far ones of 520) does not hide the far level behind that tail.
    `fit(sizes, groups, steps) -> self`; then `.levels` (a `Levels`) or `.reason` (why the sweep
    shows no far level) and `.plateaus_`.
    """

    def __init__(self, *, near_quantile: float = 0.9, far_quantile: float = 0.1) -> None:
        self.near_quantile = near_quantile
        self.far_quantile = far_quantile

    def fit(
        self, sizes: np.ndarray, groups: Sequence[np.ndarray], steps: Sequence[Step]
    ) -> PartitionLevels:
        self.levels: Levels | None = None
        self.reason: str | None = None
        rising = [s for s in steps if s.rise > 0]
        self.plateaus_ = plats = plateaus(sizes, groups, rising)
        listing = "; ".join(p.describe() for p in plats)
        if len(plats) < 3:
            self.reason = (
                f"{len(plats)} latency plateau(s) ({listing}): a far level needs a plateau "
                "between the near hits and the last (DRAM) plateau"
            )
            return self
        levels = [p.level_cycles for p in plats]
        if any(b <= a for a, b in zip(levels, levels[1:], strict=False)):
            self.reason = f"the plateau medians do not rise from one to the next ({listing})"
            return self
        first, last = plats[0], plats[-1]
        highest_before = max(float(m) for p in plats[:-1] for m in p.medians)
        if highest_before >= last.level_cycles:
            self.reason = (
                f"the last plateau ({last.describe()}) is not above every footprint before it "
                f"(a median of {highest_before:.0f} cycles)"
            )
            return self
        near = first.interior()
        fence = near.q(0.75) + 1.5 * (near.q(0.75) - near.q(0.25))
        near_top = min(near.q(self.near_quantile), fence)
        if last.q(self.far_quantile) <= near_top:
            self.reason = (
                f"the last plateau still holds near hits (p{self.far_quantile * 100:.0f} "
                f"{last.q(self.far_quantile):.0f} cycles, not above the near hits' top of "
                f"{near_top:.0f}; plateaus: {listing})"
            )
            return self
        middle = [plats[1]]
        for p in plats[2:-1]:
            middle[-1:] = [middle[-1], p] if separated(middle[-1], p) else [middle[-1].joined(p)]
        holds_near = [m for m in middle if m.q(self.far_quantile) <= near_top]
        into_dram = [m for m in middle if m not in holds_near and not separated(m, last)]
        far = [m for m in middle if m not in holds_near and m not in into_dram]
        if len(far) != 1:
            self.reason = self._why_not(far, holds_near, into_dram, near_top, listing)
            return self
        steps_at = {s.index: s for s in rising}
        self.levels = Levels(
            near=first,
            far=far[0],
            dram=last,
            near_step=steps_at[plats[1].start],
            last_step=steps_at[last.start],
            transitions=tuple(holds_near + into_dram),
        )
        return self

    def _why_not(self, far, holds_near, into_dram, near_top: float, listing: str) -> str:
        if len(far) > 1:
            return (
                f"{len(far)} distinct levels lie between the near hits and the last plateau "
                f"({'; '.join(f.describe() for f in far)}); the near/far/DRAM reading assumes one"
            )
        parts = []
        if holds_near:
            parts.append(
                f"{len(holds_near)} middle plateau(s) still hold near hits (p"
                f"{self.far_quantile * 100:.0f} "
                + ", ".join(f"{m.q(self.far_quantile):.0f}" for m in holds_near)
                + f" cycles, not above the near hits' top of {near_top:.0f}: their "
                f"p{self.near_quantile * 100:.0f}, or p75 + 1.5 IQR where lower): a gradual "
                "transition, not a level of its own"
            )
        if into_dram:
            parts.append(
                f"{len(into_dram)} middle plateau(s) are not separated from the last one "
                "(medians inside each other's IQR): a transition into DRAM"
            )
        return "; ".join(parts) + f" (plateaus: {listing})"
