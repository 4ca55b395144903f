"""CUDA handlers of mapped chases (`experiments.mapped_chase`): the range is reserved, allocated
and mapped through the CUDA virtual-memory API of NVIDIA's cuda-python (pycuda has none), in
the context the backend made current, and the existing 64-bit P-chase kernels walk it through
its virtual address.

- contiguous: one `cuMemCreate` of the whole range, mapped at the start of the reservation;
- scattered: one `cuMemCreate` per mapped chunk, in order; the i-th mapped virtual chunk is
  backed by allocation `allocation_order()[i]` (the chunks the layout leaves unmapped stay
  reserved only).

The reservation is aligned to `ALIGN_BYTES`, so aligned virtual blocks of chunks (up to that
size) start on aligned virtual addresses. The mapping is kept across launches (the walks of one
layout reuse it) and replaced when a launch asks for another layout; `ReleaseMapping`, or the
backend's close, unmaps and frees it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..contract.backend import ChaseResult, handles
from ..exceptions import DeviceUnavailable
from ..experiments.mapped_chase import MappedChaseWork, PhysicalLayout, ReleaseMapping

if TYPE_CHECKING:
    from .cuda import CudaBackend

ALIGN_BYTES = 1 << 30


def _driver():
    try:
        from cuda.bindings import driver as cu
    except ImportError as exc:
        raise DeviceUnavailable(
            "mapped chases need cuda-python's virtual-memory API: pip install -e .[cuda]"
        ) from exc
    return cu


def _check(cu, result, call: str):
    """The values after the status of a cuda-python call; raises on an error status."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise DeviceUnavailable(f"{call} failed: {err}")
    return values[0] if len(values) == 1 else values


def _props(cu, device_index: int):
    prop = cu.CUmemAllocationProp()
    prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = device_index
    access = cu.CUmemAccessDesc()
    access.location = prop.location
    access.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    return prop, access


def granularity_bytes(device_index: int) -> int:
    """The minimum granularity of a physical allocation and of a mapping (2 MiB on Hopper)."""
    cu = _driver()
    prop, _ = _props(cu, device_index)
    flag = cu.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM
    return int(_check(cu, cu.cuMemGetAllocationGranularity(prop, flag), "granularity"))


class VmmRange:
    """One mapped virtual range of `layout` (see the module docstring); `release()` undoes it."""

    def __init__(self, layout: PhysicalLayout, device_index: int) -> None:
        cu = self.cu = _driver()
        self.layout = layout
        self.size = layout.size_bytes
        self.handles: list = []
        self.mapped: list[tuple[int, int]] = []  # (address, bytes)
        self.base = None
        granule = granularity_bytes(device_index)
        if layout.chunk_bytes % granule:
            raise DeviceUnavailable(
                f"chunk_bytes {layout.chunk_bytes} is not a multiple of the device's mapping "
                f"granularity {granule}"
            )
        prop, access = _props(cu, device_index)
        try:
            align = max(ALIGN_BYTES, layout.chunk_bytes)
            self.base = _check(cu, cu.cuMemAddressReserve(self.size, align, 0, 0), "reserve")
            base = int(self.base)
            if layout.kind == "contiguous":
                self._map(base, self._create(self.size, prop), self.size)
                _check(cu, cu.cuMemSetAccess(base, self.size, [access], 1), "cuMemSetAccess")
            else:
                c = layout.chunk_bytes
                mapped = layout.mapped_chunks().tolist()
                allocations = [self._create(c, prop) for _ in mapped]
                for v, p in zip(mapped, layout.allocation_order().tolist(), strict=True):
                    self._map(base + v * c, allocations[p], c)
                # access is set on mapped memory only: once per run of consecutive chunks
                runs = np.split(np.asarray(mapped), np.flatnonzero(np.diff(mapped) != 1) + 1)
                for run in runs:
                    address, nbytes = base + int(run[0]) * c, len(run) * c
                    _check(cu, cu.cuMemSetAccess(address, nbytes, [access], 1), "cuMemSetAccess")
        except BaseException:
            self.release()
            raise

    def _create(self, nbytes: int, prop):
        handle = _check(self.cu, self.cu.cuMemCreate(nbytes, prop, 0), f"cuMemCreate({nbytes})")
        self.handles.append(handle)
        return handle

    def _map(self, address: int, handle, nbytes: int) -> None:
        _check(self.cu, self.cu.cuMemMap(address, nbytes, 0, handle, 0), "cuMemMap")
        self.mapped.append((address, nbytes))

    @property
    def address(self) -> int:
        return int(self.base)

    def release(self) -> None:
        """Unmap, free the physical allocations and the reservation (every step attempted)."""
        cu = self.cu
        for address, nbytes in self.mapped:
            cu.cuMemUnmap(address, nbytes)
        for handle in self.handles:
            cu.cuMemRelease(handle)
        if self.base is not None:
            cu.cuMemAddressFree(self.base, self.size)
        self.mapped, self.handles, self.base = [], [], None


def _current(backend: CudaBackend, layout: PhysicalLayout) -> VmmRange:
    held = getattr(backend, "_vmm_range", None)
    if held is not None and held.layout == layout:
        return held
    release_mapping(backend, ReleaseMapping())
    backend.release_buffer()  # the chase buffer of other launches: room for the range
    backend.context.synchronize()
    with backend.sweep_profile.timed("map"):
        held = VmmRange(layout, backend.index)
    backend._vmm_range = held
    backend.on_close(_release_on_close)
    return held


def _release_on_close(backend: CudaBackend) -> None:
    release_mapping(backend, ReleaseMapping())


def write_chain(backend: CudaBackend, address: int, work: MappedChaseWork) -> None:
    """The chase's sparse values written at their positions of the range (the pchase module's
    scatter kernel, one thread per value)."""
    w = work.chase
    scatter = backend.function("pchase", "scatter_u64", "PPPI")
    pos, val = backend.scatter_inputs(w)  # kept device buffers, not two allocations a walk
    n = len(w.sparse_next)
    scatter.prepared_call(
        ((n + 255) // 256, 1), (256, 1, 1), np.uintp(address), pos, val, np.uint32(n)
    )
    backend.context.synchronize()


@handles("cuda", MappedChaseWork)
def run_mapped_chase(
    backend: CudaBackend, work: MappedChaseWork, *, carveout_pct=None, seed: int = 0
) -> ChaseResult:
    w = work.chase
    address = _current(backend, work.layout).address
    write_chain(backend, address, work)
    latency, indices = backend.launch_chase(w, np.uintp(address), carveout_pct=carveout_pct)
    return backend._chase_result(latency, indices)


def read_back(backend: CudaBackend, work: MappedChaseWork) -> np.ndarray:
    """The values at the chase's positions, copied back from the range (for checks)."""
    address = _current(backend, work.layout).address
    out = np.zeros(1, dtype=np.uint64)
    values = []
    for p in work.chase.sparse_positions.tolist():
        backend.drv.memcpy_dtoh(out, address + 8 * int(p))
        values.append(int(out[0]))
    return np.asarray(values, dtype=np.uint64)


@handles("cuda", ReleaseMapping)
def release_mapping(backend: CudaBackend, work: ReleaseMapping, **kwargs) -> None:
    held = getattr(backend, "_vmm_range", None)
    if held is not None:
        backend.context.synchronize()
        with backend.sweep_profile.timed("map"):
            held.release()
        backend._vmm_range = None
