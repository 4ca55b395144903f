"""Report sections of the fill / disturb / re-walk families (`cache_sharing`,
`cache_instances`; Größler's thesis, Sec. 4.5 and 4.6). Numbers come from the result documents;
paper values only from config/papers/thesis.yaml (Thesis Table 5.4), as the comparison column."""

from __future__ import annotations

from typing import Any

from gpudissect import yamlio

from ..datafiles import paper_file

PAPER_FILE = paper_file("thesis.yaml")


def _paper(doc: dict) -> dict:
    name = (doc.get("device_info") or {}).get("name")
    if not name or not PAPER_FILE.is_file():
        return {}
    return (yamlio.safe_load(PAPER_FILE.read_text()).get("gpus") or {}).get(name, {})


def _names(v: list) -> str:
    return ", ".join(v) if v else "none"


def _measured(q: dict, fmt) -> str:
    if q.get("value") is None:
        bound = q.get("lower_bound")
        if bound is not None:
            return f"at least {bound}"
        return "not applicable" if "not_applicable" in q else "undetermined"
    return f"{fmt(q['value'])} (confidence {q.get('confidence', 0):.2f})"


def _table(doc: dict, key: str, label: str, fmt) -> list[str]:
    paper = _paper(doc)
    backend = doc.get("backend")
    measured = "measured on this GPU" if backend == "cuda" else "recovered on the twin"
    header = ["element", "path", *(["paper"] if paper else []), f"{label}, {measured}"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    notes = []
    for name, el in doc.get("elements", {}).items():
        q = el.get(key, {})
        row = [name, el.get("path", "?")]
        if paper:
            e = paper.get(name, {}).get(key)
            row.append(f"{fmt(e['value'])} ({e['cite']})" if e else "—")
        row.append(_measured(q, fmt))
        lines.append("| " + " | ".join(row) + " |")
        if q.get("value") is None:
            notes.append(f"- {name}: {q.get('not_applicable') or q.get('undetermined')}")
        else:
            notes.append(f"- {name}: {q.get('evidence')}")
    lines += ["", *notes, ""]
    if paper:
        lines += ["Paper column: Thesis Table 5.4 (config/papers/thesis.yaml).", ""]
    return lines


def sharing_section(doc: dict[str, Any], figures: list[str]) -> list[str]:
    lines = ["### Cache sharing between load paths (Thesis Sec. 4.5)", ""]
    if doc.get("carveout_pct"):
        lines += [f"Measured at L1/shared carveout {doc['carveout_pct']}%.", ""]
    lines += _table(doc, "shared_with", "shared with", _names)
    lines += [f"Naming rule: {doc.get('naming_rule')}.", ""]
    return lines


def instances_section(doc: dict[str, Any], figures: list[str]) -> list[str]:
    lines = ["### Caches per SM (Thesis Sec. 4.6)", ""]
    if doc.get("carveout_pct"):
        lines += [f"Measured at L1/shared carveout {doc['carveout_pct']}%.", ""]
    lines += _table(doc, "instances_per_sm", "copies per SM", str)
    return lines
