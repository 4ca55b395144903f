"""Report sections, one function per experiment family: (result document, figure paths
relative to the report) -> Markdown lines. Numbers come from the document only."""

from __future__ import annotations

from typing import Any

from gpudissect import yamlio

from ..datafiles import PAPERS_DIR

PAPERS = PAPERS_DIR


def unset(q: dict[str, Any], *, sep: str = ": ", end: str = "") -> str:
    """A quantity with no value in the report's vocabulary: "not applicable" (the device lacks
    it) or "undetermined" (the data do not decide), with the document's reason."""
    if "not_applicable" in q:
        return f"not applicable{sep}{q['not_applicable']}{end}"
    return f"undetermined{sep}{q.get('undetermined', 'no reason recorded')}{end}"


def paper_values(filename: str, doc: dict[str, Any]) -> dict[str, Any] | None:
    """The cited paper values for the GPU a result document was measured on, if the paper has
    that GPU (matched by the device name in the trace's provenance, never by the profile)."""
    path = PAPERS / filename
    if not path.is_file():
        return None
    gpus = yamlio.safe_load(path.read_text()).get("gpus", {})
    return gpus.get(doc.get("device_info", {}).get("name", ""))


def conf(q: dict[str, Any] | None) -> str:
    """A quantity's confidence, printed one way everywhere: two decimals."""
    c = q.get("confidence") if q else None
    return "—" if c is None else f"{c:.2f}"


def _kib(v: Any) -> str:
    return "—" if v is None else f"{v / 1024:g} KiB ({v} B)"


def _fmt(q: dict[str, Any] | None, unit_fmt=str) -> str:
    if not q:
        return "—"
    if q.get("value") is None:
        return unset(q)
    return unit_fmt(q["value"])


def l1_size_section(doc: dict[str, Any], figures: list[str]) -> list[str]:
    element = next(iter(doc["elements"]))
    lines = [f"### Cache size on the `{doc['path']}` path ({element}), fine-grained P-chase", ""]
    if not doc["series"]:
        q = doc["elements"][element]["size_bytes"]
        if "not_applicable" in q:
            return lines + [f"- Not applicable: {q['not_applicable']}.", ""]
        return lines + [f"- Undetermined: {q.get('undetermined', 'no reason recorded')}.", ""]
    lines += [
        "| carveout | shared buffer | size | hit latency | confidence | evidence |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for s in doc["series"]:
        q = s[element]
        size = q["size_bytes"]
        carve = "n/a" if s["carveout_pct"] is None else f"{s['carveout_pct']}%"
        lines.append(
            f"| {carve} | {s['shared_buffer_bytes'] // 1024} KiB | {_fmt(size, _kib)} | "
            f"{_fmt(q.get('hit_latency_cycles'), lambda v: f'{v:g} cycles')} | "
            f"{conf(size)} | {size.get('evidence', size.get('undetermined'))} |"
        )
    lines.append("")
    for s in doc["series"]:
        size = s[element]["size_bytes"]
        if size.get("value") is not None:
            where = "" if s["carveout_pct"] is None else f" at carveout {s['carveout_pct']}%"
            lines.append(
                f"- Measured {element} size{where} (shared buffer "
                f"{s['shared_buffer_bytes'] // 1024} KiB): **{_kib(size['value'])}**."
            )
    for check in doc.get("shared_buffer_check", []):
        moved = check["size_moves_with_buffer"]
        verdict = {
            None: "whether the measured size moves with the shared-memory buffer size cannot be "
            "decided",
            True: "the measured size moves with the shared-memory buffer size",
            False: "the measured size does not move with the shared-memory buffer size",
        }[moved]
        if check.get("reason"):
            verdict += f": {check['reason']}"
        sizes = ", ".join(
            f"{int(k) // 1024} KiB buffer: {_kib(v)}"
            for k, v in check["size_bytes_by_shared_buffer_bytes"].items()
        )
        lines.append(f"- At carveout {check['carveout_pct']}% {verdict}. Sizes: {sizes}.")
    if any(c["size_moves_with_buffer"] for c in doc.get("shared_buffer_check", [])):
        lines.append(
            "- The carveout is a preference: when a launch needs more shared memory (the "
            "latency buffer plus the per-block reserve) than the preferred partition holds, the "
            "driver selects a larger shared partition and the L1 shrinks accordingly. Compare "
            "sizes at one buffer size across carveouts."
        )
    lines.append("")
    return lines


def pchase_classic_section(doc: dict[str, Any], figures: list[str]) -> list[str]:
    """TPDS Fig. 5: what Saavedra1992 and Wong2010 each conclude, and whether they agree."""
    inf = doc["inferences"]
    lines = [
        f"### Classic P-chase both ways on the `{doc['path']}` path (TPDS Fig. 5)",
        "",
        "Each method's conclusions under the classic assumptions (TPDS Assumptions 1-3); "
        "inferences, not measurements.",
        "",
        "| parameter | Saavedra1992 | Wong2010 |",
        "| --- | --- | --- |",
    ]
    for key, label, unit_fmt in (
        ("size_bytes", "cache size C", _kib),
        ("line_bytes", "line size b", lambda v: f"{v} B"),
        ("ways", "ways a", str),
    ):
        cells = []
        for m in ("saavedra", "wong"):
            q = inf[m].get(key, {})
            cells.append(
                unit_fmt(q["value"]) if q.get("value") is not None else unset(q, sep=" (", end=")")
            )
        lines.append(f"| {label} | {cells[0]} | {cells[1]} |")
    c = doc["contradiction"]
    if c.get("value") is None:
        verdict = f"cannot be compared: {c.get('undetermined')}"
    elif c["value"]:
        verdict = f"contradict each other ({c['evidence']})"
    else:
        verdict = f"agree ({c['evidence']})"
    lines += ["", f"- The two methods {verdict}.", ""]
    return lines


def _mib(v: Any) -> str:
    return f"{v / 2**20:g} MiB"


def _cycles(v: Any) -> str:
    return f"{v:g} cycles"


def l2_section(doc: dict[str, Any], figures: list[str]) -> list[str]:
    """L2 footprint sweep: the latency levels (near and far partition, DRAM), the footprints
    where latency steps up, and the sizes those steps bracket."""
    l2 = doc["elements"]["l2"]
    lines = [f"### L2 footprint sweep on the `{doc['path']}` path", ""]
    plateaus = doc.get("plateaus", [])
    if plateaus:
        lines += [
            "| plateau | footprints | median | IQR | p10-p90 | accesses |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for p in plateaus:
            lines.append(
                f"| {p['role']} | {_mib(p['first_footprint_bytes'])} to "
                f"{_mib(p['last_footprint_bytes'])} ({p['footprints']}) | "
                f"{p['median_cycles']:g} | {p['p25_cycles']:g}-{p['p75_cycles']:g} | "
                f"{p['p10_cycles']:g}-{p['p90_cycles']:g} | {p['accesses']} |"
            )
        lines.append("")
    methods: list[str] = []
    for key, label, unit_fmt in (
        ("hit_latency_cycles", "L2 hit latency (near)", _cycles),
        ("near_hit_fast_latency_cycles", "near hits, fast address group", _cycles),
        ("near_hit_slow_latency_cycles", "near hits, slow address group", _cycles),
        ("far_hit_latency_cycles", "L2 hit latency (far partition)", _cycles),
        ("far_share", "share of lines in the far partition", str),
        ("miss_latency_cycles", "DRAM (L2 miss) latency", _cycles),
        ("near_size_bytes", "footprint the near partition holds", _mib),
        ("size_bytes", "L2 size", _mib),
    ):
        q = l2.get(key)
        if q is None:
            continue
        if q.get("value") is None:
            lines.append(f"- {label}: {unset(q)}")
            continue
        text = f"**{unit_fmt(q['value'])}**"
        if q.get("bracket_bytes"):
            lo, hi = q["bracket_bytes"]
            text += f" (in [{_mib(lo)}, {_mib(hi)}) at the sweep's resolution)"
        if q.get("share") is not None:
            text += f" ({q['share']:.1%} of the near hits)"
        if key == "hit_latency_cycles" and "near_hit_slow_latency_cycles" in l2:
            text += " (the median over both address groups below: it moves with their shares)"
        lines.append(f"- {label}: {text}, confidence {conf(q)}")
        if q["method"] not in methods:
            methods.append(q["method"])
    steps = doc.get("steps", [])
    if steps:
        lines.append(
            "- Latency steps up between "
            + "; ".join(
                f"{_mib(s['footprint_before_bytes'])} and {_mib(s['footprint_after_bytes'])} "
                f"({s['median_before_cycles']:g} -> {s['median_after_cycles']:g} cycles)"
                for s in steps
            )
            + "."
        )
    else:
        q = l2.get("latency_steps_bytes", {})
        lines.append(f"- Latency steps: {_fmt(q)}.")
    if methods:
        lines.append("- Methods: " + "; ".join(methods) + ".")
    far = l2.get("far_hit_latency_cycles", {})
    if far.get("value") is not None and "evidence" in far:
        lines.append(f"- Far-partition evidence: {far['evidence']}.")
    lines.append("")
    return lines
