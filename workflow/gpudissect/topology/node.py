"""The topology document's `node` section: the node of several GPUs this device ran the node
experiment on (its analysis, `analysis/node/node.py`), per ordered pair the link, peer latency,
caching of peer lines, bandwidth and atomic latency, each a quantity of the result contract."""

from __future__ import annotations

from typing import Any

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
