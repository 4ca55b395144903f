"""One series of the `tlb_mappings` trace (one layout, one stride), held walk by walk.

The onset readings of a series (`tlb_mappings.threshold_onsets`, `tlb_shift.stride_onset`)
read each walk on its own: its latencies in step order, its misses per traversal at or above a
level, its median latency per address, and the rises of those medians against the next
shorter walk. A `SeriesWalks` keeps what it has read of each walk (and of each pair of
neighbouring walks), so that a sweep that reads a series after every round of walks reads each
walk once; the analysis builds one from a series' rows (`of_frame`) and reads it the same way.

Sees only the trace's rows (or the sweep's walks, which become them).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .tlb_levels import Level, at_or_above, misses_per_traversal


class SeriesWalks:
    """The walks of one series by length (elements): each walk's positions and latencies in
    step order, its first record (which also times the start of the launch) included."""

    def __init__(self, stride_bytes: int) -> None:
        self.stride_bytes = int(stride_bytes)
        self._records: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._medians: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._misses: dict[tuple[tuple[Level, ...], int, int], float] = {}
        # (shorter, longer walk) -> the addresses both hold and the rise of their medians
        # (`tlb_shift.stride_onset`)
        self.pairs: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def of_frame(cls, df: pd.DataFrame) -> SeriesWalks:
        """The walks of one series' rows (one layout and stride: one walk per length, its
        steps from 0, as the trace records them)."""
        walks = cls(int(df["stride_bytes"].iloc[0]))
        elements = df["elements"].to_numpy(np.int64)
        order = np.lexsort((df["step"].to_numpy(np.int64), elements))
        elements = elements[order]
        position = df["position"].to_numpy(np.int64)[order]
        latency = df["latency_cycles"].to_numpy(np.float64)[order]
        bounds = [0, *(np.flatnonzero(np.diff(elements)) + 1).tolist(), elements.size]
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            walks.add(int(elements[a]), position[a:b], latency[a:b])
        return walks

    def add(self, elements: int, positions: np.ndarray, latency_cycles: np.ndarray) -> None:
        """One walk of `elements` elements, its records in step order."""
        self._records[int(elements)] = (
            np.asarray(positions, dtype=np.int64),
            np.asarray(latency_cycles, dtype=np.float64),
        )

    def __contains__(self, elements: int) -> bool:
        return elements in self._records

    def __len__(self) -> int:
        return len(self._records)

    def lengths(self) -> list[int]:
        return sorted(self._records)

    def positions(self, elements: int) -> np.ndarray:
        """The walk's positions in step order, the first record left out."""
        return self._records[elements][0][1:]

    def latencies(self, elements: int) -> np.ndarray:
        """The walk's latencies in step order, the first record left out."""
        return self._records[elements][1][1:]

    def misses(self, elements: int, levels: list[Level], k: int) -> float:
        """Median accesses per traversal at or above level k of `levels`."""
        key = (tuple(levels), k, elements)
        if key not in self._misses:
            slow = at_or_above(self.latencies(elements), levels, k)
            self._misses[key] = misses_per_traversal(slow, elements)[0]
        return self._misses[key]

    def medians(self, elements: int) -> tuple[np.ndarray, np.ndarray]:
        """The walk's addresses (ascending) and each one's median latency over its records
        (the first left out): the middle one, or the mean of the middle two."""
        if elements not in self._medians:
            position, latency = self.positions(elements), self.latencies(elements)
            if position.size == 0:
                return position, latency
            order = np.lexsort((latency, position))
            position, latency = position[order], latency[order]
            starts = np.flatnonzero(np.r_[True, position[1:] != position[:-1]])
            counts = np.diff(np.r_[starts, position.size])
            lo, hi = starts + (counts - 1) // 2, starts + counts // 2
            self._medians[elements] = (position[starts], (latency[lo] + latency[hi]) / 2)
        return self._medians[elements]
