"""One value per element and quantity, from all the readings of a device's analyses.

The rule (config/README.md, "The topology document"):
1. Readings of one quantity are ranked by experiment: first the quantity's own order in
   `PRECEDENCE` (key "element.quantity"), then the element's (the experiment built for that
   element first), then the registry order of the families. Points of a per-carveout series
   never compete: they are listed under `by_carveout`.
2. The value is the first determined reading of that ranking; if none is determined, the
   quantity is undetermined with the first reading's reason.
3. Every other reading is named under `other_readings`, with whether it agrees (equal, or for
   numbers within `AGREE_REL` of the value, or, where both readings carry the interval their
   sweep's resolution leaves (`bracket_bytes`, or `resolution_bytes` above the value), intervals
   that overlap: `agrees_by` names which). A disagreeing number that lies within `MATCH_REL`
   of another quantity of the same element and unit is marked as a reading of that quantity
   (the L2 path's first miss of a partitioned L2 is the near partition's footprint, a quantity
   of its own: `l2.near_size_bytes`).
4. A reading identical to the chosen one (same value and method: a later stage that carries an
   earlier stage's value) is named under `also_in`, not as another reading.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from .gather import L1_FAMILY, Reading

# the experiment built for the element's quantities first; the others follow in registry order.
# A key "element.quantity" ranks that quantity alone, ahead of its element's order: a TLB
# level's entries come first from the walks over the mapping the experiment made, whose
# count does not depend on where the driver put the pages of a plain allocation
PRECEDENCE: dict[str, tuple[str, ...]] = {
    "l1d": ("cache_stage1", "caches", "l1_size"),
    "l2": ("l2", "cache_stage1", "caches", "l2_flush"),
    **{f"{tlb}.entries": ("tlb_mappings", "tlbs") for tlb in ("l1_tlb", "l2_tlb", "l3_tlb")},
    # the slice function and what it predicts come from the contention classes alone
    **{
        f"l2.{q}": ("l2_slices",)
        for q in ("slice_function", "slice_linear_masks", "slice_period_bytes")
        + ("predicted_contiguous_size_bytes",)
    },
    # a partitioned L2 whose partitions hold their home lines: the far hit, the miss and its
    # penalty of one population each, from the footprint sweep split by the partition function
    # (`analysis.l2.partition_capacity`); the footprint sweep's own plateaus pool two
    # populations each. Where the split does not decide that, l2_slices reports none of them
    **{
        f"l2.{q}": ("l2_slices", "l2")
        for q in ("far_hit_latency_cycles", "miss_latency_cycles", "miss_penalty_cycles")
    },
    # the L1's geometry and index first from `l1_sets` (eviction sets and the index solved over
    # GF(2)): its reason for an undetermined bit list ("hashed") is the one that holds
    **{
        f"l1d.{q}": ("l1_sets", "caches")
        for q in ("sets", "ways_per_set", "set_index_bits", "index_kind", "index_masks")
    },
    # the constant L1's geometry first from `constant_sets` (walks per stride and per start
    # offset, which see the ways the kernel's own constants hold)
    **{
        f"constant_l1.{q}": ("constant_sets", "caches")
        for q in ("sets", "ways_per_set", "set_index_bits")
    },
    # a level's streaming bandwidth from the experiment that streams a footprint sized for it
    **{
        f"{element}.{direction}_bandwidth_{unit}": ("bandwidth",)
        for element in ("l1d", "l2", "dram")
        for direction in ("read", "write")
        for unit in ("gbps", "gibps")
    },
}
AGREE_REL = 0.03
MATCH_REL = 0.10
# the size of an L1-family cache is the largest a kernel gets: the reading at the smallest
# shared partition measured (lowest carveout, then smallest shared buffer), per-carveout
# series points included, ranked as above among equals; the other points stay by_carveout
LARGEST_L1 = frozenset(f"{element}.size_bytes" for element in L1_FAMILY)
HEADLINE_RULE = (
    "the largest L1 a kernel gets: the determined reading at the smallest shared partition "
    "measured (the lowest carveout, then the smallest shared buffer beside the L1), over the "
    "experiments' readings and the per-carveout series"
)


def _rank(element: str, quantity: str, registry: tuple[str, ...]):
    first = PRECEDENCE.get(f"{element}.{quantity}", ()) + PRECEDENCE.get(element, ())
    first = tuple(dict.fromkeys(first))
    order = first + tuple(e for e in registry if e not in first)

    def key(r: Reading) -> tuple[int, str]:
        pos = order.index(r.experiment) if r.experiment in order else len(order)
        return (pos, r.pointer)

    return key


def _numeric(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def agrees(a: Any, b: Any, rel: float = AGREE_REL) -> bool:
    if _numeric(a) and _numeric(b):
        scale = max(abs(a), abs(b))
        return scale == 0 or abs(a - b) <= rel * scale
    return a == b


def interval(entry: dict[str, Any]) -> tuple[float, float] | None:
    """[low, high) that a size's sweep resolution leaves for it, when the reading records it."""
    bracket = entry.get("bracket_bytes")
    if isinstance(bracket, list | tuple) and len(bracket) == 2 and all(map(_numeric, bracket)):
        return float(bracket[0]), float(bracket[1])
    res, value = entry.get("resolution_bytes"), entry.get("value")
    if _numeric(res) and _numeric(value) and res > 0:
        return float(value), float(value + res)
    return None


def agreement(r: dict[str, Any], chosen: dict[str, Any]) -> tuple[bool, str]:
    """Whether two readings agree, and by what: equal, within `AGREE_REL`, or within the
    resolution of both sweeps (their intervals overlap)."""
    a, b = r.get("value"), chosen.get("value")
    if a == b:
        return True, "equal"
    if agrees(a, b):
        return True, f"within {AGREE_REL:.0%}"
    ia, ib = interval(r), interval(chosen)
    if ia and ib:
        overlap = max(ia[0], ib[0]) < min(ia[1], ib[1])
        return overlap, "resolution" if overlap else "beyond resolution"
    return False, f"beyond {AGREE_REL:.0%}"


def _source(r: Reading) -> dict[str, Any]:
    out: dict[str, Any] = {"experiment": r.experiment, "analysis": r.analysis, "source": r.pointer}
    if r.carveout_pct is not None:
        out["carveout_pct"] = r.carveout_pct
    return out


def _other(r: Reading, chosen: Reading | None, siblings: dict[str, Any]) -> dict[str, Any]:
    out = {**_source(r), "value": r.value}
    if r.entry.get("unit") is not None:
        out["unit"] = r.entry["unit"]
    if not r.determined:
        if "not_applicable" in r.entry:
            out["not_applicable"] = r.entry["not_applicable"]
        else:
            out["undetermined"] = r.entry.get("undetermined", "")
        return out
    out["confidence"] = r.entry.get("confidence")
    for key in ("bracket_bytes", "resolution_bytes"):
        if r.entry.get(key) is not None:
            out[key] = r.entry[key]
    if chosen is None or not chosen.determined:
        return out
    if chosen.carveout_pct != r.carveout_pct:
        out["agrees"] = None
        out["note"] = "measured at another carveout; not compared"
        return out
    buffers = (chosen.shared_buffer_bytes, r.shared_buffer_bytes)
    if None not in buffers and buffers[0] != buffers[1]:
        out["agrees"] = None
        out["shared_buffer_bytes"] = r.shared_buffer_bytes
        out["note"] = "measured beside another shared buffer (another L1 partition); not compared"
        return out
    out["agrees"], out["agrees_by"] = agreement(r.entry, chosen.entry)
    if not out["agrees"] and _numeric(r.value):
        for name, entry in siblings.items():
            if (
                name != chosen.quantity
                and entry.get("unit") == r.entry.get("unit")
                and _numeric(entry.get("value"))
                and agrees(r.value, entry["value"], MATCH_REL)
            ):
                out["note"] = f"a reading of {chosen.element}.{name} (within {MATCH_REL:.0%})"
                break
    return out


def reconcile(all_readings: list[Reading], registry: tuple[str, ...]) -> dict[str, dict]:
    """{element: {quantity: topology entry}} (entries described in the module docstring)."""
    groups: dict[tuple[str, str], list[Reading]] = defaultdict(list)
    series: dict[tuple[str, str], list[Reading]] = defaultdict(list)
    for r in all_readings:
        (series if r.series else groups)[(r.element, r.quantity)].append(r)
    chosen_by: dict[tuple[str, str], Reading] = {}
    for key, rs in groups.items():
        rs.sort(key=_rank(key[0], key[1], registry))
        chosen_by[key] = next((r for r in rs if r.determined), rs[0])
        if f"{key[0]}.{key[1]}" in LARGEST_L1:
            chosen_by[key] = _largest_l1(rs, series.get(key, []), registry) or chosen_by[key]
    elements: dict[str, dict[str, Any]] = defaultdict(dict)
    for (element, quantity), rs in sorted(groups.items()):
        chosen = chosen_by[(element, quantity)]
        siblings = {q: c.entry for (e, q), c in chosen_by.items() if e == element}
        entry = {**chosen.entry, **_source(chosen)}
        if f"{element}.{quantity}" in LARGEST_L1 and chosen.carveout_pct is not None:
            entry["headline"] = _headline_note(chosen)
            if chosen.shared_buffer_bytes is not None:
                entry["shared_buffer_bytes"] = chosen.shared_buffer_bytes
        also, others = [], []
        for r in rs:
            if r is chosen:
                continue
            same = r.determined and r.value == chosen.value
            if same and r.entry.get("method") == chosen.entry.get("method"):
                also.append(_source(r))
            else:
                others.append(_other(r, chosen, siblings))
        if also:
            entry["also_in"] = also
        if others:
            entry["other_readings"] = others
        points = series.pop((element, quantity), [])
        if points:
            entry["by_carveout"] = [_point(p) for p in points]
        elements[element][quantity] = entry
    for (element, quantity), points in sorted(series.items()):  # a series with no reading
        elements[element][quantity] = {
            "value": None,
            "undetermined": "measured only per carveout (see by_carveout)",
            "by_carveout": [_point(p) for p in points],
        }
    for quantities in elements.values():
        _consistent_penalty(quantities)
    return dict(elements)


def _consistent_penalty(quantities: dict[str, Any]) -> None:
    """A miss penalty from another experiment than the chosen hit and miss latencies (which
    come from one) describes other accesses: it is replaced by their difference, and named."""
    hit, miss = quantities.get("hit_latency_cycles"), quantities.get("miss_latency_cycles")
    penalty = quantities.get("miss_penalty_cycles")
    if not (hit and miss and penalty) or None in (hit.get("value"), miss.get("value")):
        return
    source = hit["experiment"]
    if miss["experiment"] != source or penalty.get("experiment") == source:
        return
    diff = round(miss["value"] - hit["value"], 2)
    if diff <= 0:
        return
    old = {
        k: penalty.get(k)
        for k in ("value", "unit", "confidence", "experiment", "analysis", "source")
    }
    quantities["miss_penalty_cycles"] = {
        "value": diff,
        "unit": "cycles",
        "confidence": min(hit.get("confidence", 0), miss.get("confidence", 0)),
        "method": "miss latency minus hit latency, both chosen from one experiment",
        "evidence": f"{miss['value']} - {hit['value']} cycles ({source}: {miss['source']}, "
        f"{hit['source']})",
        "experiment": source,
        "analysis": miss["analysis"],
        "derived_from": {"minuend": miss["source"], "subtrahend": hit["source"]},
        "other_readings": [{**old, "agrees": agrees(old["value"], diff)}]
        + penalty.get("other_readings", []),
    }


def _largest_l1(
    readings: list[Reading], points: list[Reading], registry: tuple[str, ...]
) -> Reading | None:
    """The reading at the smallest shared partition (`HEADLINE_RULE`), or None where no
    determined reading records its carveout (a backend without one: the plain rule holds)."""
    candidates = [r for r in [*readings, *points] if r.determined and r.carveout_pct is not None]
    if not candidates:
        return None
    rank = _rank(candidates[0].element, candidates[0].quantity, registry)

    def key(r: Reading):
        buffer = r.shared_buffer_bytes if r.shared_buffer_bytes is not None else float("inf")
        return (r.carveout_pct, buffer, r.series, rank(r))

    return min(candidates, key=key)


def _headline_note(r: Reading) -> str:
    buffer = (
        f"a {r.shared_buffer_bytes}-byte shared buffer beside it"
        if r.shared_buffer_bytes is not None
        else "no shared buffer recorded"
    )
    note = f"{HEADLINE_RULE}: carveout {r.carveout_pct}%, {buffer}"
    if r.shared_buffer_bytes:
        note += (
            "; the kernel keeps its timing records in shared memory, so the driver keeps a "
            "shared partition beside the L1 and the L1 of a kernel without shared memory may "
            "be larger"
        )
    return note


def _point(r: Reading) -> dict[str, Any]:
    out = {**_source(r), "value": r.value}
    if r.shared_buffer_bytes is not None:
        out["shared_buffer_bytes"] = r.shared_buffer_bytes
    if r.determined:
        out["confidence"] = r.entry.get("confidence")
        if r.entry.get("resolution_bytes") is not None:
            out["resolution_bytes"] = r.entry["resolution_bytes"]
    else:
        if "not_applicable" in r.entry:
            out["not_applicable"] = r.entry["not_applicable"]
        else:
            out["undetermined"] = r.entry.get("undetermined", "")
    return out
