"""Report sections of the two-stage fine-grained P-chase families (`cache_stage1`, `caches`),
with a replica of TPDS Table V. Numbers come from the result documents; paper values only from
config/papers/tpds_table5.yaml, as the comparison column."""

from __future__ import annotations

from typing import Any

from gpudissect import yamlio

from ..datafiles import paper_file
from .sections import unset

PAPER_FILE = paper_file("tpds_table5.yaml")
QUANTITIES = (
    ("size_bytes", "size"),
    ("line_bytes", "line"),
    ("fetch_granularity_bytes", "fetch granularity"),
    ("sector_bytes", "sector"),
    ("sets", "sets"),
    ("ways_per_set", "ways per set"),
    ("set_index_bits", "set-index bits"),
    ("policy", "policy (LRU?)"),
    ("way_replacement_freq", "per-way replacement frequency"),
    ("hit_latency_cycles", "hit latency"),
    ("miss_latency_cycles", "miss latency"),
    ("miss_penalty_cycles", "miss penalty"),
)


def _bytes(v: int) -> str:
    return f"{v / 1024:g} KiB" if v >= 1024 and v % 256 == 0 else f"{v} B"


def _value(key: str, v: Any) -> str:
    if v is None:
        return "—"
    if key.endswith("_bytes"):
        return _bytes(int(v))
    if key.endswith("_cycles"):
        return f"{v:g} cycles"
    if key == "ways_per_set" and isinstance(v, list) and len(v) == 1:
        return f"{v[0]} per set"
    if key == "ways_per_set" and isinstance(v, list) and v and len(set(v)) == 1:
        return f"{v[0]} (all {len(v)} sets)"
    if key == "way_replacement_freq" and isinstance(v, list):
        return "—" if len(v) > 16 else ", ".join(f"{x:.3f}" for x in v)
    if isinstance(v, list):
        return ", ".join(str(x) for x in v)
    return str(v)


def _cell(key: str, q: dict | None) -> str:
    if not q:
        return "—"
    if q.get("value") is None and q.get("lower_bound") is not None:
        return f"> {_value(key, q['lower_bound'])}"
    if q.get("value") is None and "not_applicable" in q:
        return "not applicable"
    if q.get("value") is None:
        reason = str(q.get("undetermined", "no reason recorded"))
        return "undetermined" + (": not bit-defined" if reason.startswith("not bit-") else "")
    return _value(key, q["value"])


def stage1_section(doc: dict[str, Any], figures: list[str]) -> list[str]:
    lines = [
        "### Cache stage 1: size, fetch granularity, sector, line and latencies per load path",
        "",
    ]
    if doc.get("carveout_pct"):
        lines += [f"Measured at L1/shared carveout {doc['carveout_pct']}%.", ""]
    lines += [
        "| path | level | element | first-miss size | fetch granularity | sector | line | hit | "
        "miss | penalty |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    notes = []
    for path, entry in doc["paths"].items():
        if not entry.get("measured"):
            state = "not applicable" if entry.get("not_applicable") else "not measured"
            notes.append(f"- `{path}`: {state} ({entry.get('reason')}).")
            continue
        for lv in entry["levels"]:
            if lv.get("served_by"):
                notes.append(
                    f"- `{path}` is served at the {lv['served_by']} latency level "
                    f"({lv['reference_hit_latency_cycles']:.0f} cycles): no {lv['element']} on it "
                    "(not applicable)."
                )
                continue
            cells = [
                _cell(k, lv.get(k))
                for k in (
                    "size_bytes",
                    "fetch_granularity_bytes",
                    "sector_bytes",
                    "line_bytes",
                    "hit_latency_cycles",
                    "miss_latency_cycles",
                    "miss_penalty_cycles",
                )
            ]
            lines.append(
                f"| {path} | {lv['level']} | {lv['element']} | " + " | ".join(cells) + " |"
            )
            for k in ("size_bytes", "line_bytes", "fetch_granularity_bytes", "sector_bytes"):
                q = lv.get(k, {})
                if q.get("value") is None and q.get("undetermined"):
                    notes.append(f"- `{path}` level {lv['level']} {k}: {q['undetermined']}")
    notes.append(
        "- First-miss size: the footprint at which this path's walk first misses at a small "
        "stride. For the L2 of a GPU with near and far partitions this is the near partition "
        "only; the L2 size of the summary is the footprint sweep's (`l2`), where latency "
        "reaches DRAM."
    )
    notes.append(
        "- Fetch granularity: the bytes one miss brings in (MT4G's name). Sector: the part of a "
        "line filled on its own, shown where a longer line fills in such parts from a cache "
        "behind it; where a miss fills from DRAM, one fill may hold several sectors, which "
        "loads cannot tell apart."
    )
    lines += ["", *notes, "", f"Naming rule: {doc.get('naming_rule')}.", ""]
    return lines


def _paper(doc: dict) -> dict:
    name = (doc.get("device_info") or {}).get("name")
    if not name or not PAPER_FILE.is_file():
        return {}
    return (yamlio.safe_load(PAPER_FILE.read_text()).get("gpus") or {}).get(name, {})


def _paper_cell(key: str, entry: dict) -> str:
    if key == "policy" and "lru" in entry:
        e = entry["lru"]
        return f"LRU {'yes' if e['value'] else 'no'} ({e['cite']})"
    if key not in entry:
        return "—"
    e = entry[key]
    return f"{_value(key, e['value'])} ({e['cite']})"


def caches_section(doc: dict[str, Any], figures: list[str]) -> list[str]:
    measured = "measured on this GPU" if doc.get("backend") == "cuda" else "recovered on the twin"
    paper = _paper(doc)
    lines = ["### Cache structures (two-stage fine-grained P-chase, TPDS Table V replica)", ""]
    if doc.get("carveout_pct"):
        lines += [f"Measured at L1/shared carveout {doc['carveout_pct']}%.", ""]
    header = ["element", "quantity", *(["paper"] if paper else []), measured]
    lines += ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    reasons = []
    for name, el in doc["elements"].items():
        if el.get("served_by"):
            reasons.append(f"- {name}: the path is served by the {el['served_by']}; no {name}.")
            continue
        for key, label in QUANTITIES:
            q = el.get(key)
            if q is None:
                continue
            row = [name, label]
            if paper:
                row.append(_paper_cell(key, paper.get(name, {})))
            row.append(_cell(key, q))
            lines.append("| " + " | ".join(row) + " |")
            if q.get("value") is None and key in (
                "sector_bytes",
                "sets",
                "set_index_bits",
                "policy",
            ):
                reasons.append(f"- {name} {label}: {unset(q)}")
    lines += ["", *dict.fromkeys(reasons), ""]
    if paper:
        lines += [
            "Paper column: TPDS Table V and Secs. 4.3-4.6 (NPC Table 4 gives the same cache "
            "values; NPC Table 5 the latencies), Thesis Table 5.4 for the K20c; see "
            "config/papers/tpds_table5.yaml.",
            "",
        ]
    return lines
