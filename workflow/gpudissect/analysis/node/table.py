"""The tidy table the node figures draw (written beside the result document): one `pair` row per
ordered pair, the diagonal each GPU's own memory (the heat maps and the report's table), and one
`stream` row per pair, direction, access size and SM count (the bandwidth curves)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from .node import stream_points

COLUMNS = {
    "row": "object",  # pair | stream
    "src_gpu": "int64",
    "dst_gpu": "int64",
    "peer_access": "bool",
    "path": "object",  # the load path of the latencies (cg where the sweep ran it)
    "hit_latency_cycles": "float64",
    "miss_latency_cycles": "float64",
    "read_gbps": "float64",
    "write_gbps": "float64",
    "copy_gbps": "float64",
    "direction": "object",
    "access_bytes": "int64",
    "sms": "int64",
    "gbps": "float64",
}


def _value(block: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        block = block.get(k, {}) if isinstance(block, dict) else {}
    return block.get("value") if isinstance(block, dict) else None


def _pair_row(src: int, dst: int, peer: bool, path: str, latency: dict, pair: dict) -> dict:
    lat = latency.get(path, {})
    return {
        "row": "pair",
        "src_gpu": src,
        "dst_gpu": dst,
        "peer_access": peer,
        "path": path,
        "hit_latency_cycles": _value(lat, "hit_latency_cycles"),
        "miss_latency_cycles": _value(lat, "miss_latency_cycles"),
        "read_gbps": _value(pair, "bandwidth", "read", "peak_gbps"),
        "write_gbps": _value(pair, "bandwidth", "write", "peak_gbps"),
        "copy_gbps": _value(pair, "copy", "bandwidth_gbps"),
        "direction": "",
        "access_bytes": 0,
        "sms": 0,
        "gbps": None,
    }


def figure_table(data: pd.DataFrame, doc: dict[str, Any]) -> pd.DataFrame:
    node = doc.get("node")
    rows = []
    if isinstance(node, dict) and "pairs" in node:
        paths = node.get("paths") or ["cg"]
        path = "cg" if "cg" in paths else paths[0]
        for p in node["pairs"]:
            rows.append(
                _pair_row(p["src"], p["dst"], p["peer_access"], path, p.get("latency", {}), p)
            )
        for g, loc in node.get("local", {}).items():
            rows.append(_pair_row(int(g), int(g), True, path, loc["latency"], {}))
        for r in stream_points(data[data["kind"] == "stream"]).itertuples():
            row = dict.fromkeys(COLUMNS)
            row.update(
                row="stream",
                src_gpu=int(r.src_gpu),
                dst_gpu=int(r.dst_gpu),
                peer_access=True,
                path="",
                direction=r.direction,
                access_bytes=int(r.access_bytes),
                sms=int(r.sms),
                gbps=float(r.gbps),
            )
            rows.append(row)
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    for col, dtype in COLUMNS.items():
        if dtype in ("int64", "bool"):
            table[col] = table[col].fillna(0 if dtype == "int64" else False)
    return table.astype(COLUMNS)
