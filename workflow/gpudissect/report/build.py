"""Assemble the report `Document`: summary, contents, the studies' tables beside the papers',
the per-device detail, and the appendices (provenance of every trace; how to regenerate every
table and figure, and how long that took)."""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..families import FAMILIES, family
from .captions import caption
from .compare import fmt, lookup, paper_value, verdict
from .labels import column_label, device_label, provenance_paragraph, simulated
from .model import (
    Block,
    Contents,
    Document,
    Figure,
    Heading,
    PageBreak,
    Paragraph,
    Table,
    from_markdown,
)
from .sections_repeatability import repeatability_section
from .sections_twin import twin_part
from .studies import Study
from .summary import CONFIDENCE, VERDICTS, device_summary, fleet_table, measured_cell


@dataclass
class DeviceData:
    name: str
    docs: dict[str, dict[str, Any]]  # experiment -> result document, in FAMILIES order
    figures: list[Path] = field(default_factory=list)
    topology: dict[str, Any] | None = None
    seconds: dict[str, float] = field(default_factory=dict)  # job -> wall seconds
    figure_dir: str = ""  # where its figure job writes (for the regeneration appendix)
    plot_job: str = ""  # that job's benchmark key
    run_name: str = ""  # its name in the run that measured it (a fleet renames it)
    twin_agreement: dict[str, Any] | None = None  # the GPU against its twin (report.sections_twin)
    repeats: dict[str, Any] | None = None  # the repeats document of a run that repeated


def load_device(
    name: str,
    *,
    analysis_dir: Path,
    figures_dir: Path,
    topology: Path | None = None,
    benchmarks_dir: Path | None = None,
    experiments: tuple[str, ...] | None = None,
    figures_flat: bool = False,
    twin_agreement: Path | None = None,
) -> DeviceData:
    """A device's documents and figures (`figures_dir/<name>/`, or `figures_dir` itself when
    `figures_flat`)."""
    docs = {}
    for exp in FAMILIES:
        path = analysis_dir / name / f"{exp}.json"
        if (experiments is None or exp in experiments) and path.is_file():
            docs[exp] = json.loads(path.read_text())
    stems = {s for exp in docs for s in family(exp).figures}
    folder = figures_dir if figures_flat else figures_dir / name
    figures = [p for p in sorted(folder.glob("*.png")) if p.stem in stems]
    topo = json.loads(topology.read_text()) if topology and topology.is_file() else None
    study = figures_dir.name if figures_flat else ""
    repeats_path = analysis_dir / name / "repeats.json"
    repeats = json.loads(repeats_path.read_text()) if repeats_path.is_file() else None
    agreement = None
    if twin_agreement is not None and twin_agreement.is_file():
        agreement = json.loads(twin_agreement.read_text())
    return DeviceData(
        name,
        docs,
        figures,
        topo,
        _job_seconds(benchmarks_dir, name),
        figure_dir=str(folder),
        plot_job=f"plot/{name}_for_{study}" if study else f"plot/{name}",
        run_name=name,
        twin_agreement=agreement,
        repeats=repeats,
    )


def _job_seconds(root: Path | None, device: str) -> dict[str, float]:
    """Wall seconds per job from Snakemake's benchmark files (`s` column), when there are any."""
    out: dict[str, float] = {}
    if root is None or not root.is_dir():
        return out
    for tsv in root.glob(f"*/{device}*.tsv"):
        with tsv.open() as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        if rows:
            out[f"{tsv.parent.name}/{tsv.stem}"] = float(rows[0]["s"])
    return out


def _study_table(study: Study, table, devices: list[DeviceData]) -> Table:
    rows = []
    for row in table.rows:
        cells = []
        for d in devices:
            doc = d.docs.get(row.experiment)
            q = lookup(doc, row.path)
            p = paper_value(doc, row.paper) if doc else None
            v = verdict(q, p, timing=row.timing)
            measured = "not measured" if q is None else measured_cell(q, row.unit)
            paper = "—" if p is None or p[0] is None else fmt(p[0], row.unit)
            if v.status == "no paper value":
                cells.append(f"{measured} (no paper value)")
            elif v.status in ("undetermined", "not applicable"):
                cells.append(f"{measured}; paper {paper}; **{v.status}**: {v.text}")
            elif v.status == "not measured":
                cells.append(f"not measured; paper {paper}")
            else:
                extra = f" ({v.text})" if v.text else ""
                cells.append(f"{measured}; paper {paper}; **{v.status}**{extra}")
        rows.append((row.label, *cells))
    return Table(
        ("quantity", *(column_label(d.name, d.docs, d.topology) for d in devices)),
        tuple(rows),
        caption=table.title,
        name=table.name,
    )


def study_part(study: Study, devices: list[DeviceData]) -> list[Block]:
    mine = [d for d in devices if d.name in study.devices]
    if not mine:
        return []
    blocks: list[Block] = [
        Heading(1, f"Study: {study.title}"),
        Paragraph(
            f"{study.citation}. Devices: "
            + "; ".join(device_label(d.name, d.docs, d.topology) for d in mine)
            + "."
        ),
        Paragraph(study.methods),
    ]
    for table in study.tables:
        blocks.append(_study_table(study, table, mine))
    return blocks


def device_part(d: DeviceData, report_dir: Path) -> list[Block]:
    gpu = next(iter(d.docs.values()), {}).get("device_info", {})
    label = device_label(d.name, d.docs, d.topology)
    blocks: list[Block] = [Heading(1, f"Device {label}")]
    if simulated(d.docs, d.topology):
        blocks.append(
            Paragraph(
                "Every number in this part was recovered from a simulation of this device, "
                "not measured on hardware."
            )
        )
    facts = [
        f"{k}: {gpu[k]}" for k in ("name", "backend", "compute_capability", "profile") if gpu.get(k)
    ]
    if facts:
        blocks.append(Paragraph("; ".join(facts) + "."))
    for exp, doc in d.docs.items():
        fam = family(exp)
        by_stem = {p.stem: p for p in d.figures}  # in the family's order, not the file names
        figs = [by_stem[stem] for stem in fam.figures if stem in by_stem]
        rel = [os.path.relpath(p, report_dir) for p in figs]
        # the sections write "###" headings: one level below the device's part
        blocks += from_markdown(fam.report_section(doc, rel), shift=-1)
        for path, p in zip(rel, figs, strict=True):
            blocks.append(
                Figure(
                    path,
                    caption(p.stem, column_label(d.name, d.docs, d.topology), p),
                    wide=_aspect(p) > 1.9,
                )
            )
    blocks += from_markdown(repeatability_section(d.docs, d.repeats), shift=-1)
    return blocks


def _aspect(png: Path) -> float:
    """Width over height from the PNG header (bytes 16-24), without an image library."""
    with png.open("rb") as fh:
        head = fh.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return 1.0
    return int.from_bytes(head[16:20], "big") / max(int.from_bytes(head[20:24], "big"), 1)


def provenance_appendix(devices: list[DeviceData]) -> list[Block]:
    rows = []
    for d in devices:
        for exp, doc in d.docs.items():
            t = doc.get("trace") or {}
            info = doc.get("device_info") or {}
            source = info.get("profile") or info.get("uuid") or info.get("name") or "—"
            rows.append(
                (
                    d.name,
                    exp,
                    f"`{str(t.get('git_commit'))[:10]}`",
                    f"`{str(t.get('config_hash'))[:10]}`",
                    f"{info.get('backend', '—')}: {source}",
                )
            )
    return [
        Heading(1, "Appendix: provenance"),
        Paragraph(
            "One row per trace: the commit and config hash it was measured at, and on what (the "
            "simulator profile or the GPU's UUID). The full provenance (clocks before and after, "
            "cubin and profile SHA-256, host) is in each trace's Parquet metadata; the time a "
            "sweep ran is in its log, so that a trace is the same file for the same seed."
        ),
        Table(
            ("device", "experiment", "commit", "config", "measured on"),
            tuple(rows),
            name="provenance",
        ),
    ]


def regenerate_appendix(devices: list[DeviceData], studies: list[Study]) -> list[Block]:
    rows = []
    for s in studies:
        rows.append(
            (f"study {s.key} (its tables and report)", f"`snakemake --cores 1 {s.key}`", "—")
        )
    for d in devices:
        run = d.run_name or d.name
        backend = (next(iter(d.docs.values()), {}).get("device_info") or {}).get("backend")
        cfg = " --configfile config/gpu.yaml" if backend == "cuda" else ""
        for exp in d.docs:
            secs = [d.seconds.get(f"{job}/{run}_{exp}") for job in ("run_sweep", "analyze_trace")]
            took = "—" if None in secs else f"{sum(secs):.1f} s"  # type: ignore[arg-type]
            rows.append(
                (
                    f"{d.name}: {exp} tables",
                    f"`snakemake --cores 1{cfg} results/analysis/{run}/{exp}.json`",
                    took,
                )
            )
        plot = d.seconds.get(d.plot_job)
        rows.append(
            (
                f"{d.name}: every figure",
                f"`snakemake --cores 1{cfg} {d.figure_dir}/<figure>.png`",
                "—" if plot is None else f"{plot:.1f} s",
            )
        )
    return [
        Heading(1, "Appendix: regenerating tables and figures"),
        Paragraph(
            "Each table and figure is the output of a rule; the command regenerates it (and "
            "whatever it needs) from the config. Times are the wall time of the jobs in the run "
            "that wrote this report (sweep and analysis; all figures of a device are one job), "
            "from Snakemake's benchmark files; '—' where that run did not time them."
        ),
        Table(("output", "command", "time in this run"), tuple(rows), name="regenerate"),
    ]


def build_document(
    devices: list[DeviceData], *, title: str, report_dir: Path, studies: list[Study]
) -> Document:
    doc = Document(title)
    doc.add(
        Heading(1, "Summary"),
        # what was measured on hardware and what was simulated comes first (issue 34)
        Paragraph(provenance_paragraph({d.name: d.docs for d in devices})),
        Paragraph(
            "Every number below was derived by an analysis rule from a trace; paper values "
            "appear only as the column they are compared against, each cited to its table or "
            "figure."
        ),
        Paragraph(VERDICTS),
        Paragraph(CONFIDENCE),
    )
    fleet = fleet_table({d.name: d.docs for d in devices})
    if len(devices) > 1 and fleet.rows:
        doc.add(fleet)
    for d in devices:
        doc.add(*device_summary(d.name, d.docs, d.topology))
        if d.twin_agreement:
            doc.add(*twin_part(d.name, d.twin_agreement))
    doc.add(PageBreak(), Contents(), PageBreak())
    for s in studies:
        doc.add(*study_part(s, devices))
    for d in devices:
        doc.add(*device_part(d, report_dir))
    doc.add(*provenance_appendix(devices), *regenerate_appendix(devices, studies))
    return doc
