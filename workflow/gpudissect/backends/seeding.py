"""Per-point noise seeds of the simulator backend (shared by its handler modules)."""

from __future__ import annotations

import numpy as np


def point_seed(seed: int, point: int) -> int:
    """Noise seed of one sweep point: results do not depend on the order points run in."""
    return int(np.random.SeedSequence([seed, point]).generate_state(1)[0])
