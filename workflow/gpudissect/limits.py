"""Upper limits of every size and count in a device profile and a run config.

A profile or config is checked against these before anything is built from it (a cache's
``set_ways`` tuple has one entry per set, the simulator one list per set), so a typo such as an
L2 of 1 TiB is refused in milliseconds instead of exhausting the machine. Each limit is set far
above any GPU built so far, and each comment says what the largest real value is; config/README.md
("Limits") lists them for users. Raise one here, with its reason, if a new GPU needs it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

KiB, MiB, GiB, TiB = 2**10, 2**20, 2**30, 2**40

# --- device profiles -------------------------------------------------------------------------
# Largest GPU-side caches: H100 L2 50 MiB, B200 L2 126 MiB, MI300X Infinity Cache 256 MiB.
MAX_CACHE_BYTES = 1 * GiB
# Lines are 32-128 B on every NVIDIA GPU; CPU-style 4 KiB "lines" are the most anyone would try.
MAX_LINE_BYTES = 4 * KiB
# A 1 GiB cache of 64 B lines; the simulator keeps one tag per line (~0.5 GiB at this limit).
MAX_CACHE_LINES = 2**24
# H100 L2: 50 MiB / 128 B / 16 ways = 25,600 sets; 2^20 is 40 times that. The simulator builds
# one list per set, so the sets, not the bytes, bound its memory.
MAX_SETS = 2**20
# Fully associative caches of a few thousand lines are the most associative ones simulated.
MAX_WAYS = 2**16
# TLB entries: thousands on real GPUs (H100's L2 TLB: a few thousand).
MAX_TLB_ENTRIES = 2**20
# Pages: 4 KiB to 2 MiB on GPUs, 1 GiB huge pages on hosts; 4 GiB is above all of them.
MAX_PAGE_BYTES = 4 * GiB
# Device memory: 192 GB on a B200; 16 TiB is far above any single GPU.
MAX_DRAM_BYTES = 16 * TiB
# Shared memory per SM: 228 KiB on H100; 16 MiB is 70 times that.
MAX_SHARED_BYTES = 16 * MiB
# Shared memory banks: 32 on every NVIDIA GPU.
MAX_BANKS = 1024
# Latencies and penalties: a DRAM miss is ~500 cycles, a TLB miss beyond the window thousands;
# 10^7 cycles is several milliseconds at any clock.
MAX_LATENCY_CYCLES = 10**7
# SMs: 132 on H100, 148 on B200; warps per SM: 64 on Hopper.
MAX_SMS = 4096
MAX_WARPS_PER_SM = 1024
# Outstanding-request entries, merge capacity, slots: tens to hundreds per SM.
MAX_REQUEST_ENTRIES = 2**20
# Any other byte quantity (windows, periods, blocks): the 49-bit virtual address space of Hopper.
MAX_ADDRESS_BYTES = 2**49
# Any other count in a profile (table entries, CTAs per SM, issue units).
MAX_PROFILE_COUNT = 2**24

# --- traces ----------------------------------------------------------------------------------
# Any measured value (cycles, ns, ms, GB/s, MHz) in a trace: 10^15 cycles is days at any clock.
MAX_MEASURED_VALUE = 1e15

# --- run configs -----------------------------------------------------------------------------
# Arrays swept on the device: an H200 has 141 GB; 1 TiB is above every GPU's memory.
MAX_ARRAY_BYTES = 1 * TiB
# Points of one size sweep (start..stop by step): the dense sweeps have a few thousand.
MAX_SWEEP_POINTS = 10**6
# Repetitions, passes, steps, threads and other counts of a config.
MAX_CONFIG_COUNT = 10**8

# Profile keys -> limit, by the key's own name (the last part of its dotted path); a key under
# ``caches`` uses the cache limits. Keys not named and not ending in _bytes/_cycles are counts.
_PROFILE_BY_KEY = {
    "line_bytes": MAX_LINE_BYTES,
    "sector_bytes": MAX_LINE_BYTES,
    "page_bytes": MAX_PAGE_BYTES,
    "block_bytes": MAX_LINE_BYTES,
    "bank_width_bytes": MAX_LINE_BYTES,
    "banks": MAX_BANKS,
    "sms": MAX_SMS,
    "max_warps_per_sm": MAX_WARPS_PER_SM,
    "ways": MAX_WAYS,
    "set_ways": MAX_WAYS,
    "merge_capacity": MAX_REQUEST_ENTRIES,
    "request_slots": MAX_REQUEST_ENTRIES,
    "per_warp_limit": MAX_REQUEST_ENTRIES,
}
# Not sizes: bit positions, masks, seeds and fractions are bounded by the schema itself.
_PROFILE_SKIP = {"bits", "masks", "low_bit", "seed", "cite", "profile_version"}
# Lists whose length is a per-set or per-entry structure.
_PROFILE_LIST_LIMITS = {"set_ways": MAX_SETS, "sets_of_lines": MAX_CACHE_LINES}


def _walk(doc: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _walk(v, (*path, k))
    elif isinstance(doc, list):
        yield path, doc
        for i, v in enumerate(doc):
            if isinstance(v, (dict, list)):
                yield from _walk(v, (*path, i))
            else:
                yield (*path, i), v
    else:
        yield path, doc


def _dotted(path: tuple) -> str:
    return ".".join(str(p) for p in path)


def _named_key(path: tuple) -> str:
    """The nearest key name of a path (list indices skipped)."""
    for p in reversed(path):
        if isinstance(p, str):
            return p
    return ""


def _profile_limit(path: tuple) -> int | None:
    key = _named_key(path)
    if key in _PROFILE_SKIP or not path or path[0] in ("cite", "noise"):
        return None
    if key == "size_bytes":
        return {"caches": MAX_CACHE_BYTES, "shared": MAX_SHARED_BYTES, "dram": MAX_DRAM_BYTES}.get(
            str(path[0]), MAX_ADDRESS_BYTES
        )
    if key == "entries":
        return MAX_TLB_ENTRIES if path[0] == "tlbs" else MAX_REQUEST_ENTRIES
    if key in _PROFILE_BY_KEY:
        return _PROFILE_BY_KEY[key]
    if key.endswith("_bytes"):
        return MAX_ADDRESS_BYTES
    if key.endswith("_cycles"):
        return MAX_LATENCY_CYCLES
    return MAX_PROFILE_COUNT


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_profile_limits(doc: Any, fail: Callable[[str, str], None]) -> None:
    """Call ``fail(key, what)`` for the first size or count of a raw profile above its limit.
    Runs before the schema and before any per-set structure is built."""
    for path, value in _walk(doc):
        if isinstance(value, list):
            limit = _PROFILE_LIST_LIMITS.get(_named_key(path))
            if limit is not None and len(value) > limit:
                fail(_dotted(path), f"{len(value)} entries; allowed: at most {limit}")
            continue
        if not _is_int(value) or (limit := _profile_limit(path)) is None:
            continue
        if value > limit:
            fail(_dotted(path), f"{value} is above the limit; allowed: at most {limit}")
    caches = doc.get("caches") if isinstance(doc, dict) else None
    for name, c in (caches or {}).items() if isinstance(caches, dict) else ():
        if not isinstance(c, dict):
            continue
        size, line, ways = c.get("size_bytes"), c.get("line_bytes"), c.get("ways")
        if _is_int(size) and _is_int(line) and line > 0:
            lines = size // line
            if lines > MAX_CACHE_LINES:
                fail(
                    f"caches.{name}.size_bytes",
                    f"{size} B / line_bytes {line} = {lines} lines; allowed: at most "
                    f"{MAX_CACHE_LINES} lines",
                )
            if _is_int(ways) and ways > 0 and lines // ways > MAX_SETS:
                fail(
                    f"caches.{name}.ways",
                    f"{lines} lines / {ways} ways = {lines // ways} sets; allowed: at most "
                    f"{MAX_SETS} sets",
                )
    tlbs = doc.get("tlbs") if isinstance(doc, dict) else None
    levels = tlbs.get("levels") if isinstance(tlbs, dict) else None
    for i, t in enumerate(levels if isinstance(levels, list) else ()):
        if isinstance(t, dict) and _is_int(t.get("entries")) and _is_int(t.get("ways")):
            if t["ways"] > 0 and t["entries"] // t["ways"] > MAX_SETS:
                fail(
                    f"tlbs.levels.{i}.ways",
                    f"{t['entries']} entries / {t['ways']} ways = {t['entries'] // t['ways']} "
                    f"sets; allowed: at most {MAX_SETS} sets",
                )


_CONFIG_SKIP = {"seed", "carveout_pct", "index", "profile", "cuda_arch"}


def check_config_limits(doc: Any, fail: Callable[[str, str], None]) -> None:
    """Call ``fail(key, what)`` for the first size or count of a raw config above its limit, and
    for a size sweep of more than MAX_SWEEP_POINTS points."""
    for path, value in _walk(doc):
        if not _is_int(value):
            continue
        key = _named_key(path)
        if key in _CONFIG_SKIP:
            continue
        in_bytes = any(isinstance(p, str) and p.endswith("_bytes") for p in path)
        limit = MAX_ARRAY_BYTES if in_bytes else MAX_CONFIG_COUNT
        if value > limit:
            fail(_dotted(path), f"{value} is above the limit; allowed: at most {limit}")
    _check_ranges(doc, (), fail)


def _check_ranges(doc: Any, path: tuple, fail: Callable[[str, str], None]) -> None:
    if isinstance(doc, dict):
        start, stop, step = doc.get("start"), doc.get("stop"), doc.get("step")
        if all(_is_int(v) for v in (start, stop, step)) and step > 0 and stop >= start:
            points = (stop - start) // step + 1
            if points > MAX_SWEEP_POINTS:
                fail(
                    _dotted((*path, "step")),
                    f"start {start} to stop {stop} by step {step} is {points} points; allowed: "
                    f"at most {MAX_SWEEP_POINTS} points per sweep",
                )
        for k, v in doc.items():
            _check_ranges(v, (*path, k), fail)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            _check_ranges(v, (*path, i), fail)


# --- a sweep against the machine -------------------------------------------------------------
# What the simulator keeps per set and per line (way) of every cache and TLB instance, measured
# with tracemalloc on sim.cache.Cache (gtx980 profile, 2^14-2^16 sets of 4-16 ways: 194-290 B per
# set plus 24 B per way), rounded up. The arrays a sweep chases are held sparsely (a TLB sweep
# over 8 GiB touches one word per page), so the simulator's caches are what can exhaust a host.
SIM_BYTES_PER_SET = 320
SIM_BYTES_PER_LINE = 32


def simulator_bytes(profile: Any) -> int:
    """Estimated memory of the simulator's caches and TLBs for a DeviceProfile."""
    total = 0
    for spec in profile.caches.values():
        instances = getattr(spec, "instances_per_sm", 1) or 1
        total += instances * (
            len(spec.set_ways) * SIM_BYTES_PER_SET + sum(spec.set_ways) * SIM_BYTES_PER_LINE
        )
    for level in profile.tlbs.levels if profile.tlbs else ():
        total += len(level.set_ways) * SIM_BYTES_PER_SET + sum(level.set_ways) * SIM_BYTES_PER_LINE
    return total


def available_memory_bytes() -> int | None:
    """Memory the kernel says can be allocated without swapping (MemAvailable), or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def sweep_memory_problem(profile: Any, *, available: int | None) -> str | None:
    """Why a simulated sweep of this profile cannot fit in memory (with the numbers), or None."""
    need = simulator_bytes(profile)
    if available is None or need <= available:
        return None
    return (
        f"needs about {need} B for the simulator's caches and TLBs ({SIM_BYTES_PER_SET} B per "
        f"set, {SIM_BYTES_PER_LINE} B per line) but the machine has {available} B available; "
        "allowed: a profile whose caches fit (fewer sets or lines), or a larger host"
    )
