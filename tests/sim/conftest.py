"""Helpers for the simulator tests: build small profiles as dicts, write and load them."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from gpudissect.sim import SimGPU, load_profile

PROFILES = Path(__file__).parent / "profiles"


def base_profile(**blocks) -> dict:
    """A minimal valid profile; keyword arguments replace top-level blocks."""
    doc = {
        "profile_version": 1,
        "name": "test",
        "clocks": {"sm_mhz": 1000, "memory_mhz": 2000},
        "sms": 1,
        "max_warps_per_sm": 32,
        "dram": {"latency_cycles": 100},
        "caches": {
            "l1d": {"size_bytes": 1024, "line_bytes": 32, "ways": 4, "hit_latency_cycles": 1}
        },
        "paths": {"ca": ["l1d"]},
    }
    doc.update(copy.deepcopy(blocks))
    return doc


@pytest.fixture(name="base_profile")
def base_profile_fixture():
    """The ``base_profile`` builder: base_profile(**blocks) -> profile dict."""
    return base_profile


@pytest.fixture
def profiles_dir() -> Path:
    """tests/sim/profiles."""
    return PROFILES


@pytest.fixture
def write_profile(tmp_path):
    """write_profile(doc) -> path of the YAML file holding ``doc``."""
    counter = iter(range(10**6))

    def write(doc: dict) -> Path:
        path = tmp_path / f"profile_{next(counter)}.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return path

    return write


@pytest.fixture
def make_gpu(write_profile):
    """make_gpu(doc, seed=0) -> SimGPU on the profile ``doc``."""

    def make(doc: dict, *, seed: int = 0) -> SimGPU:
        return SimGPU(load_profile(write_profile(doc)), seed=seed)

    return make
