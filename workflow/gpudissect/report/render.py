"""Render `results/report/report.md` from the analysis documents and figures of every device."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..families import FAMILIES, family


@dataclass(frozen=True)
class DeviceResults:
    name: str
    documents: tuple[Path, ...]  # result JSONs, one per experiment
    figures: tuple[Path, ...]


def _device_header(doc: dict[str, Any]) -> list[str]:
    lines = []
    info = doc.get("device_info", {})
    if info:
        keys = ("name", "backend", "compute_capability", "profile", "driver_version", "uuid")
        facts = [f"{k}: {info[k]}" for k in keys if info.get(k) is not None]
        lines += ["Device: " + "; ".join(facts) + ".", ""]
    return lines


def render_report(devices: list[DeviceResults], *, title: str, out: str | os.PathLike) -> Path:
    """One section per device and experiment (in FAMILIES order), figures after each section."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)

    def rel(p: Path) -> str:
        return os.path.relpath(p, out.parent)

    lines = [
        f"# {title}",
        "",
        "Every number below was derived by an analysis rule from a trace; each trace's "
        "provenance (commit, config hash, device or simulator profile, clocks) is in its "
        "Parquet metadata and summarised per device.",
        "",
    ]
    order = list(FAMILIES)
    for d in devices:
        docs = [json.loads(Path(p).read_text()) for p in d.documents]
        docs.sort(
            key=lambda doc: order.index(doc["analysis"]) if doc["analysis"] in order else len(order)
        )
        lines += [f"## {d.name}", ""]
        if docs:
            lines += _device_header(docs[0])
        for doc in docs:
            trace = doc.get("trace", {})
            fam = family(doc["analysis"])
            figs = [p for p in d.figures if p.stem in fam.figures]
            lines += fam.report_section(doc, [rel(p) for p in figs])
            lines += [
                f"Trace `{doc['analysis']}`: commit `{trace.get('git_commit')}`, config hash "
                f"`{str(trace.get('config_hash'))[:12]}`"
                + (f", written {trace['created_utc']}." if trace.get("created_utc") else "."),
                "",
            ]
            for fig in figs:
                lines += [f"![{fig.stem}]({rel(fig)})", ""]
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    tmp.write_text("\n".join(lines))
    os.replace(tmp, out)
    return out
