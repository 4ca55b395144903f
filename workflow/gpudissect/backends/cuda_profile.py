"""The cuda backend's driver calls, timed for the sweep profile (`contract.profile`).

The backend hands its handlers pycuda through thin stand-ins: the driver module, the context,
the prepared kernels and the events. Each stand-in passes every call through unchanged and
times, with `perf_counter` on the host, the calls the profile counts (launch submission, waits
for the GPU, copies and their bytes, memsets, allocations); everything else reaches pycuda
itself. The stand-ins never go into pycuda: a stand-in's `raw` is the pycuda object.
"""

from __future__ import annotations

import time
from typing import Any

from ..contract.profile import SweepProfile

_now = time.perf_counter

# pycuda.driver function -> (profile kind, how its bytes are counted)
_DRIVER_CALLS = {
    "mem_alloc": ("alloc", None),
    "pagelocked_empty": ("alloc", None),
    "pagelocked_zeros": ("alloc", None),
    "memcpy_htod": ("htod", "src"),
    "to_device": ("htod", "first"),
    "memcpy_dtoh": ("dtoh", "first"),
    "from_device": ("dtoh", None),
    "memcpy_dtod": ("dtod", "size"),
    "memcpy_dtod_async": ("dtod", "size"),
    "memset_d8": ("memset", None),
    "memset_d16": ("memset", None),
    "memset_d32": ("memset", None),
}


def _nbytes(obj: Any) -> int:
    nbytes = getattr(obj, "nbytes", None)
    if nbytes is not None:
        return int(nbytes)
    try:
        return memoryview(obj).nbytes
    except TypeError:
        return 0


def _copy_bytes(how: str | None, args: tuple) -> int:
    if how == "first" and args:
        return _nbytes(args[0])
    if how == "src" and len(args) > 1:
        return _nbytes(args[1])
    if how == "size" and len(args) > 2:
        return int(args[2])
    return 0


def raw(obj: Any) -> Any:
    """The pycuda object behind a stand-in (the object itself when it is none)."""
    return getattr(obj, "raw", obj) if isinstance(obj, _StandIn) else obj


class _StandIn:
    def __init__(self, obj: Any, profile: SweepProfile) -> None:
        self.raw = obj
        self._profile = profile

    def __getattr__(self, name: str) -> Any:
        if name in ("raw", "_profile"):  # not set yet (a copy being made)
            raise AttributeError(name)
        return getattr(self.raw, name)

    def __eq__(self, other: object) -> bool:
        return self.raw == raw(other)

    def __hash__(self) -> int:
        return hash(self.raw)


class ProfiledDriver(_StandIn):
    """`pycuda.driver` with its copies, memsets and allocations timed; `Event()` makes
    `ProfiledEvent`s. Each wrapped function is made once and kept."""

    def __getattr__(self, name: str) -> Any:
        if name in ("raw", "_profile"):
            raise AttributeError(name)
        value = getattr(self.raw, name)
        if name in _DRIVER_CALLS:
            value = _timed_driver_call(value, self._profile, *_DRIVER_CALLS[name])
        elif name == "Event":
            value = _event_factory(value, self._profile)
        else:
            return value
        setattr(self, name, value)  # found in the instance from now on
        return value


def _timed_driver_call(fn, profile: SweepProfile, kind: str, how: str | None):
    acc = profile.accumulator(kind)

    def call(*args: Any, **kwargs: Any) -> Any:
        start = _now()
        out = fn(*args, **kwargs)
        acc[0] += 1
        acc[1] += _now() - start
        if how is not None:
            acc[2] += _copy_bytes(how, args)
        return out

    call.__name__ = getattr(fn, "__name__", kind)
    return call


def _event_factory(event_class, profile: SweepProfile):
    def make(*args: Any, **kwargs: Any) -> ProfiledEvent:
        return ProfiledEvent(event_class(*args, **kwargs), profile)

    return make


class ProfiledEvent(_StandIn):
    """A CUDA event whose `synchronize` counts as a wait for the GPU."""

    def record(self, *args: Any, **kwargs: Any) -> ProfiledEvent:
        self.raw.record(*(raw(a) for a in args), **{k: raw(v) for k, v in kwargs.items()})
        return self

    def synchronize(self) -> ProfiledEvent:
        start = time.perf_counter()
        try:
            self.raw.synchronize()
        finally:
            self._profile.add("sync", time.perf_counter() - start)
        return self

    def time_since(self, other: Any) -> float:
        return self.raw.time_since(raw(other))

    def time_till(self, other: Any) -> float:
        return self.raw.time_till(raw(other))


class ProfiledContext(_StandIn):
    """A pycuda context whose `synchronize` counts as a wait for the GPU."""

    def synchronize(self) -> None:
        start = time.perf_counter()
        try:
            self.raw.synchronize()
        finally:
            self._profile.add("sync", time.perf_counter() - start)


class ProfiledFunction(_StandIn):
    """A prepared kernel whose launches are counted and their submission timed. The common
    launch is written out: one clock reading (~0.1 us) is all that runs before pycuda's own
    packing of the arguments (several us), so a launch timed by events around it (bandwidth,
    the L2 flush copy) starts as it did."""

    def __init__(self, obj: Any, profile: SweepProfile) -> None:
        super().__init__(obj, profile)
        self._acc = profile.accumulator("launch")
        self._prepared_call = obj.prepared_call

    def _launch(self, name: str, args: tuple, kwargs: dict) -> Any:
        start = _now()
        try:
            return getattr(self.raw, name)(*args, **kwargs)
        finally:
            self._profile.add("launch", _now() - start)

    def prepared_call(self, *args: Any, **kwargs: Any) -> Any:
        start = _now()
        out = self._prepared_call(*args, **kwargs)
        acc = self._acc
        acc[0] += 1
        acc[1] += _now() - start
        return out

    def prepared_async_call(self, *args: Any, **kwargs: Any) -> Any:
        return self._launch("prepared_async_call", args, kwargs)

    def prepared_timed_call(self, *args: Any, **kwargs: Any) -> Any:
        return self._launch("prepared_timed_call", args, kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._launch("__call__", args, kwargs)
