"""CUDA handlers of the bank-conflict family (kernels/banks.cu). pycuda is imported lazily, by
the backend; the handlers only use its context and prepared functions."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..contract.backend import handles
from ..exceptions import DeviceUnavailable
from ..experiments.bank_conflicts import (
    WARP_THREADS,
    SharedBankResult,
    SharedBankWork,
    SharedFacts,
    SharedFactsQuery,
)

if TYPE_CHECKING:
    from .cuda import CudaBackend

KERNEL = "banks"
DEFAULT_BLOCK_SHARED_BYTES = 48 * 1024


def device_bank_modes(compute_capability: tuple[int, int]) -> tuple[int, ...]:
    """Bank modes a GPU offers (CUDA C Programming Guide, shared memory per compute capability):
    Kepler (3.x) selects 4- or 8-byte banks with cudaDeviceSetSharedMemConfig; Fermi and Maxwell
    on have 4-byte banks only (the call is then a no-op)."""
    return (4, 8) if compute_capability[0] == 3 else (4,)


@handles("cuda", SharedFactsQuery)
def shared_facts(backend: CudaBackend, query: SharedFactsQuery, **_: object) -> SharedFacts:
    a = backend.drv.device_attribute
    size = backend.device.get_attribute(a.MAX_SHARED_MEMORY_PER_BLOCK)
    if hasattr(a, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"):
        size = max(size, backend.device.get_attribute(a.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN))
    return SharedFacts(
        modes_bytes=device_bank_modes(backend.device.compute_capability()), size_bytes=size
    )


def _set_bank_mode(backend: CudaBackend, mode_bytes: int) -> None:
    if device_bank_modes(backend.device.compute_capability()) == (4,):
        if mode_bytes != 4:
            raise DeviceUnavailable(f"this GPU has 4-byte banks only, not {mode_bytes}")
        return
    sc = backend.drv.shared_config
    want = sc.EIGHT_BYTE_BANK_SIZE if mode_bytes == 8 else sc.FOUR_BYTE_BANK_SIZE
    backend.context.set_shared_config(want)
    if backend.context.get_shared_config() != want:
        raise DeviceUnavailable(f"the driver did not select the {mode_bytes}-byte bank mode")


@handles("cuda", SharedBankWork)
def run_bank_work(backend: CudaBackend, work: SharedBankWork, **_: object) -> SharedBankResult:
    if work.loads != 64:
        raise DeviceUnavailable("kernels/banks.cu times chains of 64 loads (LOADS); use 64")
    drv = backend.drv
    fn = backend.function(KERNEL, f"bank_stride_e{work.element_bytes}", "IIIPP")
    shared_bytes = work.elements * work.element_bytes + 4 * WARP_THREADS
    if shared_bytes > DEFAULT_BLOCK_SHARED_BYTES:
        fn.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, shared_bytes)
    _set_bank_mode(backend, work.bank_mode_bytes)
    elapsed = np.zeros(work.repetitions, dtype=np.uint32)
    final = np.zeros(WARP_THREADS, dtype=np.uint32)
    d_elapsed = drv.mem_alloc(elapsed.nbytes)
    d_final = drv.mem_alloc(final.nbytes)
    try:
        fn.prepared_call(
            (1, 1),
            (WARP_THREADS, 1, 1),
            np.uint32(work.stride_elements),
            np.uint32(work.elements),
            np.uint32(work.repetitions),
            d_elapsed,
            d_final,
            shared_size=shared_bytes,
        )
        backend.context.synchronize()
        drv.memcpy_dtoh(elapsed, d_elapsed)
        drv.memcpy_dtoh(final, d_final)
    finally:
        d_elapsed.free()
        d_final.free()
    sm = backend.clocks()["sm_clock_mhz"]
    return SharedBankResult(
        elapsed_cycles=elapsed,
        final_indices=final,
        sm_clock_mhz=float(sm) if sm is not None else float("nan"),
    )
