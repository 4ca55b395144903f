"""Spikes of one Thread-Latency sweep (Lashgar, Salehi & Baniasadi, Sec. 3.2 and 5; steps 2
and 3 of `analysis.requests.requests`): the paper's three-point variance curve and the runs of it
above the noise floor, each named by the last thread count before its largest latency rise and
classed as saturation, serialisation or merge overflow. Sees only a latency curve.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...exceptions import AnalysisError

MIN_COUNTS = 4  # thread counts a sweep needs for its variance curve to tell a spike from noise


def variance3(latency: np.ndarray) -> np.ndarray:
    """The paper's 3-point unbiased variance; NaN at both ends."""
    x = np.asarray(latency, dtype=np.float64)
    v = np.full(x.shape, np.nan)
    if x.size >= 3:
        w = np.stack([x[:-2], x[1:-1], x[2:]])
        v[1:-1] = w.var(axis=0, ddof=1)
    return v


@dataclass(frozen=True)
class Spike:
    threads: int  # last thread count before the rise (the paper's reading)
    next_threads: int  # first thread count after it
    jump_cycles: float
    peak_variance: float
    kind: str  # "saturation" | "serialisation" | "merge_overflow"


@dataclass
class SpikeDetector:
    """`fit(threads, latency, merge_threads=1) -> self`; `.spikes`, `.saturation`."""

    min_jump_fraction: float = 0.25
    noise_factor: float = 8.0
    spikes: list[Spike] = field(default_factory=list)
    baseline_cycles: float = float("nan")
    noise_cycles: float = float("nan")

    def fit(self, threads, latency, *, merge_threads: int = 1) -> SpikeDetector:
        x = np.asarray(threads, dtype=np.int64)
        y = np.asarray(latency, dtype=np.float64)
        if x.size != y.size or x.size < MIN_COUNTS:
            raise AnalysisError(f"a sweep needs >= {MIN_COUNTS} thread counts, got {x.size}")
        d = np.diff(y)
        self.baseline_cycles = float(y[0])
        self.noise_cycles = max(1.4826 * float(np.median(np.abs(d - np.median(d)))), 1.0)
        v = variance3(y)
        floor = (self.noise_factor * self.noise_cycles) ** 2 / 3.0
        above = np.nan_to_num(v, nan=0.0) > floor
        self.spikes = []
        i = 0
        while i < x.size:
            if not above[i]:
                i += 1
                continue
            j = i
            while j + 1 < x.size and above[j + 1]:
                j += 1
            # the run covers points i..j; its steps are d[i-1 .. j] (between neighbours)
            lo, hi = max(i - 1, 0), min(j, d.size - 1)
            k = lo + int(np.argmax(d[lo : hi + 1]))
            jump = float(d[k])
            if jump > 0:
                if jump < self.min_jump_fraction * self.baseline_cycles:
                    kind = "serialisation"
                elif x[k + 1] <= merge_threads:
                    kind = "merge_overflow"
                else:
                    kind = "saturation"
                peak = float(np.nanmax(v[i : j + 1]))
                self.spikes.append(Spike(int(x[k]), int(x[k + 1]), jump, peak, kind))
            i = j + 1
        return self

    @property
    def saturation(self) -> Spike | None:
        return next((s for s in self.spikes if s.kind == "saturation"), None)
