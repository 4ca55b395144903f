"""CUDA handlers of the node family: the node's GPUs opened beside the sweep's own, peer access
enabled between them (cuCtxEnablePeerAccess), NVML's view of every link.

The sweep's backend is the node's first GPU. The first NodeQuery opens a CudaBackend for every
other GPU of the node (each holding its GPU's measurement lock, `gpu_lock`, for the whole
sweep, so no other sweep measures on any of them meanwhile), enables peer access from every
GPU to every other one it can access, and keeps them until the sweep's backend closes. The
first GPU's context stays current; work on another GPU pushes that GPU's context for its
duration. Arrays a GPU reads live in the other GPU's memory (allocated in its context), reached
through unified addressing.

No NVLink multicast object is made and no NCCL runs; the NCCL variables that would enable
NVLink SHARP are kept off all the same (`safety.keep_multicast_off`).
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from ..contract.backend import handles
from ..contract.node import (
    ChaseRecords,
    NodeFacts,
    NodeQuery,
    PairLink,
    PeerAtomicWork,
    PeerChaseWork,
    PeerCopyWork,
    PeerStreamWork,
    Timings,
)
from ..exceptions import DeviceUnavailable
from .cuda_profile import raw
from .safety import keep_multicast_off

if TYPE_CHECKING:
    from .cuda import CudaBackend

log = logging.getLogger(__name__)
keep_multicast_off()

KERNEL = "node"
NVLINK_MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS on Hopper


def _bus(bus_id: str) -> str:
    """A PCI bus id in one spelling (NVML writes 8 domain digits, CUDA 4)."""
    domain, _, rest = bus_id.strip().lower().partition(":")
    return f"{int(domain, 16):04x}:{rest}" if rest else bus_id.lower()


class _Nvml:
    """NVML's view of the node's links; every reading degrades to 'unknown' without NVML."""

    def __init__(self, bus_ids: dict[int, str]) -> None:
        self.bus = {g: _bus(b) for g, b in bus_ids.items()}
        self.nvml = None
        self.handles: dict[int, Any] = {}
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            for g, b in bus_ids.items():
                self.handles[g] = pynvml.nvmlDeviceGetHandleByPciBusId(b)
        except Exception as exc:  # NVML absent or a bus id unknown: the links stay unknown
            log.info("NVML link facts unavailable: %s", exc)
            self.nvml = None

    def _call(self, fn: str, *args: Any) -> Any:
        try:
            return getattr(self.nvml, fn)(*args)
        except Exception:
            return None

    def common_ancestor(self, src: int, dst: int) -> str:
        if self.nvml is None:
            return ""
        level = self._call(
            "nvmlDeviceGetTopologyCommonAncestor", self.handles[src], self.handles[dst]
        )
        if level is None:
            return ""
        names = [n for n in dir(self.nvml) if n.startswith("NVML_TOPOLOGY_")]
        return next((n for n in names if getattr(self.nvml, n) == level), str(level))

    def nvlinks(self, src: int, dst: int) -> tuple[str, int, int]:
        """(kind, links, version) from src to dst: the active links whose remote end is dst
        (kind nvlink), else, where src's active links end in NVSwitches, all of them (kind
        nvswitch); ("", 0, 0) where NVML does not tell."""
        if self.nvml is None:
            return "", 0, 0
        h, direct, switched, version = self.handles[src], 0, 0, 0
        for link in range(NVLINK_MAX_LINKS):
            if self._call("nvmlDeviceGetNvLinkState", h, link) != 1:
                continue
            version = version or int(self._call("nvmlDeviceGetNvLinkVersion", h, link) or 0)
            remote = self._call("nvmlDeviceGetNvLinkRemotePciInfo_v2", h, link)
            if remote is None:
                remote = self._call("nvmlDeviceGetNvLinkRemotePciInfo", h, link)
            bus = getattr(remote, "busId", b"")
            bus = bus.decode() if isinstance(bus, bytes) else str(bus)
            if bus and _bus(bus) == self.bus[dst]:
                direct += 1
            elif self._call("nvmlDeviceGetNvLinkRemoteDeviceType", h, link) == getattr(
                self.nvml, "NVML_NVLINK_DEVICE_TYPE_SWITCH", -1
            ):
                switched += 1
        if direct:
            return "nvlink", direct, version
        if switched:
            return "nvswitch", switched, version
        return "", 0, 0


class _Session:
    """The node's GPUs for one sweep (see the module docstring)."""

    def __init__(self, lead: CudaBackend, gpus: tuple[int, ...]) -> None:
        self.lead, self.drv = lead, lead.drv
        if lead.index not in gpus:
            raise DeviceUnavailable(
                f"the node's GPUs {list(gpus)} do not include the sweep's own GPU {lead.index}"
            )
        self.gpus = gpus
        self.backends: dict[int, CudaBackend] = {lead.index: lead}
        self.buffers: dict[tuple[int, str], tuple[Any, int]] = {}
        try:
            for g in gpus:
                if g != lead.index:
                    # its context is made current; pop it so the first GPU's stays current
                    b = type(lead)(index=g, cubin_dir=lead.cubin_dir, exclusive=True)
                    self.drv.Context.pop()
                    self.backends[g] = b
            self.access = self._enable_peer_access()
        except BaseException:
            self.close(lead)
            raise
        lead.on_close(self.close)

    @contextmanager
    def on(self, gpu: int):
        """GPU `gpu`'s backend with its context current."""
        b = self.backends[gpu]
        if b is self.lead:
            yield b
            return
        b.context.push()
        try:
            yield b
        finally:
            self.drv.Context.pop()

    def _enable_peer_access(self) -> dict[tuple[int, int], bool]:
        access = {}
        for s in self.gpus:
            for d in self.gpus:
                if s == d:
                    continue
                ok = bool(self.backends[s].device.can_access_peer(self.backends[d].device))
                if ok:
                    with self.on(s):
                        try:
                            self.drv.Context.enable_peer_access(raw(self.backends[d].context))
                        except self.drv.LogicError as exc:  # already enabled is fine
                            if "already" not in str(exc):
                                raise
                access[(s, d)] = ok
        return access

    def buffer(self, gpu: int, role: str, nbytes: int):
        """Device memory of at least `nbytes` on GPU `gpu` for `role`, kept between works."""
        held = self.buffers.get((gpu, role))
        if held is not None and held[1] >= nbytes:
            return held[0]
        with self.on(gpu):
            if held is not None:
                held[0].free()
            alloc = self.drv.mem_alloc(nbytes)
        self.buffers[(gpu, role)] = (alloc, nbytes)
        return alloc

    def free_bytes(self, gpu: int) -> int:
        with self.on(gpu):
            return int(self.drv.mem_get_info()[0])

    def close(self, _backend: Any = None) -> None:
        for (gpu, _), (alloc, _) in list(self.buffers.items()):
            with self.on(gpu):
                alloc.free()
        self.buffers.clear()
        for g, b in list(self.backends.items()):
            if b is not self.lead:
                b.context.push()
                b.close()  # pops and detaches its context, gives its GPU's lock back
                del self.backends[g]


def _session(backend: CudaBackend, gpus: tuple[int, ...] | None = None) -> _Session:
    s = getattr(backend, "_node_session", None)
    if s is None:
        if gpus is None:
            raise DeviceUnavailable("node work before the NodeQuery that opens the node's GPUs")
        s = _Session(backend, gpus)
        backend._node_session = s
    return s


def _attr(backend: CudaBackend, name: str) -> int:
    return int(backend.device.get_attribute(getattr(backend.drv.device_attribute, name)))


@handles("cuda", NodeQuery)
def node_facts(backend: CudaBackend, query: NodeQuery, **_: object) -> NodeFacts:
    gpus = query.gpus or (backend.index,)
    names = query.names or tuple(f"gpu{g}" for g in gpus)
    s = _session(backend, gpus)
    nvml = _Nvml({g: s.backends[g].device.pci_bus_id() for g in gpus})
    links = []
    for src in gpus:
        for dst in gpus:
            if src == dst:
                continue
            kind, count, version = nvml.nvlinks(src, dst)
            peer = s.access[(src, dst)]
            links.append(
                PairLink(
                    src=src,
                    dst=dst,
                    peer_access=peer,
                    link_kind=kind or ("pcie" if peer else "unknown"),
                    nvlink_count=count,
                    nvlink_version=version,
                    common_ancestor=nvml.common_ancestor(src, dst),
                )
            )
    return NodeFacts(
        gpus=gpus,
        names=names,
        links=tuple(links),
        l2_bytes=_attr(backend, "L2_CACHE_SIZE") or None,
        sm_count=min(_attr(s.backends[g], "MULTIPROCESSOR_COUNT") for g in gpus),
        free_memory_bytes=tuple(s.free_bytes(g) for g in gpus),
        identities=tuple(_identity(s.backends[g]) for g in gpus),
    )


def _identity(b: CudaBackend) -> dict[str, Any]:
    info = b.device_info()
    keys = ("name", "index", "pci_bus_id", "uuid", "compute_capability", "driver_version")
    return {k: info.get(k) for k in keys}


def _records(b: CudaBackend, fn, args: tuple, record_steps: int, shared_bytes: int):
    drv = b.drv
    latency = np.zeros(record_steps, dtype=np.uint32)
    d_lat, d_idx = drv.mem_alloc(latency.nbytes), drv.mem_alloc(latency.nbytes)
    try:
        fa = drv.function_attribute
        if shared_bytes > 48 * 1024:
            fn.set_attribute(fa.MAX_DYNAMIC_SHARED_SIZE_BYTES, shared_bytes)
        fn.prepared_call((1, 1), (1, 1, 1), *args, d_lat, d_idx, shared_size=shared_bytes)
        b.context.synchronize()
        drv.memcpy_dtoh(latency, d_lat)
    finally:
        d_lat.free()
        d_idx.free()
    return latency


def _chain_on(s: _Session, work: PeerChaseWork | PeerAtomicWork):
    """The chase array of `work` in GPU dst's memory: the dst backend's own chase buffer (in its
    context), written whole or, for a large footprint, only where the walk goes (the scatter
    kernel of kernels/pchase.cu, run on dst)."""
    chase = work.chase_work()
    with s.on(work.dst) as bd:
        buf = bd._upload_chain(chase)
    return chase, buf


@handles("cuda", PeerChaseWork)
def peer_chase(backend: CudaBackend, work: PeerChaseWork, **_: object) -> ChaseRecords:
    s = _session(backend)
    chase, buf = _chain_on(s, work)
    with s.on(work.src) as b:
        latency, indices = b.launch_chase(chase, buf, carveout_pct=None)
        sm = b.sm_clock()
    # each timed load returns the next visited element: a stale copy of an earlier array's
    # line (a cache that keeps peer lines across launches without seeing the new writes) would
    # send the walk elsewhere
    visited = work.visited()
    expected = visited[(work.warmup_steps + 1 + np.arange(work.record_steps)) % len(visited)]
    ok = bool(np.array_equal(indices.astype(np.int64), expected))
    return ChaseRecords(latency_cycles=latency, sm_clock_mhz=float(sm or "nan"), walk_ok=ok)


@handles("cuda", PeerAtomicWork)
def peer_atomics(backend: CudaBackend, work: PeerAtomicWork, **_: object) -> ChaseRecords:
    s = _session(backend)
    _, buf = _chain_on(s, work)
    with s.on(work.src) as b:
        fn = b.function(KERNEL, "atomic_chase", "PIIIPP")
        steps = (np.uint32(0), np.uint32(work.warmup_steps), np.uint32(work.record_steps))
        latency = _records(b, fn, (buf, *steps), work.record_steps, 8 * work.record_steps)
        sm = b.sm_clock()
    return ChaseRecords(latency_cycles=latency, sm_clock_mhz=float(sm or "nan"))


def _timed(b: CudaBackend, launch, repetitions: int) -> np.ndarray:
    """Elapsed ns of `repetitions` calls of `launch(stream)` after one untimed call, each timed
    with CUDA events on one stream of GPU b."""
    drv = b.drv
    stream = drv.Stream()
    start, end = drv.Event(), drv.Event()
    launch(stream)
    stream.synchronize()
    out = np.empty(repetitions, dtype=np.float64)
    for r in range(repetitions):
        start.record(stream)
        launch(stream)
        end.record(stream)
        end.synchronize()
        out[r] = end.time_since(start) * 1e6  # ms -> ns
    return out


@handles("cuda", PeerStreamWork)
def peer_stream(backend: CudaBackend, work: PeerStreamWork, **_: object) -> Timings:
    s = _session(backend)
    buf = s.buffer(work.dst, "stream", work.bytes_total)
    sink = s.buffer(work.src, "sink", 16)
    n = np.uint64(work.bytes_total // work.access_bytes)
    grid, block = (work.sms, 1), (work.threads_per_block, 1, 1)
    with s.on(work.src) as b:
        if work.direction == "read":
            fn = b.function(KERNEL, f"stream_read_v{work.access_bytes}", "PQP")
            args: tuple = (buf, n, sink)
        else:
            fn = b.function(KERNEL, f"stream_write_v{work.access_bytes}", "PQ")
            args = (buf, n)
        ns = _timed(b, lambda st: fn.prepared_async_call(grid, block, st, *args), work.repetitions)
        sm = b.sm_clock()
    return Timings(elapsed_ns=ns, sm_clock_mhz=float(sm or "nan"))


def _peer_copy_call(s: _Session, work: PeerCopyWork, dst_buf, src_buf):
    """`(launch(stream), api)`: cuMemcpyPeerAsync through cuda-python where it is installed
    (the driver API nvbandwidth's copy-engine copies use, the contexts named), else pycuda's
    cuMemcpyDtoDAsync of the two device pointers (unified addressing resolves them to their
    GPUs; peer access routes the copy over the link)."""
    try:
        from cuda.bindings import driver as cu
    except ImportError:
        cu = None
    if cu is None:

        def dtod(stream):
            s.drv.memcpy_dtod_async(dst_buf, src_buf, work.bytes_total, stream)

        return dtod, "cuMemcpyDtoDAsync"
    dst_ctx = cu.CUcontext(int(s.backends[work.dst].context.handle))
    src_ctx = cu.CUcontext(int(s.backends[work.src].context.handle))

    def peer(stream):
        (err,) = cu.cuMemcpyPeerAsync(
            cu.CUdeviceptr(int(dst_buf)),
            dst_ctx,
            cu.CUdeviceptr(int(src_buf)),
            src_ctx,
            work.bytes_total,
            cu.CUstream(int(stream.handle)),
        )
        if err != cu.CUresult.CUDA_SUCCESS:
            raise DeviceUnavailable(f"cuMemcpyPeerAsync failed: {err}")

    return peer, "cuMemcpyPeerAsync"


@handles("cuda", PeerCopyWork)
def peer_copy(backend: CudaBackend, work: PeerCopyWork, **_: object) -> Timings:
    """A copy-engine copy from src's memory to dst's, issued and timed on a stream of src."""
    s = _session(backend)
    src_buf = s.buffer(work.src, "copy_src", work.bytes_total)
    dst_buf = s.buffer(work.dst, "copy_dst", work.bytes_total)
    with s.on(work.src) as b:
        launch, api = _peer_copy_call(s, work, dst_buf, src_buf)
        ns = _timed(b, launch, work.repetitions)
        sm = b.sm_clock()
    return Timings(elapsed_ns=ns, sm_clock_mhz=float(sm or "nan"), method=api)
