"""The commands that write documents from a run's results: the topology document (`topology`),
the report (`report`) and its PDF (`pdf`), a GPU's reference folder (`reference`).
`gpudissect.cli` adds them to its parser."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .exceptions import ConfigError, GpuDissectError


def cmd_report(args: argparse.Namespace) -> int:
    """Markdown and LaTeX from one report model (and its tables as CSV), from a run's results
    (--device) or a fleet of reference results (--reference)."""
    from .report.render import render_report, write_tables
    from .report.sources import reference_devices, run_devices
    from .report.studies import STUDIES

    opt = lambda p: Path(p) if p else None  # noqa: E731
    if args.reference:
        devices, studies = reference_devices(Path(args.reference)), list(STUDIES.values())
    elif args.device:
        for name in args.device:
            if not any(Path(args.analysis, name).glob("*.json")):
                raise GpuDissectError(
                    f"report --device: no result documents for device {name!r} under "
                    f"{args.analysis}/{name}/; allowed: a device with results, here "
                    f"{_devices_with_results(Path(args.analysis)) or 'none'}"
                )
        devices, studies = run_devices(
            args.device,
            analysis_dir=Path(args.analysis),
            figures_dir=Path(args.figures),
            topology_dir=opt(args.topology),
            benchmarks_dir=opt(args.benchmarks),
            study=args.study,
            twins_dir=opt(args.twins),
        )
    else:
        raise GpuDissectError("report: give --device NAME... (a run) or --reference DIR (a fleet)")
    doc = render_report(devices, title=args.title, out=args.out, tex=args.tex, studies=studies)
    if args.tables_dir:
        write_tables(doc, Path(args.tables_dir), tuple(args.table or ()))
    print(f"report written: {args.out}")
    if args.pdf:
        from .report.render import compile_pdf

        print(f"pdf written: {compile_pdf(Path(args.out).with_suffix('.tex'), args.pdf)}")
    return 0


def cmd_pdf(args: argparse.Namespace) -> int:
    from .report.render import compile_pdf

    print(f"pdf written: {compile_pdf(args.tex, args.out)}")
    return 0


def cmd_topology(args: argparse.Namespace) -> int:
    from .analysis.common.result import write_result
    from .families import FAMILIES
    from .topology import build_topology, to_mt4g, validate_topology

    if args.source:
        with open(args.source) as f:
            doc = json.load(f)
    else:
        docs = args.analyses or [
            str(p)
            for exp in FAMILIES
            if (p := Path(args.analysis, args.device, f"{exp}.json")).is_file()
        ]
        if not docs:
            raise ConfigError(
                f"--device {args.device!r}: no analysis documents under "
                f"{Path(args.analysis, args.device)}; run the pipeline for that device first"
            )
        repeats = None
        if args.repeats:
            with open(args.repeats) as f:
                repeats = json.load(f)
        doc = build_topology(args.device, docs, tuple(FAMILIES), repeats=repeats)
    validate_topology(doc)
    out = write_result(args.out, to_mt4g(doc) if args.format == "mt4g" else doc)
    print(f"topology written: {out}")
    return 0


def cmd_repeats(args: argparse.Namespace) -> int:
    from .analysis.common.result import write_result
    from .topology.repeats import compare_repeats

    missing = [p for p in args.analyses if not Path(p).is_file()]
    if missing:
        raise GpuDissectError(f"repeats --analyses: no such file(s): {missing}")
    doc = compare_repeats(args.device, list(args.analyses))
    write_result(args.out, doc)
    print(f"repeats written: {args.out} ({len(doc['does_not_repeat'])} values do not repeat)")
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    from .analysis.common.result import write_result
    from .topology import validate_topology
    from .topology.runs import compare_runs

    missing = [p for p in args.topology if not Path(p).is_file()]
    if missing:
        raise GpuDissectError(f"runs --topology: no such file(s): {missing}")
    names = args.names or [Path(p).parent.name or p for p in args.topology]
    if not args.names and len(set(names)) != len(names):
        names = [f"run{i + 1}" for i in range(len(args.topology))]
    docs = []
    for p in args.topology:
        with open(p) as f:
            docs.append(json.load(f))
    doc = compare_runs(docs, list(names))
    validate_topology(doc)
    write_result(args.out, doc)
    flagged = doc["runs"]["does_not_repeat"]
    print(
        f"runs written: {args.out} ({len(docs)} runs; {len(flagged)} structural values do not "
        f"repeat{': ' + ', '.join(flagged) if flagged else ''})"
    )
    return 0


def cmd_reference(args: argparse.Namespace) -> int:
    from .reference import FIGURE_COLOURS, assemble, check_name, fleet, make_reference, readme

    if args.compact_only:
        from .compact import compact_folder, summary, usable_jobs

        folder = Path(args.compact_only)
        done = compact_folder(folder, jobs=usable_jobs(args.cores), colours=FIGURE_COLOURS)
        print(f"reference compacted: {folder}: {summary(done)}")
        return 0
    if args.gpu is None:
        raise ConfigError(
            "reference: give --gpu NAME (the folder's name, e.g. h100), or --compact-only DIR"
        )
    gpu = check_name(args.gpu)
    out_root = Path(args.out_root)
    if args.readme_only:
        folder = out_root / gpu
        if not (folder / "topology").is_dir():
            raise ConfigError(f"reference --readme-only: {folder} holds no reference run")
        (folder / "README.md").write_text(readme(folder, gpu))
        print(f"reference README written: {folder / 'README.md'}")
        return 0
    if args.assemble_only:
        from .compact import usable_jobs

        final = assemble(gpu, out_root=out_root, jobs=usable_jobs(args.cores))
        fleet(out_root)
    else:
        final = make_reference(gpu, cores=args.cores)
    print(f"reference written: {final}")
    return 0


def _devices_with_results(analysis: Path) -> list[str]:
    return sorted(p.name for p in analysis.glob("*") if p.is_dir() and any(p.glob("*.json")))


def add_document_commands(sub) -> None:
    """The `topology`, `report` and `pdf` subcommands, on the parser's subparsers `sub`."""
    from .report.studies import STUDIES as STUDY_KEYS

    s = sub.add_parser(
        "topology",
        help="the topology document of one device (from its analyses), or MT4G's form of one",
    )
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("--device", help="build from results/analysis/<DEVICE>/*.json")
    src.add_argument("--from", dest="source", help="an existing topology document to convert")
    s.add_argument(
        "--analysis", default="results/analysis", help="the analysis folder (with --device)"
    )
    s.add_argument(
        "--analyses",
        nargs="+",
        metavar="JSON",
        help="build from exactly these analysis documents (default: every one of the device)",
    )
    s.add_argument(
        "--repeats",
        metavar="JSON",
        help="the repeats document of a run that repeated (`gpudissect repeats`): values that "
        "do not repeat are reported undetermined, measured ones with their spread",
    )
    s.add_argument(
        "--format",
        choices=("gpudissect", "mt4g"),
        default="gpudissect",
        help="gpudissect: this project's document (config/README.md); mt4g: MT4G's field names",
    )
    s.add_argument("--out", required=True, help="the .json to write")
    s.set_defaults(func=cmd_topology)

    s = sub.add_parser(
        "repeats",
        help="compare the analysis documents of a run's repeats (<experiment>.json, "
        "<experiment>.r<k>.json) -> the repeats document",
    )
    s.add_argument("--device", required=True, help="the device's name")
    s.add_argument("--analyses", nargs="+", required=True, metavar="JSON", help="every repeat's")
    s.add_argument("--out", required=True, help="the .json to write")
    s.set_defaults(func=cmd_repeats)

    s = sub.add_parser(
        "runs",
        help="compare the topology documents of whole runs on one GPU model (fresh machines, "
        "other units) -> one topology document, values that do not repeat undetermined",
    )
    s.add_argument(
        "--topology", nargs="+", required=True, metavar="JSON", help="each run's topology"
    )
    s.add_argument(
        "--names",
        nargs="+",
        metavar="NAME",
        help="a name per run, in order (default: each topology's folder name, or run1, "
        "run2, ... where two folders share a name)",
    )
    s.add_argument("--out", required=True, help="the .json to write")
    s.set_defaults(func=cmd_runs)

    s = sub.add_parser(
        "reference",
        help="a GPU's reference results in one command: the config/gpu.yaml run of CUDA device "
        "0 with its twin -> results/reference/<GPU>/, then the fleet report",
    )
    s.add_argument("--gpu", help="the folder's name, e.g. h100 (all but --compact-only)")
    s.add_argument(
        "--cores",
        type=int,
        default=8,
        help="Snakemake's --cores, and the files compacted at once (at most this machine's "
        "cores; default 8)",
    )
    s.add_argument("--out-root", default="results/reference", help=argparse.SUPPRESS)
    how = s.add_mutually_exclusive_group()
    how.add_argument(
        "--assemble-only",
        action="store_true",
        help="no run: assemble the folder from this checkout's finished results/ and logs/",
    )
    how.add_argument(
        "--readme-only",
        action="store_true",
        help="no run: write the folder's README again from its documents",
    )
    how.add_argument(
        "--compact-only",
        metavar="DIR",
        help="no run: compact an existing reference folder in place (Parquet rewritten "
        "losslessly at the smallest zstd level and encoding per column; PNGs optimized, an "
        "opaque one of more than 256 colours reduced to 256)",
    )
    s.set_defaults(func=cmd_reference)

    s = sub.add_parser("report", help="render the report (Markdown and LaTeX) of a run or a fleet")
    s.add_argument(
        "--device", nargs="+", help="devices of the run, in report order (each needs results)"
    )
    s.add_argument("--reference", help="a fleet: every <gpu>/ of this folder (results/reference)")
    s.add_argument("--study", choices=sorted(STUDY_KEYS), help="only this study's part")
    s.add_argument(
        "--analysis", default="results/analysis", help="folder of <device>/<experiment>.json"
    )
    s.add_argument("--figures", default="results/figures", help="folder of <device>/*.png")
    s.add_argument("--topology", help="folder of <device>.json topology documents, if any")
    s.add_argument("--benchmarks", help="Snakemake benchmark folder (job times), if any")
    s.add_argument(
        "--twins",
        help="folder of <device>.agreement.json (a GPU against its twin), if any: their tables "
        "go into the summary",
    )
    s.add_argument("--title", default="gpudissect report", help="the report's title")
    s.add_argument("--out", default="results/report/report.md", help="the Markdown to write")
    s.add_argument("--tex", help="LaTeX output (default: --out with .tex)")
    s.add_argument("--tables-dir", help="write the named tables here as CSV")
    s.add_argument("--table", nargs="*", help="exactly these named tables (with --tables-dir)")
    s.add_argument("--pdf", help="also compile the LaTeX to this PDF (latexmk)")
    s.set_defaults(func=cmd_report)

    s = sub.add_parser("pdf", help="compile a report's LaTeX to PDF with latexmk")
    s.add_argument("--tex", required=True, help="the report's .tex (beside its figures)")
    s.add_argument("--out", required=True, help="the .pdf to write")
    s.set_defaults(func=cmd_pdf)
