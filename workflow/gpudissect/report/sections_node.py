"""Report section of the node: per ordered pair of GPUs the link, the peer latency (hit and
miss per load path), whether the local L1 and L2 keep peer lines, the bandwidth from SMs and
from the copy engine, and the atomic latency. Numbers come from the result document; the pair
table is the report's named table `node` (tables/node.csv)."""

from __future__ import annotations

from typing import Any


def _v(q: Any, fmt: str = "{:.0f}") -> str:
    if not isinstance(q, dict):
        return "—"
    if q.get("value") is None:
        return "n/a" if "not_applicable" in q else "undetermined"
    v = q["value"]
    if isinstance(v, bool):
        return "yes" if v else "no"
    return fmt.format(v) if isinstance(v, int | float) else str(v)


def _mib(q: Any) -> str:
    if isinstance(q, dict) and isinstance(q.get("value"), int):
        return f"{q['value'] / 2**20:g}"
    return _v(q)


def _link(link: dict[str, Any]) -> str:
    kind = link.get("kind") or "?"
    if kind == "nvlink" and link.get("nvlink_count"):
        version = f" v{link['nvlink_version']}" if link.get("nvlink_version") else ""
        return f"{link['nvlink_count']} x NVLink{version}"
    return kind


def _pair_row(p: dict[str, Any], paths: list[str]) -> str:
    cells = [f"{p['src_name']} -> {p['dst_name']}", _link(p.get("link", {}))]
    if not p.get("peer_access"):
        return "| " + " | ".join(cells + ["no peer access"] + ["—"] * (3 * len(paths) + 5)) + " |"
    cells.append("yes")
    for path in paths:
        lat = p["latency"].get(path, {})
        cache = p["caching"].get(path, {})
        cells.append(f"{_v(lat.get('hit_latency_cycles'))} / {_v(lat.get('miss_latency_cycles'))}")
        cells.append(_v(cache.get("l1_keeps_peer_lines")))
        cells.append(_v(cache.get("l2_keeps_peer_lines")))
    bw = p.get("bandwidth", {})
    cells.append(_v(bw.get("read", {}).get("peak_gbps"), "{:.1f}"))
    cells.append(_v(bw.get("write", {}).get("peak_gbps"), "{:.1f}"))
    cells.append(_v(p.get("copy", {}).get("bandwidth_gbps"), "{:.1f}"))
    cells.append(_v(p.get("atomic_latency_cycles")))
    cells.append(_mib(p.get("tlb_reach_bytes")))
    return "| " + " | ".join(cells) + " |"


def node_section(doc: dict[str, Any], figures: list[str]) -> list[str]:
    lines = ["### The node: peer memory and links", ""]
    node = doc.get("node")
    if not isinstance(node, dict) or node.get("value", 0) is None:
        reason = (node or {}).get("undetermined", "no node document")
        return lines + [f"Undetermined: {reason}.", ""]
    paths = node.get("paths", [])
    gpus = ", ".join(f"{g['gpu']} ({g['name']})" for g in node.get("gpus", []))
    lines.append(
        f"GPUs {gpus}. Per ordered pair: the P-chase latency of the peer's memory inside the L1 "
        "footprint (hit) and beyond the L2 (miss), in raw cycles; whether the loading GPU's L1 "
        "and L2 keep the peer's lines (n/a: the path has no such cache); the peak bandwidth of "
        "SM-driven reads and writes and of the copy engine (GB/s); the latency of dependent "
        "atomics (cycles); the TLB reach on the peer's memory (the largest page-stride footprint "
        "before the latency steps up)."
    )
    lines.append("")
    head = ["pair", "link", "peer access"]
    for path in paths:
        head += [f"{path} hit / miss", f"{path} L1 keeps", f"{path} L2 keeps"]
    head += ["read GB/s", "write GB/s", "copy GB/s", "atomic cycles", "TLB reach MiB"]
    lines += ["<!-- table: node -->", "| " + " | ".join(head) + " |"]
    lines.append("| " + " | ".join("---" for _ in head) + " |")
    lines += [_pair_row(p, paths) for p in node.get("pairs", [])]
    lines.append("")
    local = node.get("local", {})
    if local:
        lines.append(
            "Each GPU's own memory (the baseline; hit / miss and atomics in cycles): "
            + "; ".join(
                f"GPU {g}: "
                + ", ".join(
                    f"{path} {_v(v['latency'].get(path, {}).get('hit_latency_cycles'))}"
                    f" / {_v(v['latency'].get(path, {}).get('miss_latency_cycles'))}"
                    for path in paths
                )
                + f", atomics {_v(v.get('atomic_latency_cycles'))}"
                + f", TLB reach {_mib(v.get('tlb_reach_bytes'))} MiB"
                for g, v in local.items()
            )
            + "."
        )
        lines.append("")
    for p in node.get("pairs", []):
        for what in p.get("skipped", []):
            lines.append(f"- {p['src_name']} -> {p['dst_name']} skipped: {what}")
    return lines + [""]
