"""`gpudissect`: run, analyse, plot and report experiments without Snakemake.

The Snakemake rules call these same subcommands, so a single step can be rerun by hand.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .cli_documents import add_document_commands
from .cli_twin import add_twin_commands
from .exceptions import GpuDissectError

log = logging.getLogger("gpudissect")


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def cmd_devices(args: argparse.Namespace) -> int:
    """List CUDA GPUs visible here and, with --config, the configured devices."""
    from .devices import list_cuda_devices

    gpus = list_cuda_devices()
    if gpus:
        print("CUDA devices:")
        for g in gpus:
            print(
                f"  [{g['index']}] {g['name']}  compute capability {g['compute_capability']}  "
                f"({g['source']})"
            )
    else:
        print("CUDA devices: none found (no nvidia-smi or pycuda, or no GPU)")
    if args.config:
        from .config import load

        cfg = load(args.config)
        print(f"Configured devices ({args.config}):")
        for d in cfg.devices:
            where = d.profile if d.backend == "sim" else f"cuda index {d.index}"
            print(f"  {d.name}: backend {d.backend}, {where}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from .config import load

    cfg = load(args.config)
    print(
        f"{args.config}: valid ({len(cfg.devices)} device(s): "
        f"{', '.join(d.name for d in cfg.devices)})"
    )
    return 0


def cmd_detect_arch(args: argparse.Namespace) -> int:
    from .devices import detect_arch

    print(detect_arch(args.index))
    return 0


def cmd_compile(args: argparse.Namespace) -> int:
    from .kernels import compile_kernel

    result = compile_kernel(
        args.kernel,
        arch=args.arch,
        output=args.out,
        nvcc=args.nvcc,
        extra_flags=tuple(args.flag or ("-O3",)),
    )
    print(result.log)
    print(f"cubin {result.cubin} sha256 {result.sha256}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from .config import load
    from .sweep import run_experiment

    cfg = load(args.config)
    device = cfg.device(args.device)
    inputs = dict(kv.split("=", 1) for kv in args.input or [])
    path = run_experiment(
        device, args.experiment, out=args.out, cubin_dir=args.cubin_dir, inputs=inputs
    )
    print(f"trace written: {path}")
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    import pyarrow.parquet as pq

    from .analysis.common.result import table_path, write_result, write_table
    from .families import family
    from .traces import check_schema, read_trace

    # read once: the trace names its experiment, whose schema its columns must then match
    trace = read_trace(args.trace)
    named = trace.provenance["experiment"]
    if args.experiment and args.experiment != named:
        raise GpuDissectError(
            f"analyze --experiment: {args.experiment!r}, but trace {args.trace} was written by "
            f"experiment {named!r}; allowed: {named!r} (or leave --experiment out)"
        )
    fam = family(named)
    if fam.table is not None and Path(table_path(args.out)).resolve() == Path(args.trace).resolve():
        raise GpuDissectError(
            f"analyze --out: {args.out} would put the figure table of {named!r} at "
            f"{table_path(args.out)}, the trace being read; allowed: a result path whose "
            ".parquet sibling is not the trace (e.g. another folder or name)"
        )
    check_schema(pq.read_schema(trace.path), fam.schema, trace.path)  # the footer's schema
    inputs = dict(kv.split("=", 1) for kv in args.input or [])
    doc = fam.analyse(trace.data, provenance=trace.provenance, inputs=inputs)
    if fam.table is not None:  # the tidy table the figures draw, beside the document
        write_table(table_path(args.out), fam.table(trace.data, doc))
    write_result(args.out, doc)
    print(json.dumps(doc.get("elements", {}), indent=2))
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    """The figures of one or more experiments of one device, in one process."""
    if not len(args.experiment) == len(args.trace) == len(args.analysis):
        raise GpuDissectError(
            f"plot: --experiment, --trace and --analysis pair up in order; got "
            f"{len(args.experiment)}, {len(args.trace)} and {len(args.analysis)} values"
        )
    if args.jobs < 1:
        raise GpuDissectError(f"plot --jobs: {args.jobs}; allowed: a whole number of at least 1")
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # every figure goes to a scratch folder first and all move into place at the end: an
    # interrupted or failed job leaves no figure of its own behind, so a rerun starts clean
    scratch = Path(tempfile.mkdtemp(prefix=".plot-", dir=out_dir))
    try:
        _draw_figures(args, scratch)
        for f in sorted(scratch.iterdir()):
            os.replace(f, out_dir / f.name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


def _draw_figures(args: argparse.Namespace, out_dir: Path) -> None:
    """Every experiment's figures; with --jobs above 1, experiments are drawn in that many
    processes at once, at most one per usable CPU (each figure seeds its own random elements,
    so the files are the same)."""
    import matplotlib

    matplotlib.use("Agg")
    work = [
        (name, trace_path, analysis_path, str(out_dir), tuple(args.formats))
        for name, trace_path, analysis_path in zip(
            args.experiment, args.trace, args.analysis, strict=True
        )
    ]
    # never more processes than the CPUs this process may run on: a cluster run gives a local
    # job the threads its rule asks for whatever the host has (Snakemake ignores --local-cores
    # there, snakemake/snakemake#979), and each process imports matplotlib once more
    jobs = min(args.jobs, len(work), len(os.sched_getaffinity(0)))
    if jobs <= 1:
        for item in work:
            _draw_experiment(*item)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # fork: the workers start with matplotlib, seaborn, the plotting package and matplotlib's
    # font list already loaded; on a host without matplotlib's font cache (a fresh machine or
    # HOME) the list is built here once, not in every worker (about 3 s each on an H100 host)
    import matplotlib.font_manager  # noqa: F401
    import matplotlib.pyplot  # noqa: F401

    from . import plotting  # noqa: F401

    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        # the experiments with the most figures first, so the longest work starts first
        work.sort(key=lambda item: -len(_family_figures(item[0])))
        for future in [pool.submit(_draw_experiment, *item) for item in work]:
            future.result()  # re-raises a worker's error here


def _family_figures(name: str) -> tuple[str, ...]:
    from .families import family

    return tuple(family(name).figures)


def _draw_experiment(
    name: str, trace_path: str, analysis_path: str, out_dir: str, formats: tuple[str, ...]
) -> None:
    """The figures of one experiment, saved in every format under out_dir."""
    import matplotlib.pyplot as plt

    from .families import family
    from .plotting.describe import caption_text
    from .report.captions import caption_path, prose
    from .traces import read_trace

    fam = family(name)
    trace = read_trace(trace_path, schema=fam.schema)
    doc = json.loads(Path(analysis_path).read_text())
    if trace.data.empty:
        from .analysis.common.result import no_path_reason
        from .plotting import placeholder

        reason = no_path_reason(trace.provenance)
        figures = {stem: placeholder(f"{doc['device']}: {stem}", reason)[0] for stem in fam.figures}
    elif fam.table is not None:
        figures = fam.plot(trace.data, doc, table=_read_table(analysis_path))
    else:
        figures = fam.plot(trace.data, doc)
    missing = set(fam.figures) - set(figures)
    if missing:
        raise GpuDissectError(f"plot of {fam.name} did not make {sorted(missing)}")
    for stem, fig in figures.items():
        _label_simulated(fig, doc)
        _lay_out(fig, dpi=_DPI)
        with plt.rc_context({"svg.hashsalt": stem}):  # an SVG's element ids, else random
            for ext in formats:
                fig.savefig(Path(out_dir) / f"{stem}.{ext}", dpi=_DPI, metadata=_NO_DATE.get(ext))
        # the caption says what this drawing draws (its axes, series and marks)
        caption_path(Path(out_dir) / f"{stem}.png").write_text(
            caption_text(fig, stem, prose(stem)) + "\n"
        )
        plt.close(fig)
    log.info("%s: %d figures", name, len(figures))


_DPI = 150  # of the PNG files; a PDF keeps the layout laid out at it
# the formats whose files otherwise carry the time they were written: without it (and the SVG's
# fixed id salt) a rerun of the same trace and analysis writes the same bytes
_NO_DATE = {"pdf": {"CreationDate": None}, "svg": {"Date": None}}


def _lay_out(fig, *, dpi: float) -> None:
    """Lay the figure out once, at the resolution it is saved at, and take its layout engine
    away: every format's savefig then only draws. A figure with an engine (even the placeholder
    that `set_layout_engine("none")` leaves) is drawn twice by each savefig, once without output
    to lay it out and once to render, every tick and text measured again; the layout made here
    is the one the first savefig would make, so the files are the same."""
    import matplotlib

    engine = fig.get_layout_engine()
    fig.set_dpi(dpi)
    if engine is not None and fig.axes:
        try:
            engine.execute(fig)
        except ValueError:  # as Figure.draw: a layout that cannot be made keeps the positions
            pass
    # no engine at all (None, not the placeholder), whatever the rc file says of a default one
    no_default = {"figure.autolayout": False, "figure.constrained_layout.use": False}
    with matplotlib.rc_context(no_default):
        fig.set_layout_engine(None)


def _label_simulated(fig, doc: dict) -> None:
    """A simulated device's figure says so in its title (issue 34: the number and the word
    "simulated" stand together), from the trace's backend, never from the device's name."""
    info = doc.get("device_info") or {}
    if info.get("backend") != "sim":
        return
    device = str(doc.get("device", ""))
    label = f"{device} (simulated twin)"

    def labelled(text: str, fontsize: float) -> str:
        rest = text.removeprefix(f"{device}:").strip()
        # a title wider than its figure is cut at both edges: the label then takes a line
        fits = fig.get_figwidth() * 72 / (0.55 * fontsize)
        return f"{label}: {rest}" if len(label) + len(rest) + 2 <= fits else f"{label}:\n{rest}"

    title = fig._suptitle  # matplotlib keeps the suptitle here; None when there is none
    if title is not None and title.get_text():
        title.set_text(labelled(title.get_text(), title.get_fontsize()))
        return
    for ax in fig.axes:
        text = ax.get_title()
        if text:
            ax.set_title(labelled(text, ax.title.get_fontsize()))
            return
    fig.suptitle(label)


def _read_table(analysis_path: str):
    """The tidy table the analysis wrote beside its result document."""
    import pandas as pd

    from .analysis.common.result import table_path

    path = table_path(analysis_path)
    if not path.is_file():
        raise GpuDissectError(
            f"plot: {path} is missing: the analysis writes it beside {analysis_path}; run "
            "`gpudissect analyze` again for this trace"
        )
    return pd.read_parquet(path)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gpudissect", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    from .families import FAMILIES

    experiments = list(FAMILIES)
    experiment_help = f"experiment family, one of: {', '.join(experiments)}"

    s = sub.add_parser("devices", help="list CUDA GPUs here (and configured devices)")
    s.add_argument("--config", metavar="YAML", help="also list the devices of this run config")
    s.set_defaults(func=cmd_devices)

    s = sub.add_parser("validate", help="validate a run config (and its device profiles)")
    s.add_argument(
        "--config",
        required=True,
        metavar="YAML",
        help="the run config to check, e.g. config/config.yaml",
    )
    s.set_defaults(func=cmd_validate)

    s = sub.add_parser("detect-arch", help="print the sm_XX arch of CUDA device INDEX")
    s.add_argument("--index", type=int, default=0, help="CUDA device index (default 0)")
    s.set_defaults(func=cmd_detect_arch)

    s = sub.add_parser("compile", help="compile one kernel to a cubin with nvcc")
    s.add_argument("--kernel", required=True, help="kernels/<name>.cu")
    s.add_argument("--arch", required=True, help="target arch, e.g. sm_90")
    s.add_argument("--out", required=True, help="output .cubin")
    s.add_argument(
        "--nvcc", default=shutil.which("nvcc") or "nvcc", help="the nvcc to run (default: on PATH)"
    )
    s.add_argument("--flag", action="append", help="an nvcc flag (repeatable; default: -O3 alone)")
    s.set_defaults(func=cmd_compile)

    s = sub.add_parser("run", help="run one experiment on one configured device -> trace")
    s.add_argument("--config", required=True, help="run config YAML")
    s.add_argument("--device", required=True, help="device name from the config")
    s.add_argument(
        "--experiment", required=True, choices=experiments, metavar="NAME", help=experiment_help
    )
    s.add_argument("--out", required=True, help="trace .parquet to write")
    s.add_argument("--cubin-dir", help="folder with compiled cubins (cuda devices)")
    s.add_argument(
        "--input",
        action="append",
        metavar="NAME=PATH",
        help="an extra input the sweep reads (repeatable)",
    )
    s.set_defaults(func=cmd_run)

    s = sub.add_parser(
        "analyze",
        help="analyse a trace -> result JSON (and, for families whose figures draw one, the "
        "tidy table beside it as .parquet)",
    )
    s.add_argument(
        "--experiment",
        choices=experiments,
        metavar="NAME",
        help="the experiment that wrote the trace (default: the one its metadata names; "
        "an error when they differ)",
    )
    s.add_argument("--trace", required=True, help="the trace .parquet to analyse")
    s.add_argument("--out", required=True, help="result .json to write")
    s.add_argument(
        "--input",
        action="append",
        metavar="NAME=PATH",
        help="an extra input the analysis reads (repeatable)",
    )
    s.set_defaults(func=cmd_analyze)

    s = sub.add_parser(
        "plot",
        help="the figures of one or more experiments (traces and results paired in order)",
    )
    s.add_argument(
        "--experiment",
        nargs="+",
        required=True,
        choices=experiments,
        metavar="NAME",
        help=experiment_help,
    )
    s.add_argument("--trace", nargs="+", required=True, help="the trace of each experiment")
    s.add_argument("--analysis", nargs="+", required=True, help="the result JSON of each trace")
    s.add_argument("--out-dir", required=True, help="folder for <figure>.<format> files")
    s.add_argument(
        "--formats", nargs="+", default=["png", "pdf"], help="file formats (default: png pdf)"
    )
    s.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="draw up to N experiments at once, each in its own process, and no more processes "
        "than usable CPUs (default 1)",
    )
    s.set_defaults(func=cmd_plot)

    add_document_commands(sub)
    add_twin_commands(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging(args.verbose)
    try:
        return args.func(args)
    except GpuDissectError as exc:
        print(f"gpudissect: error: {exc}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:
        print(f"gpudissect: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
