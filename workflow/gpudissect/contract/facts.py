"""What the driver says about a device, typed: the facts automatic sweep ranges start from.

Both backends give the same `DeviceFacts`: the `cuda` backend from the driver's device
attributes, the `sim` backend from what a driver would report of the twin (its profile's L2 size,
shared memory, SM count, memory size). They only set where a sweep looks; no analysis reads them
(an analysis sees traces only), and every trace records them in its provenance.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

CONST_MEMORY_BYTES = 65536  # CUDA's constant memory: 64 KiB on every compute capability


@dataclass(frozen=True)
class DeviceFacts:
    """Driver facts of one device; None where the driver (or the twin's profile) gives none."""

    source: str  # "driver" or "profile"
    name: str
    compute_capability: str | None
    sm_count: int
    max_threads_per_sm: int
    warp_size: int = 32
    l2_bytes: int | None = None
    shared_per_sm_bytes: int | None = None
    shared_per_block_optin_bytes: int | None = None
    const_memory_bytes: int = CONST_MEMORY_BYTES
    total_memory_bytes: int | None = None
    sm_clock_mhz: float | None = None
    memory_clock_mhz: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def facts_from_profile(profile: Any) -> DeviceFacts:
    """What a driver would report of a simulated twin (a `sim.profile.DeviceProfile`)."""
    l2 = profile.caches.get("l2")
    shared = profile.shared.size_bytes if profile.shared is not None else None
    optin = shared
    carveout = getattr(profile, "carveout", None)
    if carveout is not None:  # the driver reports the largest partition, and less per block
        shared, optin = carveout.max_shared_bytes, carveout.max_shared_per_block_bytes
    return DeviceFacts(
        source="profile",
        name=profile.gpu,
        compute_capability=profile.compute_capability,
        sm_count=profile.sms,
        max_threads_per_sm=32 * profile.max_warps_per_sm,
        l2_bytes=(l2.reported_size_bytes or l2.size_bytes) if l2 is not None else None,
        shared_per_sm_bytes=shared,
        shared_per_block_optin_bytes=optin,
        total_memory_bytes=profile.dram.size_bytes,
        sm_clock_mhz=float(profile.clocks.sm_mhz),
        memory_clock_mhz=float(profile.clocks.memory_mhz),
    )


def driver_names(facts: DeviceFacts) -> dict[str, Any]:
    """`facts` by the names a topology document's `driver` block gives them (those of a CUDA
    trace's attributes, topology/driver.py), without the ones the facts leave None."""
    khz = {"sm_clock_khz": facts.sm_clock_mhz, "memory_clock_khz": facts.memory_clock_mhz}
    out = {
        "sm_count": facts.sm_count,
        "l2_cache_size_bytes": facts.l2_bytes,
        "shared_memory_per_sm_bytes": facts.shared_per_sm_bytes,
        "shared_memory_per_block_optin_bytes": facts.shared_per_block_optin_bytes,
        "max_threads_per_sm": facts.max_threads_per_sm,
        **{k: None if v is None else int(round(1000 * v)) for k, v in khz.items()},
        "total_constant_memory_bytes": facts.const_memory_bytes,
        "total_memory_bytes": facts.total_memory_bytes,
    }
    return {k: v for k, v in out.items() if v is not None}


def facts_from_attributes(
    *,
    name: str,
    compute_capability: str,
    total_memory_bytes: int,
    attributes: dict[str, int],
) -> DeviceFacts:
    """The facts of a GPU from its driver attributes (lower-case CUdevice_attribute names, as
    `CudaBackend.device_info` records them); the driver gives clock rates in kHz."""

    def khz_to_mhz(key: str) -> float | None:
        v = attributes.get(key)
        return v / 1000.0 if v else None

    return DeviceFacts(
        source="driver",
        name=name,
        compute_capability=compute_capability,
        sm_count=int(attributes["multiprocessor_count"]),
        max_threads_per_sm=int(attributes["max_threads_per_multiprocessor"]),
        warp_size=int(attributes.get("warp_size", 32)),
        l2_bytes=attributes.get("l2_cache_size") or None,
        shared_per_sm_bytes=attributes.get("max_shared_memory_per_multiprocessor"),
        shared_per_block_optin_bytes=attributes.get("max_shared_memory_per_block_optin"),
        const_memory_bytes=int(attributes.get("total_constant_memory", CONST_MEMORY_BYTES)),
        total_memory_bytes=int(total_memory_bytes),
        sm_clock_mhz=khz_to_mhz("clock_rate"),
        memory_clock_mhz=khz_to_mhz("memory_clock_rate"),
    )
