"""The mechanistic GPU memory-hierarchy simulator (the `sim` backend's engine).

Addresses go through set-index functions, replacement policies, TLBs, banks and request tables;
latencies come out. ``load_profile`` reads a device profile (config/README.md, "Device
profiles"); ``SimGPU`` runs loads and fine-grained P-chases on it.
"""

from .profile import DeviceProfile, load_profile, profile_sha256

__all__ = ["DeviceProfile", "SimGPU", "load_profile", "profile_sha256"]


def __getattr__(name: str):
    # the engine (and numba) loads on first use: the bank and throughput models do not need it
    if name == "SimGPU":
        from .engine import SimGPU

        return SimGPU
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
