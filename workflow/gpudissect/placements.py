"""Footprints walked at several placements (the `l2` sweep's `placements`): which records stand
for each footprint. Shared by the analysis and the figures, which read the same trace."""

from __future__ import annotations

import pandas as pd


def fastest_placements(data: pd.DataFrame) -> tuple[pd.DataFrame, dict[int, int]]:
    """The records of each footprint's fastest placement (the launch, `point`, with the lowest
    median latency), and how many placements each footprint walked at more than one had.

    One placement of a footprint that fits the cache can spill where another does not (the
    physical pages behind it hash unevenly onto the cache's slices and sets); no placement of
    a footprint past the cache fits. The fastest placement is the footprint's reading."""
    medians = data.groupby(["array_bytes", "point"])["latency_cycles"].median()
    fastest = {point for _, point in medians.groupby(level=0).idxmin()}
    counts = medians.groupby(level=0).size()
    walked_again = {int(size): int(n) for size, n in counts.items() if n > 1}
    return data[data["point"].isin(fastest)], walked_again
