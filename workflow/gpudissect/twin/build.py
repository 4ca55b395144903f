"""A device profile built from a measured topology document: the digital twin of a GPU.

Every value of the profile cites where it came from, in the `cite` map of its block:
`measured: <element>.<quantity> = <value> (<experiment>, <analysis>#<pointer>, confidence c)`
for a value the run determined, `driver: <fact> = <value>` for a fact the driver reported,
`derived: ...` for arithmetic on those, and `assumed: <why>` where the run left the quantity
undetermined (the defaults of `defaults.py`). The profile is plain data; the simulator reads it
like any other (DESIGN.md: the analysis never reads it, comparisons are between topologies).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..exceptions import TraceError
from ..topology.reconcile import agrees
from . import defaults as D
from .blocks import (
    l2_slices_block,
    near_group_base,
    requests_block,
    shared_block,
    timing_block,
    tlbs_block,
)
from .carveout import carveout_block
from .reading import TopologyReader, round_int
from .throughput import throughput_block

L1_LEVEL = ("l1d", "texture", "readonly")
PATH_OF = {"l1d": "ca", "texture": "tex", "readonly": "nc"}
CACHES = ("l1d", "texture", "readonly", "constant_l1", "constant_l15", "l2")
# (element, quantity) the profile carries into the simulator: a twin that reads one of them
# differently points at the analysis; any other measured quantity has no mechanism in the
# simulator or was not measured (e.g. the spread of the L2's near hits within a latency group)
MODELLED = frozenset(
    {(c, q) for c in CACHES for q in ("size_bytes", "line_bytes", "sector_bytes", "sets")}
    | {(c, "fetch_granularity_bytes") for c in CACHES}
    | {(c, q) for c in CACHES for q in ("ways_per_set", "set_index_bits", "policy")}
    | {(c, q) for c in CACHES for q in ("hit_latency_cycles", "instances_per_sm", "shared_with")}
    | {(c, q) for c in CACHES for q in ("miss_latency_cycles", "miss_penalty_cycles")}
    | {(t, q) for t in ("l1_tlb", "l2_tlb") for q in ("entries", "page_bytes", "sets")}
    | {(t, q) for t in ("l1_tlb", "l2_tlb") for q in ("ways_per_set", "policy")}
    | {(t, "miss_penalty_cycles") for t in ("l1_tlb", "l2_tlb")}
    | {("shared", q) for q in ("size_bytes", "banks", "bank_width_bytes", "modes_bytes")}
    | {("shared", q) for q in ("hit_latency_cycles", "conflict_latency_cycles")}
    | {("requests", q) for q in ("kind", "entries", "merge_capacity", "per_warp_limit")}
    | {("page_table", q) for q in ("page_table_window_bytes", "window_switch_penalty_cycles")}
    # the streaming servers of the throughput block (DRAM writes share the reads' server)
    | {(e, f"read_bandwidth_{u}") for e in ("l1d", "l2", "dram") for u in ("gbps", "gibps")}
    | {("l2", f"write_bandwidth_{u}") for u in ("gbps", "gibps")}
    # the partitions, slices and near stores of the l2_slices block (twin/blocks.py: carried
    # where the run measured two partitions, their function and each SM's)
    | {("l2", q) for q in ("partitions", "partition_function", "slices", "near_size_bytes")}
    | {("l2", q) for q in ("slice_function", "slice_linear_masks", "home_lines_share_capacity")}
    | {("l2", q) for q in ("near_hit_groups", "near_hit_slow_share", "far_penalty_cycles")}
)


@dataclass
class Twin:
    """The profile (a YAML-ready mapping) and the keys it assumed, with why."""

    profile: dict[str, Any]
    assumed: list[tuple[str, str]] = field(default_factory=list)  # (dotted key, reason)


def _sector(b: TopologyReader, element: str) -> tuple[Any, str]:
    """The profile's sector (the simulator fills one per miss): the measured sector, else the
    fetch granularity, cited as standing in for it."""
    sector = b.value(element, "sector_bytes")
    if sector:
        return sector, b.cite(element, "sector_bytes")
    fetch = b.value(element, "fetch_granularity_bytes")
    if not fetch:
        return None, ""
    why = (b.elements.get(element, {}).get("sector_bytes") or {}).get("undetermined")
    return fetch, (
        b.cite(element, "fetch_granularity_bytes")
        + "; the sector is undetermined"
        + (f" ({why})" if why else "")
        + ": the fetch granularity stands in, as the simulator fills one sector per miss"
    )


def _pow2_floor(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def _top(b: TopologyReader, name: str) -> dict[str, Any]:
    gpu = b.topo.get("gpu") or b.topo.get("device")
    cite: dict[str, str] = {
        "gpu": f"measured: the topology document's gpu ({b.topo.get('device')})"
    }
    out: dict[str, Any] = {"profile_version": 1, "name": name, "gpu": f"{gpu} (twin)"}
    cc = b.driver.get("compute_capability")
    if cc:
        out["compute_capability"] = str(cc)
        cite["compute_capability"] = f"driver: compute_capability = {cc}"
    sms = b.fact((("sm_count", 1),))
    out["sms"] = round_int(sms[0]) if sms else D.DEFAULT_SMS
    cite["sms"] = sms[1] if sms else b.assume("sms", "the driver reported no SM count")
    threads = b.fact((("max_threads_per_sm", 1),))
    out["max_warps_per_sm"] = round_int(threads[0] / 32) if threads else D.DEFAULT_MAX_WARPS_PER_SM
    cite["max_warps_per_sm"] = (
        f"derived: {threads[1]} / 32 threads per warp"
        if threads
        else b.assume("max_warps_per_sm", "the driver reported no thread limit per SM")
    )
    out["cite"] = cite
    clocks: dict[str, Any] = {"cite": {}}
    for key, names, default in (
        ("sm_mhz", (("sm_clock_khz", 1e-3), ("sm_clock_mhz", 1)), D.DEFAULT_SM_MHZ),
        ("memory_mhz", (("memory_clock_khz", 1e-3), ("memory_clock_mhz", 1)), D.DEFAULT_MEMORY_MHZ),
    ):
        got = b.fact(names)
        clocks[key] = round(got[0], 3) if got else default
        clocks["cite"][key] = got[1] if got else b.assume(f"clocks.{key}", "no clock reported")
    out["clocks"] = {k: clocks[k] for k in ("sm_mhz", "memory_mhz")} | {"cite": clocks["cite"]}
    out["sms"], out["max_warps_per_sm"] = out.pop("sms"), out.pop("max_warps_per_sm")
    return out


def _groups(b: TopologyReader) -> list[list[str]]:
    """The L1-level elements with a size, grouped into physical caches by `shared_with`."""
    present = [e for e in L1_LEVEL if b.value(e, "size_bytes") is not None]
    groups: list[list[str]] = []
    for e in present:
        mates = set(b.value(e, "shared_with") or []) & set(present)
        home = next((g for g in groups if mates & set(g) or e in g), None)
        if home is None:
            groups.append([e])
        elif e not in home:
            home.append(e)
    return groups


def _cache(b: TopologyReader, element: str, fallback_line: int) -> dict[str, Any]:
    where = f"caches.{element}"
    cite: dict[str, str] = {}
    line = b.value(element, "line_bytes")
    if line is None or line & (line - 1):
        line = fallback_line
        cite["line_bytes"] = b.assume(
            f"{where}.line_bytes", f"{line} B, the line of the cache before it on its path"
        )
    else:
        cite["line_bytes"] = b.cite(element, "line_bytes")
    size = b.value(element, "size_bytes")
    if size is None:
        bound = (b.elements.get(element, {}).get("size_bytes") or {}).get("lower_bound")
        size = 2 * _pow2_floor(int(bound)) if bound else 64 * 1024
        cite["size_bytes"] = b.assume(
            f"{where}.size_bytes",
            f"{size} B: the run found it larger than the largest array it swept "
            f"({bound} B); twice that keeps it so",
        )
    else:
        cite["size_bytes"] = b.cite(element, "size_bytes")
    lines = max(int(size) // line, 1)
    out: dict[str, Any] = {"size_bytes": lines * line, "line_bytes": line}
    if lines * line != size:
        cite["size_bytes"] += f"; rounded down to whole {line}-B lines"
    sector, sector_cite = _sector(b, element)
    if sector and sector <= line and line % sector == 0 and line // sector <= 32:
        out["sector_bytes"] = int(sector)
        cite["sector_bytes"] = sector_cite
    ways = b.value(element, "ways_per_set")
    sets_measured = b.value(element, "sets")
    free = b.value(element, "free_ways_per_set")
    if free and sets_measured and len(free) == sets_measured:
        # the ways of each set a walk's data can use (the constant L1: lines the kernel keeps
        # cached take the others): unequal sets from the array's first line on
        out["set_ways"] = [int(w) for w in free]
        cite["set_ways"] = b.cite(element, "free_ways_per_set")
        out["size_bytes"] = sum(out["set_ways"]) * line
        cite["size_bytes"] = (
            f"derived: the free ways of the {len(free)} sets x {line} B "
            f"({b.cite(element, 'free_ways_per_set')})"
        )
        sets = len(free)
    elif ways and sum(ways) == lines:
        out["set_ways"] = [int(w) for w in ways]
        cite["set_ways"] = b.cite(element, "ways_per_set")
        sets = len(out["set_ways"])
    elif ways and len(set(ways)) == 1 and sets_measured and sets_measured * ways[0] >= lines:
        # sets x ways measured (eviction sets) hold more lines than the data the size sweeps
        # fit: the lines the tags index are not all data (Hopper's L1 beside its shared-memory
        # carveout); the cache is the measured geometry, its data the measured size
        sets = int(sets_measured)
        out["ways"] = int(ways[0])
        cite["ways"] = b.cite(element, "ways_per_set") + "; " + b.cite(element, "sets")
        out["size_bytes"] = sets * out["ways"] * line
        cite["size_bytes"] = (
            f"derived: sets x ways x line = {sets} x {out['ways']} x {line} "
            f"({b.cite(element, 'sets')})"
        )
        if sets * out["ways"] > lines:
            out["data_bytes"] = lines * line
            cite["data_bytes"] = b.cite(element, "size_bytes") + (
                f"; the {lines} lines the data array holds of the {sets * out['ways']} "
                "the sets and ways index"
            )
    elif element == "l2" and _hashed_l2(b) and (folded := _folded_geometry(lines)):
        out["ways"], sets = folded
        cite["ways"] = b.assume(
            f"{where}.ways",
            f"{out['ways']} ways x {sets} sets of {lines} lines (sets and ways undetermined; as "
            "many sets as a power of two divides the lines, for the hashed index below)",
        )
    else:
        out["ways"], sets = D.default_geometry(lines, element)
        cite["ways"] = b.assume(
            f"{where}.ways",
            f"{out['ways']} ways x {sets} sets of {lines} lines (sets and ways undetermined; sets "
            "that 2, 3 or 5 does not divide take walks at a stride of 2, 3/2 or 5/2 lines as the "
            "GPU's did: config/README.md, 'Digital twins of a measured GPU')",
        )
        if out["ways"] * sets != lines:
            out["size_bytes"] = out["ways"] * sets * line
            cite["size_bytes"] += f"; rounded down to {sets} whole sets of {out['ways']} ways"
    bits = b.value(element, "set_index_bits")
    masks = _index_masks(b, element)
    if bits and 2 ** len(bits) == sets:
        out["index"] = {"kind": "bit_list", "bits": [int(x) for x in bits]}
        cite["index"] = b.cite(element, "set_index_bits")
    elif masks and 2 ** len(masks[0]) == sets:
        folded, top = _fold_above(masks[0])
        out["index"] = {"kind": "xor", "masks": folded}
        cite["index"] = masks[1]
        if top < D.ADDRESS_BITS - 1:
            cite["index"] += "; " + b.assume(
                f"{where}.index.high_bits",
                f"address bits {top + 1}-{D.ADDRESS_BITS - 1}, above those the masks were solved "
                f"over, folded in (bit {top + 1}+j into mask j mod {len(folded)}): an index of "
                "no bit above them would crowd a walk at a power-of-two stride near "
                f"2^{top} B into few sets",
            )
    elif element == "l2" and _hashed_l2(b) and sets & (sets - 1) == 0 and sets > 1:
        out["index"] = {"kind": "xor", "masks": D.fold_masks(sets, line)}
        cite["index"] = b.assume(
            f"{where}.index",
            "an XOR fold of every address bit above the line into the set bits (bit "
            f"{line.bit_length() - 1}+i+{sets.bit_length() - 1}j into set bit i): the GPU's L2 "
            f"is hashed ({_hash_evidence(b)}); "
            "contiguous bits would crowd walks at power-of-two strides into few sets",
        )
    elif sets > 1:
        cite["index"] = b.assume(f"{where}.index", D.INDEX_REASON)
    out["policy"] = _policy(b, element, out, cite, where)
    out["hit_latency_cycles"] = round_int(b.value(element, "hit_latency_cycles") or 0)
    cite["hit_latency_cycles"] = (
        b.cite(element, "hit_latency_cycles")
        if b.value(element, "hit_latency_cycles") is not None
        else b.assume(f"{where}.hit_latency_cycles", "0 cycles: no hit latency measured")
    )
    copies = b.value(element, "instances_per_sm")
    if copies and copies > 1:
        out["instances_per_sm"] = int(copies)
        cite["instances_per_sm"] = b.cite(element, "instances_per_sm")
    out["cite"] = cite
    return out


def _fold_above(masks: list[int]) -> tuple[list[int], int]:
    """The masks with every address bit above their highest folded in, bit top+1+j into mask
    j mod len(masks); and that highest bit."""
    top = max(m.bit_length() for m in masks) - 1
    out = list(masks)
    for bit in range(top + 1, D.ADDRESS_BITS):
        out[(bit - top - 1) % len(out)] |= 1 << bit
    return out, top


def _hashed_l2(b: TopologyReader) -> bool:
    """The run found the L2 indexed by a hash of the address: its partitions by an XOR, or
    (one partition) its slices by a function with a linear part or a period."""
    function = b.value("l2", "slice_function") or {}
    return bool(
        b.value("l2", "partition_function")
        or b.value("l2", "slice_linear_masks")
        or function.get("masks")
        or function.get("period_bytes")
    )


def _hash_evidence(b: TopologyReader) -> str:
    """What shows the L2 hashed (`_hashed_l2`), for the index's citation."""
    if b.value("l2", "partition_function"):
        return "its partitions follow an XOR of address bits, measured by l2_slices"
    return "its slices follow a function of address bits, measured by l2_slices"


def _folded_geometry(lines: int) -> tuple[int, int] | None:
    """(ways, sets): as many sets as the largest power of two dividing `lines` (keeping at
    least 4 ways), at most 256 ways; None where no such split exists."""
    sets = lines & -lines  # the largest power of two dividing lines
    while sets > 1 and lines // sets < 4:
        sets //= 2
    ways = lines // sets
    if sets < 2 or ways > 256:
        return None
    return ways, sets


def _index_masks(b: TopologyReader, element: str) -> tuple[list[int], str] | None:
    """The XOR masks of a hashed set index (an index the analysis found linear but not
    bit-defined: `set_index_bits` undetermined, the masks in its document's
    `index_function`), with their citation."""
    for quantity in ("sets", "set_index_bits", "ways_per_set"):
        entry = (b.elements.get(element) or {}).get(quantity) or {}
        for reading in (entry, *(entry.get("other_readings") or [])):
            doc = b.read_analysis(reading.get("analysis"))
            function = (doc or {}).get("index_function") or {}
            masks = (function.get("masks") or {}).get("value")
            if function.get("linear") and masks:
                return [int(str(m), 0) for m in masks], (
                    f"measured: {element} set index = XOR masks {', '.join(masks)} "
                    f"({reading.get('experiment')}, {reading.get('analysis')}"
                    f"#/index_function/masks, confidence {function['masks'].get('confidence')})"
                )
    return None


def _policy(b: TopologyReader, element: str, cache: dict, cite: dict, where: str) -> dict[str, Any]:
    policy = b.value(element, "policy")
    ways = cache.get("ways") or min(cache["set_ways"])
    uniform = "ways" in cache or len(set(cache["set_ways"])) == 1
    freq = b.value(element, "way_replacement_freq")
    measured = b.cite(element, "policy") if policy else ""
    if policy in ("lru", "fifo", "random", "srrip"):
        return {"kind": policy, "cite": {"kind": measured}}
    if policy == "plru" and uniform and ways & (ways - 1) == 0 and ways <= 32:
        return {"kind": "plru", "cite": {"kind": measured}}
    if policy == "non-lru" and freq and uniform and len(freq) == ways:
        total = sum(freq)
        weights = [round(f / total, 6) for f in freq]
        weights[-1] = round(1 - sum(weights[:-1]), 6)
        return {
            "kind": "weighted_random",
            "weights": weights,
            "cite": {"kind": measured, "weights": b.cite(element, "way_replacement_freq")},
        }
    reason = D.POLICY_REASON
    if policy:
        reason = f"LRU: the measured {policy} does not fit the twin's {ways} ways"
    return {"kind": D.POLICY, "cite": {"kind": b.assume(f"{where}.policy", reason)}}


def _caches_and_paths(b: TopologyReader) -> tuple[dict[str, Any], dict[str, Any]]:
    caches: dict[str, Any] = {}
    paths: dict[str, Any] = {"cite": {}}
    l2_line = b.value("l2", "line_bytes") or D.DEFAULT_LINE_BYTES
    if b.value("l2", "size_bytes") is None:
        raise TraceError(
            f"twin of {b.topo.get('device')!r}: elements.l2.size_bytes is undetermined; a twin "
            "needs the L2 (run the l2 or cache_stage1 experiment)"
        )
    for group in _groups(b):
        home = group[0]
        cache = _cache(b, home, l2_line)
        lat = {}
        for member in group:
            path = PATH_OF[member]
            mine = b.value(member, "hit_latency_cycles")
            if (
                member != home
                and mine is not None
                and round_int(mine) != cache["hit_latency_cycles"]
            ):
                lat[path] = round_int(mine)
                cache["cite"][f"path_latency_cycles.{path}"] = b.cite(member, "hit_latency_cycles")
            paths[path] = [home, "l2"]
            paths["cite"][path] = f"measured: {member}.size_bytes determined on the {path} path" + (
                f"; one cache with {home} ({b.cite(member, 'shared_with')})"
                if member != home
                else ""
            )
        if lat:
            cache["path_latency_cycles"] = lat
        caches[home] = cache
    const = []
    for element in ("constant_l1", "constant_l15"):
        if b.value(element, "size_bytes") is not None or b.value(element, "hit_latency_cycles"):
            line = caches[const[-1]]["line_bytes"] if const else l2_line
            caches[element] = _cache(b, element, line)
            const.append(element)
    if const:
        paths["const"] = [*const, "l2"]
        paths["cite"]["const"] = f"measured: {', '.join(const)} found on the const path"
    caches["l2"] = _cache(b, "l2", D.DEFAULT_LINE_BYTES)
    reported = b.fact((("l2_cache_size_bytes", 1),))
    if reported and round_int(reported[0]) != caches["l2"]["size_bytes"]:
        # the GPU's run sized its L2 sweeps from the driver's L2: the twin's sweep the same
        caches["l2"]["reported_size_bytes"] = round_int(reported[0])
        caches["l2"]["cite"]["reported_size_bytes"] = reported[1] + " (sets sweep ranges only)"
    paths["cg"] = ["l2"]
    paths["cite"]["cg"] = "measured: l2.size_bytes determined on the L2-only (cg) path"
    for path in ("ca", "nc", "tex"):
        if path not in paths:
            paths[path] = ["l2"]
            paths["cite"][path] = (
                "measured: no L1-level cache was sized on this path; its loads read the L2"
            )
    return caches, {k: paths[k] for k in ("ca", "cg", "nc", "tex", "const", "cite") if k in paths}


def _l2_path_latencies(
    b: TopologyReader, l2: dict, firsts: list, const: list, slices: dict | None
) -> None:
    """An L1-level miss is an L2 hit: where a path's miss latency differs from the hit latency
    the twin's L2 carries (Fermi's texture path reaches the L2 more slowly, NPC Table 5; on the
    H100 the ca and nc misses read 292 and 296 cycles against a 283-cycle fast group of the near
    hits), the L2 has a latency of its own on that path. Called once the L2's hit latency is
    final: the fast group's where the slices carry the slow near hits (`twin_profile`).

    Where the L2's partitions keep no near copies (`slices`: the twin's `l2_slices` block), an
    L1-sized walk reads each line from its own partition, near or far by address: a miss
    latency between the near and the far hit is that mix (a median of two groups), which the
    partitions reproduce, not a path of its own."""
    pairs = [(path, element) for path, element in firsts]
    if const:
        pairs.append(("const", const[-1]))
    hit = l2["hit_latency_cycles"]
    far = (slices or {}).get("far_cycles") or 0
    mixed = bool(far) and "near_copies" not in (slices or {})
    for path, element in pairs:
        miss = b.value(element, "miss_latency_cycles")
        if miss is None or agrees(miss, hit):
            continue
        if mixed and (hit <= miss <= hit + far or agrees(miss, hit + far)):
            l2["cite"]["hit_latency_cycles"] += (
                f"; {b.cite(element, 'miss_latency_cycles')} on {path}: between the near hit "
                f"({hit}) and the far one ({hit + far}), the mix of near and far lines the "
                "partitions give (no latency of its own)"
            )
            continue
        l2.setdefault("path_latency_cycles", {})[path] = round_int(miss)
        l2["cite"][f"path_latency_cycles.{path}"] = (
            b.cite(element, "miss_latency_cycles") + f" (a {element} miss on {path} hits the L2)"
        )


def _dram(b: TopologyReader) -> dict[str, Any]:
    out: dict[str, Any] = {"cite": {}}
    miss = b.value("l2", "miss_latency_cycles")
    home_miss = b.value("l2", "near_home_miss_latency_cycles")
    if b.value("l2", "home_lines_share_capacity") is True and home_miss is not None:
        # the pooled miss level mixes the lines homed near with those that add the far trip
        out["latency_cycles"] = round_int(home_miss)
        out["cite"]["latency_cycles"] = (
            b.cite("l2", "near_home_miss_latency_cycles")
            + " (a line homed in the SM's partition that misses the L2 reads DRAM; one homed "
            "in the other adds the far term)"
        )
    else:
        out["latency_cycles"] = (
            round_int(miss)
            if miss is not None
            else 4 * round_int(b.value("l2", "hit_latency_cycles") or 100)
        )
        out["cite"]["latency_cycles"] = (
            b.cite("l2", "miss_latency_cycles") + " (a load that misses the L2 reads DRAM)"
            if miss is not None
            else b.assume(
                "dram.latency_cycles", "four L2 hit latencies: no L2 miss latency measured"
            )
        )
    size = b.value("dram", "size_bytes")
    if size:
        out["size_bytes"] = int(size)
        out["cite"]["size_bytes"] = b.cite("dram", "size_bytes")
    return {k: out[k] for k in ("latency_cycles", "size_bytes", "cite") if k in out}


def twin_profile(topology: dict[str, Any], *, name: str, base: str | None = None) -> Twin:
    """The twin of the device `topology` describes (a topology document, config/README.md);
    `base`: where its analysis documents are read from when their paths do not resolve as
    given (the document's folder: `TopologyReader`)."""
    b = TopologyReader(topology, base=base)
    profile = _top(b, name)
    caches, paths = _caches_and_paths(b)
    profile["dram"] = _dram(b)
    profile["caches"] = caches
    profile["paths"] = paths
    for key, block in (
        ("tlbs", tlbs_block(b)),
        ("shared", shared_block(b)),
        ("requests", requests_block(b)),
        ("timing", timing_block(b)),
        ("l2_slices", l2_slices_block(b, sms=profile["sms"])),
        (
            "throughput",
            throughput_block(b, sms=profile["sms"], sm_mhz=profile["clocks"]["sm_mhz"]),
        ),
    ):
        if block is not None:
            profile[key] = block
        else:
            b.assume(key, f"no {key} block: the run did not determine what it needs")
    carveout, why = carveout_block(b)
    if carveout is not None and "l1d" in profile["caches"]:
        profile["carveout"] = carveout
    else:
        b.assume("carveout", f"no carveout block: {why or 'the twin has no L1'}")
    slices = profile.get("l2_slices") or {}
    if any(slices.get("slice_cycles") or ()) and near_group_base(b) is not None:
        # the slow near hits come from their slices: the cache's own hit is the fast group's
        l2 = profile["caches"]["l2"]
        l2["hit_latency_cycles"] = round_int(near_group_base(b))
        l2["cite"]["hit_latency_cycles"] = (
            f"measured: the fast group of the near hits ({b.cite('l2', 'near_hit_groups')}); "
            "the slow group adds its slices' slice_cycles"
        )
    firsts = [(PATH_OF[e], e) for group in _groups(b) for e in group]
    const = [e for e in ("constant_l1", "constant_l15") if e in profile["caches"]]
    _l2_path_latencies(b, profile["caches"]["l2"], firsts, const, profile.get("l2_slices"))
    profile["noise"] = dict(D.NOISE) | {
        "cite": {k: b.assume(f"noise.{k}", D.NOISE_REASON) for k in D.NOISE}
    }
    return Twin(profile, b.assumed)
