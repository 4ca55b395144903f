"""The `cuda` backend: runs experiment work on an NVIDIA GPU through pycuda.

An explicit context (never `pycuda.autoinit`), cubins loaded with `module_from_file`, prepared
calls, clocks read through NVML before and after, the L1/shared carveout set per kernel.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..contract.backend import Backend, ChaseResult, ChaseWork
from ..contract.facts import DeviceFacts, facts_from_attributes
from ..contract.profile import profiled_call
from ..exceptions import DeviceUnavailable
from ..kernels import file_sha256
from .cuda_profile import ProfiledContext, ProfiledDriver, ProfiledFunction
from .gpu_lock import GpuLock
from .safety import keep_multicast_off

log = logging.getLogger(__name__)
keep_multicast_off()  # before any context of this process (backends/safety.py)

CHASE_KERNELS = {"ca": "pchase_ca", "cg": "pchase_cg", "nc": "pchase_nc"}
# a P-chase launch records the SM clock of a reading at most this old (clocks before and after
# every sweep are read afresh: see sweep.py)
CLOCK_MAX_AGE_S = 0.5
CHASE64_KERNELS = {"ca": "pchase64_ca", "cg": "pchase64_cg", "nc": "pchase64_nc"}


def _import_pycuda():
    try:
        import pycuda.driver as drv
    except ImportError as exc:
        raise DeviceUnavailable(
            "the cuda backend needs pycuda: install it on the GPU host with "
            "`pip install -e .[cuda]` (pycuda builds against the local CUDA driver)"
        ) from exc
    return drv


class _Nvml:
    """NVML readings for one device; every reading degrades to None when NVML is absent."""

    def __init__(self, pci_bus_id: str) -> None:
        self.handle = None
        self._sm_clock, self._sm_read_at = None, float("-inf")
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
        except Exception:  # NVML missing or the bus id unknown: clocks are then not recorded
            self.handle = None

    def _get(self, fn: str, *args: Any) -> Any:
        if self.handle is None:
            return None
        try:
            value = getattr(self.nvml, fn)(self.handle, *args)
        except Exception:
            return None
        return value.decode() if isinstance(value, bytes) else value

    def clocks(self) -> dict[str, float | None]:
        if self.handle is None:
            return {"sm_clock_mhz": None, "memory_clock_mhz": None}
        n = self.nvml
        return {
            "sm_clock_mhz": self._get("nvmlDeviceGetClockInfo", n.NVML_CLOCK_SM),
            "memory_clock_mhz": self._get("nvmlDeviceGetClockInfo", n.NVML_CLOCK_MEM),
        }

    def clock_event_reasons(self) -> int | None:
        """NVML's bitmask of why the clocks are below their maximum (clock event, formerly
        throttle, reasons: idle, power cap, thermal slowdown...); None without NVML."""
        reasons = self._get("nvmlDeviceGetCurrentClocksEventReasons")
        if reasons is None:
            reasons = self._get("nvmlDeviceGetCurrentClocksThrottleReasons")
        return None if reasons is None else int(reasons)

    def clock_record(self) -> dict[str, Any]:
        """The clocks and the clock event reasons, read together (before and after a sweep)."""
        return self.clocks() | {"clock_event_reasons": self.clock_event_reasons()}

    def sm_clock(self, *, max_age_s: float) -> float | None:
        """The SM clock, read again only when the last reading is older than `max_age_s`: a
        sweep of thousands of short launches would otherwise spend much of its time in NVML."""
        now = time.monotonic()
        if now - self._sm_read_at > max_age_s:
            self._sm_clock = self.clocks()["sm_clock_mhz"]
            self._sm_read_at = now
        return self._sm_clock

    def facts(self) -> dict[str, Any]:
        if self.handle is None:
            return {"nvml": "unavailable"}
        n = self.nvml
        reasons = self.clock_event_reasons()
        try:
            driver = n.nvmlSystemGetDriverVersion()
            driver = driver.decode() if isinstance(driver, bytes) else driver
        except Exception:
            driver = None
        return {
            "uuid": self._get("nvmlDeviceGetUUID"),
            "driver_version": driver,
            "max_sm_clock_mhz": self._get("nvmlDeviceGetMaxClockInfo", n.NVML_CLOCK_SM),
            "max_memory_clock_mhz": self._get("nvmlDeviceGetMaxClockInfo", n.NVML_CLOCK_MEM),
            "clock_event_reasons": reasons,
        }


class CudaBackend(Backend):
    kind = "cuda"

    def __init__(
        self,
        *,
        index: int = 0,
        cubin_dir: str | os.PathLike | None = None,
        exclusive: bool = False,
    ) -> None:
        """`exclusive`: take the GPU's measurement lock (`gpu_lock`) before the context is made,
        and hold it until `close()` (a sweep does; tests and one-off readings need not)."""
        drv = _import_pycuda()
        # the handlers reach pycuda through stand-ins that time its calls (cuda_profile.py)
        self.drv = ProfiledDriver(drv, self.sweep_profile)
        try:
            drv.init()
            count = drv.Device.count()
        except drv.Error as exc:
            raise DeviceUnavailable(f"CUDA driver initialisation failed: {exc}") from exc
        if index >= count:
            raise DeviceUnavailable(
                f"CUDA device index {index} does not exist; this host has "
                f"{count} device(s) (set devices[].index)"
            )
        self.index = index
        self.device = drv.Device(index)
        bus_id = self.device.pci_bus_id()
        self.lock = GpuLock(bus_id) if exclusive else None
        try:
            self.context = ProfiledContext(self.device.make_context(), self.sweep_profile)
        except BaseException:
            if self.lock is not None:
                self.lock.release()
            raise
        self.nvml = _Nvml(bus_id)
        self.cubin_dir = Path(cubin_dir) if cubin_dir else None
        self._modules: dict[str, Any] = {}
        self._functions: dict[str, Any] = {}
        self._buffer = None
        self._buffer_bytes = 0
        self._last_bytes = 0
        self._kept: dict[str, tuple[Any, int]] = {}  # kept_buffer's: name -> (allocation, bytes)
        self._closers: list = []
        self._start_clocks = self.nvml.clocks()

    # --- device facts -------------------------------------------------------------------
    @property
    def arch(self) -> str:
        major, minor = self.device.compute_capability()
        return f"sm_{major}{minor}"

    def device_info(self) -> dict[str, Any]:
        drv, d = self.drv, self.device
        a = drv.device_attribute
        attrs = {
            k: d.get_attribute(getattr(a, k))
            for k in (
                "MULTIPROCESSOR_COUNT",
                "L2_CACHE_SIZE",
                "GLOBAL_MEMORY_BUS_WIDTH",
                "MEMORY_CLOCK_RATE",
                "CLOCK_RATE",
                "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR",
                "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
                "MAX_THREADS_PER_MULTIPROCESSOR",
                "WARP_SIZE",
                "TOTAL_CONSTANT_MEMORY",
            )
            if hasattr(a, k)
        }
        return {
            "backend": "cuda",
            "name": d.name(),
            "index": self.index,
            "pci_bus_id": d.pci_bus_id(),
            "compute_capability": ".".join(map(str, d.compute_capability())),
            "arch": self.arch,
            "total_memory_bytes": d.total_memory(),
            "cuda_driver_api_version": drv.get_driver_version(),
            "pycuda_cuda_version": ".".join(map(str, drv.get_version())),
            "attributes": {k.lower(): v for k, v in attrs.items()},
            "clocks_at_open": self._start_clocks,
            **self.nvml.facts(),
        }

    def facts(self) -> DeviceFacts:
        info = self.device_info()
        return facts_from_attributes(
            name=info["name"],
            compute_capability=info["compute_capability"],
            total_memory_bytes=info["total_memory_bytes"],
            attributes=info["attributes"],
        )

    def load_handlers(self) -> None:
        # the handlers of the families' own work types live on the backend side, so that no
        # experiment imports a backend; they register themselves with `handles` on import
        from . import (  # noqa: F401
            bandwidth_cuda,
            banks_cuda,
            l2slices_cuda,
            mapping_cuda,
            multichase_cuda,
            node_cuda,
            pointer_walk_cuda,
            requests_cuda,
            throughput_cuda,
            timing_cuda,
        )

    @property
    def supports_carveout(self) -> bool:
        return self.device.compute_capability() >= (7, 0)

    def clocks(self) -> dict[str, float]:
        return self.nvml.clocks()

    def sm_clock(self) -> float | None:
        """The SM clock a launch records (a reading at most CLOCK_MAX_AGE_S old)."""
        return self.nvml.sm_clock(max_age_s=CLOCK_MAX_AGE_S)

    def clock_record(self) -> dict[str, Any]:
        return self.nvml.clock_record()

    # --- kernels ------------------------------------------------------------------------
    def cubin_path(self, kernel: str) -> Path:
        if self.cubin_dir is None:
            raise DeviceUnavailable(
                "no cubin_dir given: compile kernels first "
                "(`gpudissect compile` or the compile_kernel rule)"
            )
        path = self.cubin_dir / f"{kernel}.cubin"
        if not path.is_file():
            raise DeviceUnavailable(
                f"{path} does not exist: compile kernels/{kernel}.cu for {self.arch} first"
            )
        return path

    def cubin_sha256(self, kernel: str) -> str:
        return file_sha256(self.cubin_path(kernel))

    def function(self, kernel: str, name: str, signature: str):
        key = f"{kernel}:{name}"
        if key not in self._functions:
            if kernel not in self._modules:
                self._modules[kernel] = self.drv.module_from_file(str(self.cubin_path(kernel)))
            fn = self._modules[kernel].get_function(name)
            fn.prepare(signature)
            self._functions[key] = ProfiledFunction(fn, self.sweep_profile)
        return self._functions[key]

    def _set_shared(self, fn, *, dynamic_bytes: int, carveout_pct: int | None) -> None:
        fa = self.drv.function_attribute
        if dynamic_bytes > 48 * 1024:
            fn.set_attribute(fa.MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic_bytes)
        if carveout_pct is not None:
            fn.set_attribute(fa.PREFERRED_SHARED_MEMORY_CARVEOUT, int(carveout_pct))

    def _device_buffer(self, nbytes: int, *, exact: bool = False):
        """The chase array's device memory, at least `nbytes`. It grows to twice its size at
        least (a sweep of growing arrays then allocates a few times, not once a point) unless
        `exact`, or when twice does not fit."""
        if nbytes > self._buffer_bytes:
            self.release_buffer()
            size = nbytes if exact else max(nbytes, 2 * self._last_bytes)
            try:
                self._buffer = self.drv.mem_alloc(size)
            except self.drv.MemoryError:
                size = nbytes
                self._buffer = self._alloc_retrying(size)
            self._buffer_bytes = self._last_bytes = size
        return self._buffer

    def _alloc_retrying(self, nbytes: int, *, tries: int = 4, wait_s: float = 1.0):
        """cuMemAlloc of `nbytes`, tried again a few times a second apart: in H100 pipeline runs
        the 71-GiB array of a sweep sometimes failed to allocate with the memory of an earlier
        sweep's process (gone by then) apparently not yet returned. Raises DeviceUnavailable
        with the free and total memory when every try fails."""
        for attempt in range(tries):
            try:
                return self.drv.mem_alloc(nbytes)
            except self.drv.MemoryError:
                if attempt + 1 == tries:
                    free, total = self.drv.mem_get_info()
                    raise DeviceUnavailable(
                        f"cannot allocate {nbytes} bytes on {self.device.name()} ({free} of "
                        f"{total} bytes free after {tries} tries): lower the experiment's "
                        "max_array_bytes"
                    ) from None
                log.info("cuMemAlloc(%d) failed; trying again in %.1f s", nbytes, wait_s)
                time.sleep(wait_s)
        raise AssertionError("unreachable")

    def free_memory_bytes(self) -> int | None:
        free, _total = self.drv.mem_get_info()
        return int(free) + self._buffer_bytes

    def reserve(self, nbytes: int) -> None:
        if nbytes <= self._buffer_bytes:
            return
        try:
            self._device_buffer(nbytes, exact=True)
        except self.drv.MemoryError as exc:
            free, total = self.drv.mem_get_info()
            raise DeviceUnavailable(
                f"cannot hold a chase array of {nbytes} bytes on {self.device.name()} "
                f"({free} of {total} bytes free): lower the experiment's max_array_bytes"
            ) from exc

    def on_close(self, fn) -> None:
        """Call `fn(backend)` when the backend closes, before its context goes (memory a
        handler holds across launches, such as a mapped range)."""
        if fn not in self._closers:
            self._closers.append(fn)

    def kept_buffer(self, name: str, nbytes: int):
        """Device memory of at least `nbytes` under `name`, kept across launches and grown on
        demand (a launch's record buffers, a sparse chase's positions and values): allocated
        once a sweep, not once a launch. Freed when the backend closes. Its contents are what
        the last launch left (as a new allocation's are undefined): each user writes what it
        reads."""
        held = self._kept.get(name)
        if held is None or held[1] < nbytes:
            if held is not None:
                held[0].free()
            size = max(int(nbytes), 4)
            self._kept[name] = (self.drv.mem_alloc(size), size)
        return self._kept[name][0]

    def release_buffer(self) -> None:
        """Free the chase array: its pages are unmapped, so no TLB holds them any more."""
        if self._buffer is not None:
            self._buffer.free()
        self._buffer, self._buffer_bytes = None, 0

    # --- work ---------------------------------------------------------------------------
    def _upload_chain(self, work: ChaseWork, *, fresh: bool = False):
        """The chase array on the device: copied when dense, scattered when sparse.

        `fresh` (cold chases): newly allocated memory whose pages no SM has translated, the
        sparse values written from the host (a copy through the copy engine), so that the
        chase's first touches miss every TLB level."""
        drv = self.drv
        if fresh:
            self.release_buffer()
        buf = self._device_buffer(work.elements * work.element_bytes, exact=fresh)
        if work.chain is not None:
            drv.memcpy_htod(buf, work.chain)
            return buf
        if fresh:
            values = np.ascontiguousarray(
                work.sparse_next, dtype=np.uint64 if work.element_bytes == 8 else np.uint32
            )
            for i, p in enumerate(work.sparse_positions.tolist()):
                drv.memcpy_htod(int(buf) + p * work.element_bytes, values[i : i + 1])
            return buf
        wide = work.element_bytes == 8
        scatter = self.function("pchase", "scatter_u64" if wide else "scatter_u32", "PPPI")
        pos, val = self.scatter_inputs(work)
        n = len(work.sparse_next)
        scatter.prepared_call(((n + 255) // 256, 1), (256, 1, 1), buf, pos, val, np.uint32(n))
        self.context.synchronize()
        return buf

    def scatter_inputs(self, work: ChaseWork) -> tuple[Any, Any]:
        """A sparse chase's positions (uint64) and next values (the element size), copied to
        kept device buffers for the scatter kernel."""
        wide = work.element_bytes == 8
        positions = np.ascontiguousarray(work.sparse_positions, dtype=np.uint64)
        values = np.ascontiguousarray(work.sparse_next, dtype=np.uint64 if wide else np.uint32)
        pos = self.kept_buffer("scatter_positions", positions.nbytes)
        val = self.kept_buffer("scatter_values", values.nbytes)
        self.drv.memcpy_htod(pos, positions)
        self.drv.memcpy_htod(val, values)
        return pos, val

    def chase_function(self, work: ChaseWork):
        """The prepared P-chase kernel of `work`'s path (ca, cg, nc) and element size."""
        table = CHASE64_KERNELS if work.element_bytes == 8 else CHASE_KERNELS
        if work.path not in table:
            raise DeviceUnavailable(
                f"{work.element_bytes}-byte chases run on {sorted(table)}, not {work.path!r}"
            )
        return self.function(
            "pchase", table[work.path], "PQIIPP" if work.element_bytes == 8 else "PIIIPP"
        )

    def chase_args(self, work: ChaseWork, chain) -> tuple:
        """Arguments of `chase_function(work)` up to the output buffers."""
        start = np.uint64 if work.element_bytes == 8 else np.uint32
        return (
            chain,
            start(work.start_index),
            np.uint32(work.warmup_steps),
            np.uint32(work.record_steps),
        )

    def _texture_object(self, buf, nbytes: int) -> int:
        """A texture object over a linear uint32 buffer (cuda-python; pycuda has none)."""
        try:
            from cuda.bindings import driver as cu
        except ImportError as exc:
            raise DeviceUnavailable(
                "the tex path needs cuda-python for texture objects: pip install -e .[cuda]"
            ) from exc
        res = cu.CUDA_RESOURCE_DESC()
        res.resType = cu.CUresourcetype.CU_RESOURCE_TYPE_LINEAR
        res.res.linear.devPtr = int(buf)
        res.res.linear.format = cu.CUarray_format.CU_AD_FORMAT_UNSIGNED_INT32
        res.res.linear.numChannels = 1
        res.res.linear.sizeInBytes = nbytes
        desc = cu.CUDA_TEXTURE_DESC()
        desc.flags = cu.CU_TRSF_READ_AS_INTEGER
        err, tex = cu.cuTexObjectCreate(res, desc, None)
        if err != cu.CUresult.CUDA_SUCCESS:
            raise DeviceUnavailable(f"cuTexObjectCreate failed: {err}")
        return tex

    def _records(self, work: ChaseWork, fn, args: tuple) -> tuple[np.ndarray, np.ndarray]:
        """Launch P-chase kernel `fn` with `args` followed by the record buffers (latencies and
        indices, `record_steps` each) on one thread, then copy the records back."""
        drv = self.drv
        latency = np.zeros(work.record_steps, dtype=np.uint32)
        indices = np.zeros(work.record_steps, dtype=np.uint32)
        # the kernel writes every one of its record_steps records (kernels/pchase.cu)
        d_lat = self.kept_buffer("record_latency", latency.nbytes)
        d_idx = self.kept_buffer("record_indices", indices.nbytes)
        fn.prepared_call(
            (1, 1), (1, 1, 1), *args, d_lat, d_idx, shared_size=work.shared_buffer_bytes
        )
        self.context.synchronize()
        drv.memcpy_dtoh(latency, d_lat)
        drv.memcpy_dtoh(indices, d_idx)
        return latency, indices

    def launch_chase(
        self, work: ChaseWork, chain, *, carveout_pct: int | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """One launch of the global-memory P-chase of `work` (paths ca, cg, nc) over the chain
        at device address `chain`: latencies and indices, copied back."""
        fn = self.chase_function(work)
        self._set_shared(fn, dynamic_bytes=work.shared_buffer_bytes, carveout_pct=carveout_pct)
        return self._records(work, fn, tuple(self.chase_args(work, chain)))

    @profiled_call
    def run_chase(self, work: ChaseWork, *, carveout_pct: int | None, seed: int = 0) -> ChaseResult:
        if work.path not in ("const", "tex"):
            latency, indices = self.launch_chase(
                work, self._upload_chain(work), carveout_pct=carveout_pct
            )
            return self._chase_result(latency, indices)
        if work.element_bytes == 8:
            raise DeviceUnavailable(f"the {work.path} path has no 8-byte-element chase")
        steps = (
            np.uint32(work.start_index),
            np.uint32(work.warmup_steps),
            np.uint32(work.record_steps),
        )
        tex = None
        try:
            if work.path == "const":
                if work.chain is None or work.chain.nbytes > 65536:
                    raise DeviceUnavailable("the const path takes a dense chain of <= 64 KiB")
                fn = self.function("pchase", "pchase_const", "IIIPP")
                ptr, _ = self._modules["pchase"].get_global("c_chain")
                self.drv.memcpy_htod(ptr, work.chain)
                args = steps
            else:
                fn = self.function("pchase", "pchase_tex", "QIIIPP")
                buf = self._upload_chain(work)
                tex = self._texture_object(buf, work.elements * work.element_bytes)
                args = (np.uint64(int(tex)), *steps)
            self._set_shared(fn, dynamic_bytes=work.shared_buffer_bytes, carveout_pct=carveout_pct)
            latency, indices = self._records(work, fn, args)
        finally:
            if tex is not None:
                from cuda.bindings import driver as cu

                cu.cuTexObjectDestroy(tex)
        return self._chase_result(latency, indices)

    def _chase_result(self, latency: np.ndarray, indices: np.ndarray) -> ChaseResult:
        sm = self.sm_clock()
        return ChaseResult(
            latency_cycles=latency,
            indices=indices,
            sm_clock_mhz=float(sm) if sm is not None else float("nan"),
        )

    def close(self) -> None:
        if self.context is None:
            return
        try:
            for fn in self._closers:
                fn(self)
            if self._buffer is not None:
                self._buffer.free()
            for allocation, _ in self._kept.values():
                allocation.free()
            self._kept.clear()
            self._modules.clear()
            self._functions.clear()
        finally:
            self.context.pop()
            self.context.detach()
            self.context = None
            if self.lock is not None:
                self.lock.release()
