"""Keeping NVLink multicast off on shared hosts.

A program that creates NVLink multicast objects (cuMulticastCreate; NCCL's NVLink SHARP, NVLS)
can put a host's GPUs out of service for its other users. gpudissect creates none and runs no
NCCL; these variables keep NCCL's multicast and multi-node NVLink paths off all the same, in
every process the workflow starts (workflow/rules/common.smk sets them for the run; every sweep
and the CUDA backend set them again before the CUDA driver starts)."""

from __future__ import annotations

import os
from collections.abc import MutableMapping

NCCL_MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",  # NVLink SHARP (multicast objects)
    "NCCL_NVLSTREE_ENABLE": "0",  # its tree variant
    "NCCL_MNNVL_ENABLE": "0",  # multi-node NVLink (imports fabric handles)
}


def keep_multicast_off(env: MutableMapping[str, str] = os.environ) -> None:
    """Set every variable of NCCL_MULTICAST_OFF in `env` (the process environment)."""
    env.update(NCCL_MULTICAST_OFF)
