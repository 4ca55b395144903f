"""The twin profile's blocks beside the caches: TLBs and the page-table window, shared memory,
outstanding-request handling (each from the topology's element of the same name), and what the
timing code adds (from the topology's `timing` block, the `timing_overhead` analysis)."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import defaults as D
from .reading import TopologyReader, round_int


def _tlb_entries(b: TopologyReader, name: str, below: dict | None) -> tuple[int, int, str] | None:
    """(entries, page bytes, citation note) of a TLB level: measured, or (a level the mapping
    walks found only by its reach, Hopper's third level) its scattered reach in pages of the
    level below it."""
    entries, page = b.value(name, "entries"), b.value(name, "page_bytes")
    if entries and page and not page & (page - 1):
        return int(entries), int(page), ""
    reach = b.value(name, "reach_scattered_bytes") or b.value(name, "reach_contiguous_bytes")
    if not reach or below is None:
        return None
    page = below["page_bytes"]
    quantity = (
        "reach_scattered_bytes"
        if b.value(name, "reach_scattered_bytes")
        else ("reach_contiguous_bytes")
    )
    note = (
        f"derived: {b.cite(name, quantity)} / the {below['name']}'s page of {page} B; the page "
        f"assumed the level below it's"
    )
    b.assume(f"tlbs.{name}.page_bytes", f"{page} B, the page of {below['name']} (not measured)")
    return round_int(reach / page), page, note


def tlbs_block(b: TopologyReader) -> dict[str, Any] | None:
    levels = []
    for name in ("l1_tlb", "l2_tlb", "l3_tlb"):
        got = _tlb_entries(b, name, levels[-1] if levels else None)
        if got is None:
            continue
        entries, page, note = got
        if note:
            cite = {"entries": note, "page_bytes": note}
        else:
            cite = {"entries": b.cite(name, "entries"), "page_bytes": b.cite(name, "page_bytes")}
        level: dict[str, Any] = {"name": name, "entries": entries, "page_bytes": page}
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
        coalesce = b.value(name, "coalesced_pages")
        if (
            coalesce
            and int(coalesce) > 1
            and not int(coalesce) & (int(coalesce) - 1)
            and page % int(coalesce) == 0
        ):
            # the measured page is the unit one entry covers: the sim's page times the pages
            # an entry coalesces
            level["coalesce_pages"] = int(coalesce)
            level["page_bytes"] = page // int(coalesce)
            cite["coalesce_pages"] = b.cite(name, "coalesced_pages")
            cite["page_bytes"] = (
                f"derived: the unit one entry covers / the pages it coalesces = {page} / "
                f"{int(coalesce)} ({cite['page_bytes']}; {cite['coalesce_pages']})"
            )
        elif coalesce:
            cite["coalesce_pages"] = b.cite(name, "coalesced_pages") + " (no coalescing)"
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
    if "window_overhead_cycles" not in out:
        return None
    by_path = _window_overhead_by_path(b, measured.get("store_clock_cycles"))
    if by_path:
        key = "window_overhead_by_path_cycles"
        out[key], out["cite"][key] = by_path
    return out


def _window_overhead_by_path(b: TopologyReader, entry: dict) -> tuple[dict, str] | None:
    """Each load path's own window overhead (its store_clock_cycles in the timing_overhead
    document), where one was measured; None where the document has no paths."""
    doc = b.read_analysis(entry.get("analysis")) or {}
    paths = {
        path: max(round_int(q["store_clock_cycles"]["value"]), 0)
        for path, q in sorted((doc.get("paths") or {}).items())
        if ((q or {}).get("store_clock_cycles") or {}).get("value") is not None
    }
    if not paths:
        return None
    return paths, (
        f"measured: timing.store_clock_cycles per load path ({entry.get('experiment')}, "
        f"{entry.get('analysis')}#/paths/*/store_clock_cycles)"
    )


def _partition_sms(b: TopologyReader, sms: int) -> tuple[list[int], str] | None:
    """Each SM's L2 partition: the constant of its partition function (the l2_slices
    document's per-SM readings), with the citation."""
    entry = (b.elements.get("l2") or {}).get("partitions") or {}
    doc = b.read_analysis(entry.get("analysis")) or {}
    per_sm = {int(s["sm"]): int(s["constant"]) for s in doc.get("sms") or [] if "constant" in s}
    if len(per_sm) != sms or set(per_sm) != set(range(sms)):
        return None
    return [per_sm[s] for s in range(sms)], (
        f"measured: the partition of each SM = the constant of its partition function "
        f"({entry.get('experiment')}, {entry.get('analysis')}#/sms, {len(per_sm)} SMs)"
    )


# the lines of one period of the twin's slice table: 2**20 B covers a partition function over
# address bits up to 19 (the H100's and H200's); a function over higher bits needs more
MAX_TABLE_LINES = 1 << 16


def near_group_base(b: TopologyReader) -> float | None:
    """The L2 hit latency a twin with the near hits' two groups starts from (the fast group's),
    or None where the run did not split the near hits."""
    groups = b.value("l2", "near_hit_groups")
    return float(groups[0]) if groups and b.value("l2", "near_hit_slow_share") else None


def _near_groups(b, out, cite, mask, far) -> dict[str, Any] | None:
    """Slices of their own latency where the footprint sweep split the near hits into a fast
    and a slow group by address: per partition, the measured slice count's half (two where
    the slices are undetermined), the measured share of them slow (slice_cycles slow - fast);
    a line's partition is the measured XOR of address bits, its slice within the partition a seeded
    choice that gives every slice of a partition as many of its lines (a table over one period
    of the function); the far term counts from the fast group. The groups' own spread is not
    carried: the run does not tell how much of it is per address and how much per access (spread
    per slice, the paired-address reading of the TLBs keeps the L1 TLB's misses; per access, it
    loses them). None where the run did not split the near hits."""
    base = near_group_base(b)
    line = int(b.value("l2", "line_bytes") or D.DEFAULT_LINE_BYTES)
    period = 1 << max(mask.bit_length(), line.bit_length())
    if base is None or far is None or period // line > MAX_TABLE_LINES:
        return None
    fast, slow = (float(x) for x in b.value("l2", "near_hit_groups"))
    share = float(b.value("l2", "near_hit_slow_share"))
    measured = b.value("l2", "slices")
    per = int(measured) // 2 if measured and int(measured) % 2 == 0 else 2
    extra = _slice_group_masks(b, mask, per, line)
    period = 1 << max(mask.bit_length(), line.bit_length(), *(m.bit_length() for m in extra))
    groups = 1 << len(extra)
    slow_per = min(max(round(share * per), 1), per - 1)
    slice_cycles = [
        round_int(slow - fast) if k % per >= per - slow_per else 0 for k in range(2 * per)
    ]
    # each slice of a partition holds as many of its lines as the others: the share of lines
    # in slow slices is the share of slow slices (the slow slices, the partition's last, fall
    # in every group of the measured linear part)
    table = _balanced_table(period // line, line, mask, extra, per)
    cite["slices"] = (
        (
            b.cite("l2", "slices")
            if measured and per * 2 == int(measured)
            else b.assume(
                "l2_slices.slices", "two per partition: the run left the slices undetermined"
            )
        )
        + "; the near hits' fast and slow groups ("
        + b.cite("l2", "near_hit_groups")
        + ") by slice"
    )
    cite["index"] = b.cite("l2", "partition_function") + f" (mask {mask:#x}) for the partition; "
    if extra:
        cite["index"] += (
            b.cite("l2", "slice_linear_masks")
            + f" for the group of {per // groups} slices of the partition (the parities of "
            + ", ".join(f"{m:#x}" for m in extra)
            + " beside the partition's); "
        )
        unknown = (
            f"which slice of its group a line is in: a seeded pseudo-random choice over each "
            f"{period}-B period (the run measured the partition function, the slice count and "
            "the slice function's linear part, not the rest of the address function)"
        )
    else:
        unknown = (
            f"which slice of its partition a line is in: a seeded pseudo-random choice over each "
            f"{period}-B period (the run measured the partition function and the slice count, "
            "not the address function within a partition)"
        )
    cite["index"] += b.assume("l2_slices.index.slice_of_line", unknown)
    cite["slice_cycles"] = (
        f"derived: {slow_per} of the {per} slices of each partition slow, slow - fast = "
        f"{slow} - {fast} ({b.cite('l2', 'near_hit_slow_share')})"
    )
    if b.value("l2", "near_hit_spread_cycles"):
        b.assume(
            "l2_slices.slice_cycles.spread",
            "none within a group: the run measured the groups' spread "
            f"({b.cite('l2', 'near_hit_spread_cycles')}) but not whether it is per address "
            "or per access",
        )
    cite["slice_partition"] = f"derived: slices 0-{per - 1} in partition 0, the rest in 1"
    cite["far_cycles"] = (
        f"derived: far hit - fast near hit = {far} - {fast} "
        f"({b.cite('l2', 'far_hit_latency_cycles')}; {b.cite('l2', 'near_hit_groups')})"
    )
    return out | {
        "slices": 2 * per,
        "index": {"kind": "table", "period_bytes": period, "sets_of_lines": table},
        "slice_partition": [k // per for k in range(2 * per)],
        "slice_cycles": slice_cycles,
        "far_cycles": max(round_int(far - fast), 0),
    }


def _slice_index(b: TopologyReader, mask: int, slices: int, line: int):
    """The measured slice function of `slices` slices as the sim's index (two partitions, half
    of the slices in each, where `mask`, the partition function's, is not 0; else one): an XOR
    index of its masks where the run read it linear and the partition mask is a combination of
    them, else a table over one period of it (the partition, the function's measured linear
    part and, within those, a seeded choice that gives each slice as many lines: a function
    the run left undetermined or not linear has only its linear part, if any, carried); with
    each slice's partition and the citation. None where the table would exceed
    MAX_TABLE_LINES."""
    function = b.value("l2", "slice_function") or {}
    kind = function.get("kind")
    masks = [int(m, 16) if isinstance(m, str) else int(m) for m in function.get("masks") or []]
    per = slices // 2 if mask else slices
    if kind == "xor" and len(masks) <= 12 and 1 << len(masks) == slices:
        picks = [c for c in range(1 << len(masks)) if _combined(masks, c) == mask]
        if picks:
            partition = [bin(k & picks[0]).count("1") & 1 for k in range(slices)]
            cite = b.cite("l2", "slice_function") + (
                f": slice bit k = the parity of the address under mask k; its partition the "
                f"parity of the slice bits {picks[0]:#x} (their masks XOR to the partition "
                f"function's {mask:#x})"
            )
            return {"kind": "xor", "masks": masks}, partition, cite
    extra = _slice_group_masks(b, mask, per, line)
    period = 1 << max(mask.bit_length(), line.bit_length(), *(m.bit_length() for m in extra))
    period = max(period, int(function.get("period_bytes") or 0))
    if period // line > MAX_TABLE_LINES:
        return None
    table = _balanced_table(period // line, line, mask, extra, per)
    cite = (
        (b.cite("l2", "slice_function") if function else "the slice function undetermined")
        + f"; a table over {period} B: the partition (mask {mask:#x}), "
        + (
            "the parities of " + ", ".join(f"{m:#x}" for m in extra) + " for a group of "
            f"{per >> len(extra)} slices, "
            if extra
            else ""
        )
        + b.assume(
            "l2_slices.index.slice_of_line",
            "which slice of its group a line is in: a seeded pseudo-random choice giving each "
            "slice as many lines (the run measured the slice count and the function's linear "
            "part, not the rest of it)",
        )
    )
    index = {"kind": "table", "period_bytes": period, "sets_of_lines": table}
    return index, [k // per for k in range(slices)], cite


def _combined(masks: list[int], pick: int) -> int:
    """The XOR of the masks whose bit is set in `pick`."""
    out = 0
    for k, m in enumerate(masks):
        if pick >> k & 1:
            out ^= m
    return out


def _balanced_table(lines: int, line: int, mask: int, extra: list[int], per: int) -> list[int]:
    """The slice of each line of one period: its partition the parity under `mask`, its group
    the parities under `extra`, within those a seeded order that gives each of the group's
    slices as many lines (within one). Slice r * groups + j of partition p (its slices p * per
    up to (p + 1) * per - 1) is in group j."""
    groups = 1 << len(extra)
    rng = D.seeded_rng()
    parity = [bin((i * line) & mask).count("1") & 1 for i in range(lines)]
    group = [
        sum((bin((i * line) & m).count("1") & 1) << k for k, m in enumerate(extra))
        for i in range(lines)
    ]
    table = [0] * lines
    for p in (0, 1) if mask else (0,):
        for j in range(groups):
            mine = [i for i in range(lines) if parity[i] == p and group[i] == j]
            order = rng.permutation(np.resize(np.arange(per // groups), len(mine)))
            for i, r in zip(mine, order, strict=True):
                table[i] = p * per + int(r) * groups + j
    return table


def _one_partition(b: TopologyReader, sms: int) -> dict[str, Any] | None:
    """The L2's slices where the run measured one partition, the slice count and the slice
    function (the sim's `l2_slices` block with every SM and slice in partition 0 and no
    latency terms), else None."""
    slices = b.value("l2", "slices")
    line = int(b.value("l2", "line_bytes") or D.DEFAULT_LINE_BYTES)
    if b.value("l2", "partitions") != 1 or not slices:
        return None
    got = _slice_index(b, 0, int(slices), line)
    if got is None:
        return None
    index, _, index_cite = got
    return {
        "cache": "l2",
        "slices": int(slices),
        "index": index,
        "slice_partition": [0] * int(slices),
        "sm_partition": [0] * sms,
        "far_cycles": 0,
        "cite": {
            "slices": b.cite("l2", "slices"),
            "index": index_cite,
            "slice_partition": "derived: every slice in the one partition ("
            + b.cite("l2", "partitions")
            + ")",
            "sm_partition": "derived: every SM attached to the one partition",
            "far_cycles": "derived: 0, no other partition",
        },
    }


def l2_slices_block(b: TopologyReader, *, sms: int) -> dict[str, Any] | None:
    """The L2's partitions and slices (the sim's `l2_slices` block): with two partitions the
    partition function, each SM's partition, the far term, the measured slices and their
    function (one slice per partition where the run left them undetermined) and, where the
    footprint sweep saw near hits up to a near size, the near copies; with one partition its
    measured slices and function."""
    partitions, bits = b.value("l2", "partitions"), b.value("l2", "partition_function")
    if partitions == 1:
        return _one_partition(b, sms)
    if partitions != 2 or not bits:
        return None
    of_sms = _partition_sms(b, sms)
    if of_sms is None:
        return None
    mask = sum(1 << int(x) for x in bits)
    cite = {
        "slices": b.cite("l2", "partitions")
        + "; one slice per partition (the run left the slices undetermined)",
        "index": b.cite("l2", "partition_function") + f" (mask {mask:#x})",
        "slice_partition": "derived: slice k is partition k",
        "sm_partition": of_sms[1],
    }
    near, far = b.value("l2", "hit_latency_cycles"), b.value("l2", "far_hit_latency_cycles")
    if near is not None and far is not None:
        far_cycles = round_int(far - near)
        cite["far_cycles"] = (
            f"derived: far hit - near hit = {far} - {near} "
            f"({b.cite('l2', 'far_hit_latency_cycles')}"
            f"; {b.cite('l2', 'hit_latency_cycles')})"
        )
        if b.value("l2", "far_penalty_cycles") is not None:
            cite["far_cycles"] += (
                f"; the slice map's own reading: {b.cite('l2', 'far_penalty_cycles')}"
            )
    elif b.value("l2", "far_penalty_cycles") is not None:
        far_cycles = round_int(b.value("l2", "far_penalty_cycles"))
        cite["far_cycles"] = b.cite("l2", "far_penalty_cycles")
    else:
        return None
    out: dict[str, Any] = {
        "cache": "l2",
        "slices": 2,
        "index": {"kind": "xor", "masks": [mask]},
        "slice_partition": [0, 1],
        "sm_partition": of_sms[0],
        "far_cycles": max(far_cycles, 0),
    }
    grouped = _near_groups(b, out, cite, mask, far)
    measured = b.value("l2", "slices")
    line = int(b.value("l2", "line_bytes") or D.DEFAULT_LINE_BYTES)
    sliced = (
        _slice_index(b, mask, int(measured), line)
        if grouped is None and measured and int(measured) % 2 == 0
        else None
    )
    if grouped is not None:
        out = grouped
    elif sliced is not None:
        out["slices"] = int(measured)
        out["index"], out["slice_partition"], cite["index"] = sliced
        cite["slices"] = b.cite("l2", "slices")
        cite["slice_partition"] = (
            f"derived: the partition of each slice ({int(measured) // 2} in each, "
            + b.cite("l2", "partitions")
            + ")"
        )
    elif measured is None:
        b.assume(
            "l2_slices.slices", "one slice per partition: the run left the slices undetermined"
        )
    near_size = b.value("l2", "near_size_bytes")
    home_lines = _home_lines(b, near_size, own=out["sm_partition"][0])
    line = int(b.value("l2", "line_bytes") or D.DEFAULT_LINE_BYTES)
    if home_lines is not None:
        stores = home_lines["sizes_bytes"]
        sets = _closest_sets(min(stores) // line)
        ways = [max(round(size / line / sets), 1) for size in stores]
        out["near_copies"] = {"size_bytes": [w * sets * line for w in ways], "ways": ways}
        if sets > 1:
            out["near_copies"]["index"] = {"kind": "xor", "masks": D.fold_masks(sets, line)}
        b.assume(
            "l2_slices.near_copies.ways",
            f"{' and '.join(map(str, ways))} ways x {sets} sets per partition "
            f"({', '.join(str(w * sets * line) for w in ways)} B of the derived "
            f"{', '.join(map(str, stores))}), LRU, an XOR fold of every address bit above the "
            "line as its index (the stores' sets undetermined; the L2 they are is hashed)",
        )
    elif near_size:
        lines = int(near_size) // line
        # a hashed store, as the L2 it copies is hashed (its partitions follow an XOR of
        # address bits): the index an XOR fold of every address bit above the line, over as
        # many sets as the largest power of two dividing the lines (the measured size exactly)
        # while that leaves 8-512 ways; else sets leaving about 16 ways, the size rounded
        sets = lines & -lines
        while sets > 1 and lines // sets < 8:
            sets //= 2
        if lines // sets > 512:
            sets = 1 << max((lines // 16).bit_length() - 1, 0)
        ways = max(round(lines / sets), 1)
        out["near_copies"] = {"size_bytes": ways * sets * line, "ways": ways}
        if sets > 1:
            out["near_copies"]["index"] = {"kind": "xor", "masks": D.fold_masks(sets, line)}
        b.assume(
            "l2_slices.near_copies.ways",
            f"{ways} ways x {sets} sets ({ways * sets * line} B of the measured {near_size}), LRU, "
            "an XOR fold of every address bit above the line as its index (the copies' sets "
            "undetermined; the L2 it copies is hashed)",
        )
        cite["near_copies"] = (
            b.cite("l2", "near_size_bytes")
            + "; a footprint up to it hits near, beyond it far until the L2 size: the lines an "
            "SM reads are copied into its partition, which holds this much"
        )
    if home_lines is not None:
        out["near_copies"]["home_lines"] = True
        index = out["near_copies"].get("index")
        if index is not None:
            # a store holds the lines homed in its partition: they must spread over all its
            # sets, so no parity of the set bits may follow the partition function, over the
            # bits of the largest power of two within the store (a footprint from the store's
            # size up is blocks of that many bytes, each the same spread XOR a constant)
            limit = min(out["near_copies"]["size_bytes"]).bit_length() - 1
            index["masks"] = balanced_masks(
                index["masks"], mask, low=line.bit_length() - 1, limit=limit
            )
        out["far_cycles"] = home_lines["far_cycles"]
        cite["near_copies"] = home_lines["cite"]
        cite["far_cycles"] = home_lines["far_cite"]
    out["cite"] = cite
    return out


def _slice_group_masks(b: TopologyReader, mask: int, per: int, line: int) -> list[int]:
    """The masks of the slice function's measured linear part (`l2.slice_linear_masks`) beyond
    the partition mask: those that, with it, make a basis of that part, as many as leave every
    group a whole number of the `per` slices of a partition and a table of at most
    MAX_TABLE_LINES lines (none where the part does not hold the partition mask; with one
    partition, `mask` 0, the independent masks of that part)."""
    measured = b.value("l2", "slice_linear_masks") or []
    masks = [int(m, 16) if isinstance(m, str) else int(m) for m in measured]
    if not masks or _reduce(masks, mask)[1]:
        return []
    chosen, extra = [mask], []
    for m in masks:
        if _reduce(chosen, m)[1]:
            if per % (1 << (len(extra) + 1)) or (1 << m.bit_length()) // line > MAX_TABLE_LINES:
                break
            chosen.append(m)
            extra.append(m)
    return extra


def _closest_sets(lines: int) -> int:
    """The power-of-two set count, of 8-512 ways each, whose whole ways come closest to
    ``lines`` (the more sets where two come as close)."""
    candidates = [1 << k for k in range(max(lines.bit_length(), 1)) if 8 <= lines / (1 << k) <= 512]
    if not candidates:
        return 1 << max((lines // 16).bit_length() - 1, 0)
    return min(candidates, key=lambda s: (abs(round(lines / s) * s - lines), -s))


def _home_lines(b: TopologyReader, near_size: Any, *, own: int) -> dict[str, Any] | None:
    """Where the footprint sweep split by partition showed that a partition's capacity holds
    its home lines and the copies alike (`l2.home_lines_share_capacity`): the sim's stores are
    the L2 (`near_copies.home_lines`), one per partition. The walking SM's store holds its whole
    footprint up to the near size, the other partition's its half of it up to half the L2
    size: so the walking SM's partition (``own``, SM 0's, where the simulator's sweep walks)
    takes the middle of the near size's bracket, the other the middle of the L2 size's bracket
    halved (each bracket the sweep's last footprint read below the step and its first past it;
    the reading itself where no bracket is given). The two need not be equal: the H100's are
    not (results/reference/FINDINGS.md). The far term is the slice map's least-squares far
    penalty, the trip to the other partition alone. None otherwise."""
    if b.value("l2", "home_lines_share_capacity") is not True or not near_size:
        return None
    penalty, size = b.value("l2", "far_penalty_cycles"), b.value("l2", "size_bytes")
    if penalty is None or not size:
        return None
    mid_near, mid_size = _middle(b, "near_size_bytes", near_size), _middle(b, "size_bytes", size)
    sizes = [int(mid_size / 2), int(mid_size / 2)]
    sizes[own] = int(mid_near)
    return {
        "sizes_bytes": sizes,
        "far_cycles": max(round_int(penalty), 0),
        "cite": f"derived: partition {own} (SM 0's, the footprint sweep's) the middle of the near "
        f"size's bracket, {int(mid_near)} ({b.cite('l2', 'near_size_bytes')}); partition "
        f"{1 - own} half the middle of the L2 size's, {int(mid_size)} / 2 ("
        f"{b.cite('l2', 'size_bytes')}): the walking SM's store holds its whole footprint, the "
        "other its half; each partition's store holds its home lines and the copies alike ("
        + b.cite("l2", "home_lines_share_capacity")
        + ")",
        "far_cite": b.cite("l2", "far_penalty_cycles")
        + " (the trip to the other partition; the far level of the footprint sweep mixes it "
        "with the near partition's misses)",
    }


def _middle(b: TopologyReader, quantity: str, value: Any) -> float:
    """The middle of a sweep reading's bracket (its last footprint below the step and first past
    it), or the reading where the topology gives no bracket."""
    entry = (b.elements.get("l2") or {}).get(quantity) or {}
    bracket = entry.get("bracket_bytes")
    if isinstance(bracket, list) and len(bracket) == 2:
        return (float(bracket[0]) + float(bracket[1])) / 2
    return float(value)


def _reduce(vectors: list[int], v: int) -> tuple[list[int], int]:
    """Gaussian elimination over GF(2): the basis of ``vectors`` (by leading bit) and ``v``
    reduced by it (0 where ``v`` is in their span)."""
    basis: dict[int, int] = {}
    for x in vectors:
        while x:
            top = x.bit_length() - 1
            if top not in basis:
                basis[top] = x
                break
            x ^= basis[top]
    while v:
        top = v.bit_length() - 1
        if top not in basis:
            break
        v ^= basis[top]
    return list(basis.values()), v


def balanced_masks(masks: list[int], partition_mask: int, *, low: int, limit: int) -> list[int]:
    """XOR index masks under which the lines of either partition spread over every set: over
    the address bits ``low``..``limit - 1``, the partition mask
    outside the masks' span and the masks independent. Where the given ones fail, one address
    bit outside the partition mask is added to the first mask (and bit) that passes."""
    window = ((1 << limit) - 1) ^ ((1 << low) - 1)

    def fits(ms: list[int]) -> bool:
        cut = [m & window for m in ms]
        basis, rest = _reduce(cut, partition_mask & window)
        return len(basis) == len(ms) and rest != 0

    if fits(masks):
        return list(masks)
    for i in range(len(masks)):
        for bit in range(low, limit):
            if partition_mask >> bit & 1:
                continue
            trial = list(masks)
            trial[i] ^= 1 << bit
            if fits(trial):
                return trial
    return list(masks)
