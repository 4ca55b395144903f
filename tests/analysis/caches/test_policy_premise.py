"""The replacement-policy walk checks its own premise: ways + 1 lines of one set, walked
cyclically, miss at least once per cycle whatever the policy."""

import numpy as np
import pandas as pd

from gpudissect.analysis.caches import caches
from gpudissect.analysis.caches.cache_levels import Classifier

CLASSIFIER = Classifier(hit_latency_cycles=50.0, threshold_cycles=150.0, outlier_rate=1e-3)


def _policy_rows(latencies: list[np.ndarray], lines: int, line_bytes: int = 128) -> pd.DataFrame:
    frames = []
    for point, lat in enumerate(latencies):
        n = lat.size
        frames.append(
            pd.DataFrame(
                {
                    "phase": "policy_a",
                    "point": point,
                    "step": np.arange(n),
                    "address_bytes": (np.arange(n) % lines) * line_bytes,
                    "latency_cycles": lat,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def test_lines_that_fit_when_walked_alone_are_not_one_set():
    # 5 lines (4 ways + 1): after the cold cycle every access hits -> not one set
    lat = np.r_[np.full(5, 300), np.full(95, 50)]
    policy, freq, _ = caches._policy(_policy_rows([lat] * 3, 5), CLASSIFIER, 128)
    assert policy["value"] is None and "not one set" in policy["undetermined"]
    assert freq["value"] is None


def test_an_lru_set_overflowing_by_one_is_read_as_lru():
    # 5 lines, 4-way LRU: every access of the cyclic walk misses (the premise holds)
    lat = np.full(100, 300)
    policy, _, _ = caches._policy(_policy_rows([lat] * 3, 5), CLASSIFIER, 128)
    assert policy["value"] in ("lru", "fifo") or "cannot separate" in policy["undetermined"]
