"""The twin profile's blocks beside the caches: TLBs and the page-table window, shared memory,
outstanding-request handling (each from the topology's element of the same name), and what the
timing code adds (from the topology's `timing` block, the `timing_overhead` analysis)."""

from __future__ import annotations

from typing import Any

from . import defaults as D
from .reading import TopologyReader, round_int


def tlbs_block(b: TopologyReader) -> dict[str, Any] | None:
    levels = []
    for name in ("l1_tlb", "l2_tlb"):
        entries, page = b.value(name, "entries"), b.value(name, "page_bytes")
        if not entries or not page or page & (page - 1):
            continue
        cite = {"entries": b.cite(name, "entries"), "page_bytes": b.cite(name, "page_bytes")}
        level: dict[str, Any] = {"name": name, "entries": int(entries), "page_bytes": int(page)}
        ways = b.value(name, "ways_per_set")
        if ways and sum(ways) == entries:
            level["set_ways"] = [int(w) for w in ways]
            cite["set_ways"] = b.cite(name, "ways_per_set")
        else:
            level["ways"] = int(entries)
            cite["ways"] = b.assume(
                f"tlbs.{name}.ways", "fully associative: the run left its sets undetermined"
            )
        policy = b.value(name, "policy")
        if policy in ("lru", "fifo", "random"):
            level["policy"] = {"kind": policy, "cite": {"kind": b.cite(name, "policy")}}
        else:
            level["policy"] = {
                "kind": "lru",
                "cite": {"kind": b.assume(f"tlbs.{name}.policy", D.POLICY_REASON)},
            }
        penalty = b.value(name, "miss_penalty_cycles")
        level["miss_penalty_cycles"] = round_int(penalty or 0)
        cite["miss_penalty_cycles"] = (
            b.cite(name, "miss_penalty_cycles")
            if penalty is not None
            else b.assume(f"tlbs.{name}.miss_penalty_cycles", "0: no penalty measured")
        )
        level["cite"] = cite
        levels.append(level)
    if not levels:
        return None
    out: dict[str, Any] = {"levels": levels}
    window = b.value("page_table", "page_table_window_bytes")
    if window:
        out["page_table_window_bytes"] = int(window)
        switch = b.value("page_table", "window_switch_penalty_cycles")
        out["window_switch_penalty_cycles"] = round_int(switch or 0)
        out["cite"] = {
            "page_table_window_bytes": b.cite("page_table", "page_table_window_bytes"),
            "window_switch_penalty_cycles": b.cite("page_table", "window_switch_penalty_cycles")
            if switch is not None
            else b.assume("tlbs.window_switch_penalty_cycles", "0: not measured"),
        }
    return out


def shared_block(b: TopologyReader) -> dict[str, Any] | None:
    banks, width = b.value("shared", "banks"), b.value("shared", "bank_width_bytes")
    size, base = b.value("shared", "size_bytes"), b.value("shared", "hit_latency_cycles")
    if None in (banks, width, base):
        return None
    out: dict[str, Any] = {
        "size_bytes": int(size or D.SHARED_BYTES),
        "banks": int(banks),
        "bank_width_bytes": int(width),
    }
    cite = {k: b.cite("shared", k) for k in ("banks", "bank_width_bytes")}
    cite["size_bytes"] = (
        b.cite("shared", "size_bytes")
        if size
        else b.assume("shared.size_bytes", f"{D.SHARED_BYTES} B: the driver reported no size")
    )
    modes = b.value("shared", "modes_bytes")
    if modes:
        out["modes_bytes"] = [int(m) for m in modes]
        cite["modes_bytes"] = b.cite("shared", "modes_bytes")
    out["base_latency_cycles"] = round_int(base)
    cite["base_latency_cycles"] = b.cite("shared", "hit_latency_cycles")
    conflict = b.value("shared", "conflict_latency_cycles")
    out["conflict_latency_cycles"] = round_int(conflict) if conflict else D.SHARED_CONFLICT_CYCLES
    cite["conflict_latency_cycles"] = (
        b.cite("shared", "conflict_latency_cycles")
        if conflict
        else b.assume(
            "shared.conflict_latency_cycles", "2 cycles per extra way, as TPDS Table VIII"
        )
    )
    out["peak_bytes_per_cycle_per_sm"] = int(banks) * int(width)
    cite["peak_bytes_per_cycle_per_sm"] = f"derived: banks x bank_width_bytes = {banks} x {width}"
    out["cite"] = cite
    return out


def requests_block(b: TopologyReader) -> dict[str, Any] | None:
    kind, entries = b.value("requests", "kind"), b.value("requests", "entries")
    if kind not in ("mshr", "prt") or not entries:
        return None
    out: dict[str, Any] = {"kind": kind, "entries": int(entries)}
    cite = {"kind": b.cite("requests", "kind"), "entries": b.cite("requests", "entries")}
    for q in ("merge_capacity", "per_warp_limit"):
        if b.value("requests", q):
            out[q] = int(b.value("requests", q))
            cite[q] = b.cite("requests", q)
    out["cite"] = cite
    return out


# the profile's timing keys and the timing_overhead quantities that measure them: the profile's
# window_overhead_cycles is what the window adds after the load (the store of the index and the
# second clock read), which the analysis calls store_clock_cycles
TIMING_KEYS = (
    ("window_overhead_cycles", "store_clock_cycles"),
    ("index_arithmetic_cycles", "index_arithmetic_cycles"),
    ("empty_window_cycles", "empty_window_cycles"),
    ("clock_read_cycles", "clock_read_cycles"),
)


def timing_block(b: TopologyReader) -> dict[str, Any] | None:
    """The profile's `timing` block from the measured timing overhead; None where the run did
    not determine the window's cost after the load (the twin's chases are then untimed)."""
    measured = b.topo.get("timing") or {}
    out: dict[str, Any] = {"cite": {}}
    for key, quantity in TIMING_KEYS:
        entry = measured.get(quantity)
        if not isinstance(entry, dict) or entry.get("value") is None:
            continue
        out[key] = max(round_int(entry["value"]), 0)
        out["cite"][key] = (
            f"measured: timing.{quantity} = {entry['value']} ({entry.get('experiment')}, "
            f"{entry.get('analysis')}#{entry.get('source')}, confidence {entry.get('confidence')})"
        )
    return out if "window_overhead_cycles" in out else None
