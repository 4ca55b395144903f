"""The report's first part: per device, the topology table (when the topology document is an
input), the headline values beside the papers' values, and what is undetermined and why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .compare import Quantity, confidence, fmt, lookup, paper_value, verdict
from .labels import column_label, device_label, simulated
from .model import Block, Bullets, Heading, Paragraph, Table
from .readings import readings_part


@dataclass(frozen=True)
class Headline:
    label: str
    experiment: str
    path: str
    paper: str  # compare.paper_value source, "" for none
    unit: str = ""
    timing: bool = False


# One L2 size (the footprint sweep's), so the summary never states two "sizes": the first-miss
# footprint of stage 1 is the near partition on a GPU with a far one.
HEADLINES = (
    Headline(
        "L1 data size", "l1_size", "elements.l1d.size_bytes", "tpds_table5:l1d.size_bytes", "bytes"
    ),
    Headline(
        "L1 data hit latency",
        "l1_size",
        "elements.l1d.hit_latency_cycles",
        "tpds_table5:l1d.hit_latency_cycles",
        "cycles",
        True,
    ),
    Headline(
        "L1 data line", "caches", "elements.l1d.line_bytes", "tpds_table5:l1d.line_bytes", "bytes"
    ),
    Headline(
        "texture L1 size",
        "caches",
        "elements.texture.size_bytes",
        "tpds_table5:texture.size_bytes",
        "bytes",
    ),
    Headline(
        "L2 size (footprint sweep)",
        "l2",
        "elements.l2.size_bytes",
        "tpds_table5:l2.size_bytes",
        "bytes",
    ),
    Headline(
        "L2 size (flushed copy)",
        "l2_flush",
        "elements.l2.size_bytes",
        "lashgar:l2_size_bytes",
        "bytes",
    ),
    Headline(
        "L2 hit latency",
        "l2",
        "elements.l2.hit_latency_cycles",
        "tpds_table5:l2.hit_latency_cycles",
        "cycles",
        True,
    ),
    Headline(
        "shared banks",
        "bank_conflicts",
        "elements.shared.banks",
        "tpds_banks_throughput:banks.banks",
    ),
    Headline(
        "bank width",
        "bank_conflicts",
        "elements.shared.bank_width_bytes",
        "tpds_banks_throughput:banks.bank_width_bytes",
        "bytes",
    ),
    Headline("L1 TLB entries", "tlbs", "elements.l1_tlb.entries", "tpds_tlb:l1_tlb.entries"),
    Headline("L2 TLB entries", "tlbs", "elements.l2_tlb.entries", "tpds_tlb:l2_tlb.entries"),
    # over a range the experiment maps itself: the count the topology takes first (on an H100
    # the walks over a plain allocation read 1836-2050 from run to run, these 2051 in each)
    Headline(
        "L2 TLB entries (own mapping)",
        "tlb_mappings",
        "elements.l2_tlb.entries",
        "tpds_tlb:l2_tlb.entries",
    ),
    Headline(
        "DRAM copy maximum",
        "global_throughput",
        "elements.dram.throughput_gbps",
        "tpds_banks_throughput:global_throughput.max_throughput_gbps",
        "GB/s",
        True,
    ),
    *(
        Headline(
            f"{name} {direction} bandwidth",
            "bandwidth",
            f"elements.{element}.{direction}_bandwidth_gibps",
            "",
            "GiB/s",
        )
        for element, name, direction in (
            ("l1d", "L1", "read"),
            ("l2", "L2", "read"),
            ("l2", "L2", "write"),
            ("dram", "DRAM", "read"),
            ("dram", "DRAM", "write"),
        )
    ),
    Headline("request table", "requests", "elements.requests.kind", "lashgar:requests.kind"),
    Headline(
        "request table entries", "requests", "elements.requests.entries", "lashgar:requests.entries"
    ),
)

CONFIDENCE = (
    "**Confidence** (0 to 1, printed with two decimals) is how strongly the trace supports a "
    "value, computed by the method that derived it (each quantity's `method` and `evidence` "
    "say which): a size from the first miss, 1 - p of the binomial test of its misses against "
    "the timing-outlier rate; a change point, 1 - p of the Kolmogorov-Smirnov test between the "
    "segments; a latency or throughput, 1 / (1 + IQR / median) of its samples; bank count and "
    "width, the BIC weight of the hypotheses with that value; a fitted line, its R²; the L2 "
    "partitions, the share of latency variance the two-level split explains; the request-table "
    "kind, the margin of sweeps that agree with it over the other model, lowered by every "
    "sweep that contradicts it. A structure read directly off a saturated sweep carries a "
    "fixed confidence its method sets (1.00 for a count read exactly, 0.90 or 0.95 where the "
    "method knows a case it can misread). Confidence is not the probability that the value is "
    "right, and 1.00 is not exactness: the sweep's resolution bounds every size."
)

VERDICTS = (
    "Each measured value stands beside the paper's, marked **agrees** (sizes, lines, sets, "
    "entries and banks equal; latencies and throughputs within 10 % of the paper's), "
    "**differs** (with the difference) or **undetermined** (with the reason: the data do not "
    "decide it). A value is **not applicable** where the device lacks what it describes (a load "
    "path, a cache on a path: the data decided that) and **not measured** where this run has no "
    "experiment for it. A cell with no paper value has no mark."
)


def measured_cell(q: Quantity | None, unit: str) -> str:
    if q is None:
        return "not measured"
    if q.value is None:
        return q.state
    return fmt(q.value, unit)


def headline_rows(docs: dict[str, dict[str, Any]]) -> list[tuple[Headline, Quantity | None]]:
    """The headline quantities this device's documents hold (measured or undetermined)."""
    out = []
    for h in HEADLINES:
        q = _headline(h, docs)
        if q is not None:
            out.append((h, q))
    return out


def _verdict_cell(h: Headline, q: Quantity | None, doc: dict[str, Any] | None) -> tuple[str, str]:
    p = paper_value(doc, h.paper) if (doc and h.paper) else None
    v = verdict(q, p, timing=h.timing)
    paper_cell = "—" if p is None or p[0] is None else fmt(p[0], h.unit)
    if v.status == "no paper value":
        return paper_cell, ""
    plain = ("undetermined", "not applicable", "not measured")
    mark = v.status if not v.text or v.status in plain else f"{v.status}: {v.text}"
    return paper_cell, mark


def undetermined(docs: dict[str, dict[str, Any]], *, lacking: bool = False) -> list[str]:
    """Every element-level quantity a document leaves undetermined (or, `lacking`, marks not
    applicable: the device lacks it), the quantities of one element that share a reason on
    one line."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for exp, doc in docs.items():
        for element, qs in (doc.get("elements") or {}).items():
            if not isinstance(qs, dict):
                continue
            for name, q in qs.items():
                if not (isinstance(q, dict) and "value" in q and q["value"] is None):
                    continue
                if ("not_applicable" in q) != lacking:
                    continue
                key = "not_applicable" if lacking else "undetermined"
                reason = q.get(key) or "no reason recorded"
                groups.setdefault((element, exp, reason), []).append(name)
    return [
        f"`{element}`: {', '.join(f'`{n}`' for n in names)} ({exp}): {_gist(reason)}"
        for (element, exp, reason), names in groups.items()
    ]


def _gist(reason: str) -> str:
    """The first clause of a reason (the summary stays short; the device's part has it whole)."""
    cuts = [i for sep in (": ", "; ", " (") if (i := reason.find(sep, 15)) > 0]
    return reason if not cuts else reason[: min(cuts)] + " (see the device's part)"


# comparison files of the topology table (config/papers), by the GPU name the driver reports
TOPOLOGY_PAPERS = (("thesis.yaml", "Größler, thesis Table 5.4"), ("hopper_published.yaml", None))


def _topology_paper(gpu: str) -> tuple[dict[str, Any], str | None]:
    from .. import yamlio
    from ..datafiles import paper_file

    for name, label in TOPOLOGY_PAPERS:
        path = paper_file(name)
        doc = yamlio.safe_load(path.read_text()) if path.is_file() else {}
        values = ((doc or {}).get("gpus") or {}).get(gpu)
        if values:
            return values, label or ", ".join((doc.get("sources") or {}).values())
    return {}, None


def topology_table(topology: dict[str, Any], name: str = "") -> list[Block]:
    """The topology table in the form of Thesis Tables 5.4-5.9, a paper's values in brackets."""
    from .topology_table import topology_table as table_of

    values, paper = _topology_paper(topology.get("gpu") or "")
    t = table_of(topology, values, paper)
    device = name or topology.get("device") or "device"
    if not t.rows:  # no element measured: no table of headers alone, no legend of nothing
        return [
            Paragraph(f"The topology document (results/topology/{device}.json) has no element.")
        ]
    return [
        Table(t.header, t.rows, caption=f"Memory topology (results/topology/{device}.json)"),
        Paragraph(" ".join(t.notes)),
    ]


def headline_doc(h: Headline, docs: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The document a headline is read from. An `l1_size` run over several carveouts and shared
    buffers is read at its smallest shared partition (the lowest carveout, then the smallest
    buffer): the largest L1 a kernel gets, the topology's headline too (topology/reconcile.py),
    not the series the sweep ran first (on an H100 the 21 KiB beside the 228 KiB partition)."""
    doc = docs.get(h.experiment)
    if h.experiment != "l1_size" or not doc:
        return doc
    points = [
        s
        for s in doc.get("series") or ()
        if s.get("carveout_pct") is not None
        and ((s.get("l1d") or {}).get("size_bytes") or {}).get("value") is not None
    ]
    if not points:
        return doc
    s = min(points, key=lambda s: (s["carveout_pct"], s.get("shared_buffer_bytes") or 0))
    l1d = {**s["l1d"], "carveout_pct": s["carveout_pct"]}
    if s.get("shared_buffer_bytes"):
        l1d["shared_buffer_bytes"] = s["shared_buffer_bytes"]
    return {**doc, "elements": {**(doc.get("elements") or {}), "l1d": l1d}}


def _headline(h: Headline, docs: dict[str, dict[str, Any]]) -> Quantity | None:
    return lookup(headline_doc(h, docs), h.path)


def _carveout(h: Headline, docs: dict[str, dict[str, Any]]) -> str | None:
    """Where an L1-family headline value was measured: its carveout, and the shared buffer
    beside the L1 where the sweep had one; None for a value without a carveout."""
    element = h.path.rsplit(".", 1)[0]
    doc = headline_doc(h, docs)
    carveout = lookup(doc, element + ".carveout_pct")
    if carveout is None:
        return None
    where = f"carveout {carveout.value}%"
    buffer = lookup(doc, element + ".shared_buffer_bytes")
    if buffer is not None and buffer.value:
        where += f", beside {fmt(buffer.value, 'bytes')} of shared memory"
    return where


def _label(h: Headline, docs: dict[str, dict[str, Any]]) -> str:
    """The headline's label, with the carveout an L1-family value was measured at."""
    carveout = _carveout(h, docs)
    return h.label if carveout is None else f"{h.label} ({carveout})"


def device_summary(
    name: str, docs: dict[str, dict[str, Any]], topology: dict | None
) -> list[Block]:
    blocks: list[Block] = [Heading(2, device_label(name, docs, topology))]
    if topology:
        blocks += topology_table(topology, name)
        blocks += readings_part(topology)
    rows = []
    for h, q in headline_rows(docs):
        paper_cell, mark = _verdict_cell(h, q, docs.get(h.experiment))
        c = confidence(q.confidence) if q is not None and q.value is not None else "—"
        rows.append((_label(h, docs), measured_cell(q, h.unit), c, paper_cell, mark))
    # a twin's values are recovered from a simulation, not measured on hardware
    value = "recovered (simulated)" if simulated(docs, topology) else "measured"
    header = ("quantity", value, "confidence", "paper", "verdict")
    if rows and all(r[3] == "—" for r in rows):  # a GPU no paper measured: no empty columns
        header, rows = header[:3], [r[:3] for r in rows]
    if rows:
        blocks.append(Table(header, tuple(rows)))
    missing = undetermined(docs)
    if missing:
        blocks += [Paragraph(f"Undetermined ({len(missing)}):"), Bullets(tuple(missing))]
    elif docs:
        blocks.append(Paragraph("Nothing is undetermined."))
    lacking = undetermined(docs, lacking=True)
    if lacking:
        blocks += [
            Paragraph(f"Not applicable ({len(lacking)}, the device lacks it):"),
            Bullets(tuple(lacking)),
        ]
    return blocks


def _fleet_cell(h: Headline, docs: dict[str, dict[str, Any]]) -> str:
    """A device's headline value, with the carveout it was measured at where it has one (one
    GPU's L1 at carveout 100 beside another's at 0 would otherwise read as two L1 sizes)."""
    q = _headline(h, docs)
    cell = measured_cell(q, h.unit)
    carveout = _carveout(h, docs)
    if q is None or q.value is None or carveout is None:
        return cell
    return f"{cell} ({carveout})"


def fleet_table(devices: dict[str, dict[str, dict[str, Any]]]) -> Table:
    """The headline values side by side across devices (as TPDS Tables III and V)."""
    names = list(devices)
    rows = []
    for h in HEADLINES:
        cells = [_fleet_cell(h, devices[d]) for d in names]
        if any(c != "not measured" for c in cells):
            rows.append((h.label, *cells))
    return Table(
        ("quantity", *(column_label(d, devices[d]) for d in names)),
        tuple(rows),
        caption="Headline values across devices",
        name="fleet",
    )
