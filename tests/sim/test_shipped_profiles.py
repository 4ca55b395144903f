"""Every shipped device profile (config/devices/*.yaml) loads and runs on each of its paths."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpudissect.sim import SimGPU, load_profile

DEVICES = sorted((Path(__file__).parents[2] / "config" / "devices").glob("*.yaml"))


@pytest.mark.skipif(not DEVICES, reason="no shipped profiles yet")
@pytest.mark.parametrize("path", DEVICES, ids=[p.stem for p in DEVICES])
def test_shipped_profile_loads_and_chases(path):
    profile = load_profile(path)
    assert profile.name and profile.paths
    gpu = SimGPU(profile, seed=0)
    chain = ((np.arange(4096) + 8) % 4096).astype(np.uint32)  # 16 KB, 32 B stride
    for load_path in gpu.paths:
        gpu.reset()
        lat, ind = gpu.chase(load_path, chain, element_bytes=4, base_address_bytes=0,
                             start_index=0, warmup_steps=512, record_steps=2048)  # fmt: skip
        assert len(lat) == 2048 and ind[0] == 8 * 513 % 4096
        assert lat.min() > 0
