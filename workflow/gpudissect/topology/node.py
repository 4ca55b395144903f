"""The topology document's `node` section: the node of several GPUs this device ran the node
experiment on (its analysis, `analysis/node/node.py`), per ordered pair the link, peer latency,
caching of peer lines, bandwidth and atomic latency, each a quantity of the result contract."""

from __future__ import annotations

from typing import Any

from .gather import Reading, is_quantity

PAIR_KEYS = ("latency", "caching", "bandwidth", "copy", "atomic_latency_cycles", "tlb_reach_bytes")


def node_section(docs: list[tuple[str, dict[str, Any]]]) -> dict[str, Any] | None:
    """The section from the device's node result document (None: it ran none)."""
    for path, doc in docs:
        if doc.get("analysis") != "node":
            continue
        node = doc.get("node")
        if not isinstance(node, dict) or "pairs" not in node:
            reason = (node or {}).get("undetermined", "no node readings")
            return {"analysis": path, "undetermined": reason}
        pairs = []
        for p in node["pairs"]:
            pair = {k: p[k] for k in ("src", "dst", "src_name", "dst_name", "peer_access", "link")}
            pair.update({k: p[k] for k in PAIR_KEYS if k in p})
            if p.get("skipped"):
                pair["skipped"] = list(p["skipped"])
            pairs.append(pair)
        return {
            "analysis": path,
            "gpus": node["gpus"],
            "paths": node["paths"],
            "local": node["local"],
            "pairs": pairs,
        }
    return None


def node_readings(doc: dict[str, Any], path: str) -> list[Reading]:
    """Every quantity of a node result document's `node` block, named by where it lies
    (element `node/pairs/0/latency/ca`, quantity `hit_latency_cycles`), for the comparison of
    repeats (`repeats.compare_repeats`); the topology's elements never see them."""
    if doc.get("analysis") != "node" or not isinstance(doc.get("node"), dict):
        return []
    found: list[Reading] = []

    def walk(obj: Any, pointer: str) -> None:
        if is_quantity(obj):
            element, _, name = pointer.rpartition("/")
            found.append(Reading(element.lstrip("/"), name, obj, "node", path, pointer))
        elif isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, f"{pointer}/{k}")
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                walk(v, f"{pointer}/{i}")

    walk(doc["node"], "/node")
    return found


def apply_node_repeats(
    section: dict[str, Any], repeats: dict[str, Any], *, not_repeating: str
) -> None:
    """Mark the topology's node section in place as `repeats.apply_repeats` marks elements: a
    reading that does not repeat becomes undetermined with the readings, a measured one gains
    its spread. The section keeps the analysis document's layout below `local` and `pairs`, so
    a reading's pointer (`/node/pairs/0/...`) finds its place in it. `not_repeating`: the
    status the repeats document gives such a reading (`repeats.NOT_REPEATING`)."""
    n = repeats.get("repeats")
    for q in repeats.get("quantities", []):
        if q.get("experiment") != "node" or not q["source"].startswith("/node/"):
            continue
        parts = q["source"].split("/")[2:]
        parent: Any = section
        try:
            for part in parts[:-1]:
                parent = parent[int(part)] if isinstance(parent, list) else parent[part]
            entry = parent[parts[-1]]
        except (KeyError, IndexError, ValueError, TypeError):
            continue
        if q.get("status") == not_repeating:
            text = "; ".join(
                f"r{r['repeat']}: "
                + ("undetermined" if r.get("value") is None else str(r["value"]))
                for r in q["readings"]
            )
            parent[parts[-1]] = {
                "value": None,
                "undetermined": f"{not_repeating} over {n} repeats ({text})",
                "readings": q["readings"],
            }
        elif q["kind"] == "measured" and q.get("spread"):
            entry["repeat_spread"] = {**q["spread"], "repeats": n}
