"""A GPU's reference results, made by one command: `make reference GPU=<name>` (which calls
`gpudissect reference --gpu <name>`) runs the whole `config/gpu.yaml` experiment set on CUDA
device 0 with its digital twin (`config/twin.yaml`) and assembles the run into
`results/reference/<name>/` in one fixed layout (`LAYOUT`), with a README generated from the
run's documents; the fleet report (`results/reference/fleet.{md,pdf}`) is then rendered again
from every GPU folder.

The run is two Snakemake invocations of one config: the measured part (target `measured`: the
GPU's sweeps, analyses, figures and topology), timed, then everything else (the twin's profile
and its run on the simulator, the agreement, the report). A rerun resumes where a run stopped: a
GPU host without the simulator's dependencies finishes the measured part, and the same command
on another machine, given the run's `results/` and `logs/`, completes the rest.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from .compact import COMPACT_LEVELS, usable_jobs
from .exceptions import ConfigError, GpuDissectError
from .sweep import TIMING_TAG

CONFIGS = ("config/gpu.yaml", "config/twin.yaml")
DEVICE = "gpu0"
TWIN = "gpu0_twin"
# the measured part's wall time and each sweep's, written when that part ran
GPU_RUN = "gpu_run.json"
# what made the folder: written by `assemble`, absent from a folder laid out by hand
MANIFEST = "reference.json"
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
# every job's Snakemake benchmark file as one row of one table (85 files of a few bytes each
# would take a disk block apiece)
JOB_TIMES = "jobs.tsv"
# a reference folder's PNG figures hold at most this many colours (`compact`); their PDFs, which
# the fleet report's LaTeX draws, keep every line as drawn
FIGURE_COLOURS = 256
# the run's report files a reference folder keeps: its Markdown and the tables it names. Its
# LaTeX and PDF stay out (1.6 MB a GPU): the print form of every GPU's measured sections is the
# fleet report's PDF (`fleet.pdf`), which draws the figures' PDFs
REPORT_KEPT = ("report.md", "tables")

LAYOUT = (
    ("README.md", "this page, generated from the documents below by `gpudissect reference`"),
    (MANIFEST, "the command and configs that made this folder"),
    (
        f"traces/{DEVICE}/<experiment>.parquet",
        "every timed access or launch; provenance (commit, config hash, device UUID, clocks "
        "before and after, cubin SHA-256, carveouts) in the Parquet metadata; zstd, each column "
        "at the encoding and level that store it smallest (`gpudissect reference --compact-only`)",
    ),
    (
        f"analysis/{DEVICE}/<experiment>.json",
        "every derived quantity with confidence, method and evidence, or `undetermined` with "
        "the reason (and the tidy tables the figures draw, `.parquet`)",
    ),
    (
        f"topology/{DEVICE}.json",
        "the topology document (config/README.md), built from `analysis/` here so that its "
        f"pointers resolve in this folder; `{DEVICE}.mt4g.json` the same in MT4G's field names",
    ),
    (
        f"figures/{DEVICE}/",
        f"every figure of the run: PNG (at most {FIGURE_COLOURS} colours, `gpudissect reference "
        "--compact-only`), PDF (as drawn) and the caption (`.rst`)",
    ),
    (
        "report/",
        "the run's report in Markdown with its tables (`tables/`); every GPU's measured sections "
        "in print are the fleet report's PDF, `../fleet.pdf`",
    ),
    ("logs/", "every job's log; a sweep's ends with its `sweep timing:` line"),
    (
        "benchmarks/",
        f"`{JOB_TIMES}`: Snakemake's per-job times (its benchmark files, a row each, named by "
        f"rule and job), and `{GPU_RUN}`: the measured part's wall time and each sweep's",
    ),
    (
        "twin/",
        "the digital twin: its profile (`<gpu>_twin.yaml`), the Accel-Sim options the topology "
        "determines (`accel-sim.config`), the twin's run on the simulator (`analysis/`, "
        "`topology/`; its traces are not kept: the profile and the seeded simulator make them "
        "again) and its agreement with this GPU (`agreement.{json,md}`)",
    ),
)


def check_name(gpu: str) -> str:
    if not _NAME.match(gpu or ""):
        raise ConfigError(
            f"reference --gpu {gpu!r}: not a reference folder name; allowed: lower-case "
            "letters, digits, '_' and '-', starting with a letter or digit (e.g. h100)"
        )
    return gpu


def _snakemake(
    cores: int, targets: list[str], configs: tuple[str, ...], extra: tuple[str, ...] = ()
) -> None:
    cmd = [sys.executable, "-m", "snakemake", *targets, "--cores", str(cores)]
    cmd += ["--configfile", *configs, *extra]
    print("$ " + " ".join(cmd[2:]), flush=True)
    subprocess.run(cmd, check=True)


def sweep_seconds(log: Path) -> float | None:
    """A sweep's wall time, from the timing line its log ends with (traces hold no time)."""
    lines = log.read_text().splitlines() if log.is_file() else []
    for line in reversed(lines):
        if TIMING_TAG in line:
            return float(json.loads(line.split(TIMING_TAG, 1)[1])["elapsed_s"])
    return None


def resume_args(root: Path = Path(".")) -> tuple[str, ...]:
    """Snakemake's arguments for a run that resumes on a host without the GPU: the arch its
    kernels were built for, from the traces the GPU wrote, and files made again by their
    modification times alone (nothing when the GPU is here)."""
    from .devices import detect_arch

    try:
        detect_arch(0)
        return ()
    except GpuDissectError:
        pass
    from .traces import METADATA_KEY

    for trace in sorted((root / "results" / "traces" / DEVICE).glob("*.parquet")):
        prov = json.loads((pq.read_schema(trace).metadata or {}).get(METADATA_KEY, b"{}"))
        arch = (prov.get("device_info") or {}).get("arch")
        if arch:
            # naming the arch changes the device entry's parameters: only missing or older
            # files are made again here, never the GPU's sweeps for that alone
            return ("--config", f"cuda_arch={arch}", "--rerun-triggers", "mtime")
    raise GpuDissectError(
        "reference: no CUDA GPU here and no traces of one under results/traces/gpu0; run "
        "`make reference` on the GPU host (it resumes here from that run's results/ and logs/)"
    )


def run_measured(
    cores: int,
    configs: tuple[str, ...] = CONFIGS,
    root: Path = Path("."),
    extra: tuple[str, ...] = (),
) -> None:
    """The measured part, timed; its times go to results/benchmarks/gpu_run.json when a sweep
    ran (a rerun that only analyses or draws again keeps the times of the run that swept)."""

    def traces() -> dict[str, int]:
        return {
            p.name: p.stat().st_mtime_ns
            for p in (root / "results" / "traces" / DEVICE).glob("*.parquet")
        }

    before = traces()
    start = time.perf_counter()
    _snakemake(cores, ["measured"], configs, extra)
    wall = time.perf_counter() - start
    if before and traces() == before:  # no sweep ran: the times of the run that made them stay
        return
    sweeps = {}
    for trace in sorted((root / "results" / "traces" / DEVICE).glob("*.parquet")):
        seconds = sweep_seconds(root / "logs" / "run_sweep" / DEVICE / f"{trace.stem}.log")
        if seconds is not None:
            sweeps[trace.stem] = round(seconds, 1)
    doc = {"wall_s": round(wall, 1), "cores": cores, "configs": list(configs), "sweeps": sweeps}
    out = root / "results" / "benchmarks" / GPU_RUN
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")


def _copy(src: Path, dst: Path) -> None:
    if not src.exists():
        raise GpuDissectError(f"reference: {src} is missing; the run did not make it")
    if src.is_dir():
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.tmp", ".*"))
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)


def _topology(device: str, analysis: Path, out: Path, moves: tuple[Path, Path]) -> dict[str, Any]:
    """The device's topology document from `analysis`, its pointers naming the folder that
    `moves` (built, final) moves it to."""
    from .analysis.common.result import write_result
    from .families import FAMILIES
    from .topology import build_topology, to_mt4g, validate_topology

    docs = [str(p) for exp in FAMILIES if (p := analysis / device / f"{exp}.json").is_file()]
    doc = build_topology(device, docs, tuple(FAMILIES))
    built, final = (str(p) + "/" for p in moves)
    doc = json.loads(json.dumps(doc).replace(json.dumps(built)[1:-1], json.dumps(final)[1:-1]))
    validate_topology(doc)
    write_result(out / f"{device}.json", doc)
    if device == DEVICE:
        write_result(out / f"{device}.mt4g.json", to_mt4g(doc))
    return doc


def assemble(
    gpu: str,
    *,
    root: Path = Path("."),
    out_root: Path | None = None,
    compact_levels: tuple[int, ...] = COMPACT_LEVELS,
    jobs: int = 1,
) -> Path:
    """Copy the run under `root` (results/, logs/) into `out_root/<gpu>/` in the fixed layout,
    compacted (`compact`: Parquet columns losslessly at the best of the zstd levels
    `compact_levels`, PNGs optimized and reduced to `FIGURE_COLOURS`, `jobs` files at once; `()`
    leaves every file as the run wrote it); built beside it and moved into place at the end, so
    a failure leaves the old folder."""
    check_name(gpu)
    results = root / "results"
    out_root = out_root or results / "reference"
    final = out_root / gpu
    out = out_root / f".{gpu}.partial"
    shutil.rmtree(out, ignore_errors=True)
    try:
        for sub in ("traces", "analysis", "figures"):
            _copy(results / sub / DEVICE, out / sub / DEVICE)
        for kept in REPORT_KEPT:
            if kept == "report.md" or (results / "report" / kept).exists():
                _copy(results / "report" / kept, out / "report" / kept)
        _note_unkept_figures(out / "report" / "report.md", out)
        _copy(root / "logs", out / "logs")
        copy_benchmarks(results / "benchmarks", out / "benchmarks")
        gpu_doc = _topology(DEVICE, out / "analysis", out / "topology", (out, final))
        twin = out / "twin"
        # the twin's traces stay out: its profile and the seeded simulator make them again
        _copy(results / "analysis" / TWIN, twin / "analysis" / TWIN)
        twin_doc = _topology(TWIN, twin / "analysis", twin / "topology", (out, final))
        _copy(results / "twins" / f"{DEVICE}.yaml", twin / f"{gpu}_twin.yaml")
        _copy(results / "twins" / f"{DEVICE}.accel-sim.config", twin / "accel-sim.config")
        _agreement(gpu_doc, twin_doc, twin)
        manifest = {"command": f"make reference GPU={gpu}", "configs": list(CONFIGS)}
        (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        (out / "README.md").write_text(readme(out, gpu))
        if compact_levels:
            from .compact import compact_folder, summary

            done = compact_folder(out, levels=compact_levels, jobs=jobs, colours=FIGURE_COLOURS)
            print(f"reference compacted: {summary(done)}")
        if final.exists():
            shutil.rmtree(final)
        os.replace(out, final)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return final


def copy_benchmarks(src: Path, dst: Path) -> None:
    """`src`'s files into `dst`, its Snakemake benchmark files (`<rule>/<job>.tsv`) as one table,
    `JOB_TIMES`: a `job` column (the file's path under `src`, without `.tsv`) before the
    benchmark's own columns, a row per file in path order."""
    if not src.is_dir():
        raise GpuDissectError(f"reference: {src} is missing; the run did not make it")
    dst.mkdir(parents=True, exist_ok=True)
    header: list[str] = []
    rows: list[dict[str, str]] = []
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if not path.is_file() or any(part.startswith(".") for part in rel.parts):
            continue
        if path.suffix != ".tsv":
            _copy(path, dst / rel)
            continue
        with path.open(newline="") as fh:
            for row in csv.DictReader(fh, delimiter="\t"):
                header += [k for k in row if k not in header]
                rows.append({"job": rel.with_suffix("").as_posix(), **row})
    if rows:
        with (dst / JOB_TIMES).open("w", newline="") as fh:
            out = csv.DictWriter(fh, ["job", *header], delimiter="\t", lineterminator="\n")
            out.writeheader()
            out.writerows(rows)


# a Markdown image, its text over several lines and holding brackets of its own
IMAGE = re.compile(r"!\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(([^)\s]+)\)")


def _note_unkept_figures(report: Path, folder: Path) -> None:
    """The report's figures that the folder does not keep (the twin's: its traces and figures
    are made again from its profile) become a line saying so, not an image that is not there."""
    if not report.is_file():
        return

    def note(m: re.Match) -> str:
        target = (report.parent / m.group(1)).resolve()
        if target.is_file():
            return m.group(0)
        kept = os.path.relpath(target, folder.resolve())
        return (
            f"*Figure `{kept}` is not kept in this folder: the twin's traces and figures are made "
            "again from its profile (`twin/`) by the seeded simulator.*"
        )

    report.write_text(IMAGE.sub(note, report.read_text()))


def _agreement(gpu_doc: dict, twin_doc: dict, twin: Path) -> None:
    from .analysis.common.result import write_result
    from .twin.agreement import compare_topologies, to_markdown

    doc = compare_topologies(gpu_doc, twin_doc)
    write_result(twin / "agreement.json", doc)
    (twin / "agreement.md").write_text(to_markdown(doc))


def fleet(out_root: Path) -> None:
    """The fleet report of every GPU folder under `out_root` (and its PDF where latexmk is)."""
    cmd = [sys.executable, "-m", "gpudissect", "report", "--reference", str(out_root)]
    cmd += ["--out", str(out_root / "fleet.md")]
    if shutil.which("latexmk"):
        cmd += ["--pdf", str(out_root / "fleet.pdf")]
    print("$ " + " ".join(cmd[2:]), flush=True)
    subprocess.run(cmd, check=True)


def make_reference(gpu: str, *, cores: int, configs: tuple[str, ...] = CONFIGS) -> Path:
    check_name(gpu)
    extra = resume_args()
    run_measured(cores, configs, extra=extra)
    _snakemake(cores, ["all"], configs, extra)
    final = assemble(gpu, jobs=usable_jobs(cores))
    fleet(final.parent)
    return final


# ---- the README, from the documents alone --------------------------------------------------


def _provenance(folder: Path) -> dict[str, list[str]]:
    """The commits and devices the folder's traces name (sorted, distinct)."""
    from .traces import METADATA_KEY

    seen: dict[str, set[str]] = {"commit": set(), "uuid": set()}
    for trace in sorted((folder / "traces" / DEVICE).glob("*.parquet")):
        meta = pq.read_schema(trace).metadata or {}
        prov = json.loads(meta.get(METADATA_KEY, b"{}"))
        seen["commit"].add(str(prov.get("git_commit")))
        seen["uuid"].add(str((prov.get("device_info") or {}).get("uuid")))
    return {k: sorted(v) for k, v in seen.items()}


def _value(entry: dict[str, Any]) -> str:
    from .report.topology_table import fmt_bytes

    v = entry.get("value")
    if v is None:
        if "not_applicable" in entry:
            return f"not applicable ({_gist(str(entry['not_applicable']))})"
        if "lower_bound" in entry:
            return f"at least {entry['lower_bound']} ({_gist(str(entry.get('undetermined')))})"
        if "undetermined" in entry:
            return f"undetermined ({_gist(str(entry['undetermined']))})"
        return "not measured"
    unit = entry.get("unit")
    if isinstance(v, list) and not v:
        text = "none"
    elif isinstance(v, list):
        text = ", ".join(json.dumps(x) if isinstance(x, (dict, list)) else str(x) for x in v)
        text = text if len(text) <= 200 else text[:197] + "..."
    elif unit == "bytes" and isinstance(v, (int, float)) and v >= 1024:
        text = f"{v} ({fmt_bytes(float(v))})"
    else:
        text = str(v)
    if entry.get("calibrated_value") is not None:
        text += f" raw, {entry['calibrated_value']} calibrated"
    if entry.get("carveout_pct") is not None:
        text += f" at carveout {entry['carveout_pct']}%"
    if "driver_value" in entry:
        text += f" (driver {entry['driver_value']})"
    return text


def _gist(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 160 else text[:157] + "..."


def readme(folder: Path, gpu: str) -> str:
    """The folder's README: every number in it read from the folder's documents."""
    from .report.topology_table import to_markdown, topology_table
    from .twin.agreement import counts_line

    topo = json.loads((folder / "topology" / f"{DEVICE}.json").read_text())
    facts = topo.get("driver") or {}
    prov = _provenance(folder)
    cc = str(facts.get("compute_capability", "")).replace(".", "")
    manifest = folder / MANIFEST
    if manifest.is_file():
        made = (
            f"Made by `{json.loads(manifest.read_text())['command']}`: every experiment of "
            "`config/gpu.yaml` (their sweep ranges automatic, from the driver's facts and earlier "
            "results of the run) on CUDA device 0 and its twin (`config/twin.yaml`)"
        )
    else:
        made = (
            f"Not made by `make reference` (this folder has no `{MANIFEST}`): a whole run of "
            "`config/gpu.yaml` laid out in this layout by hand, its twin made from its topology; "
            f"`make reference GPU={gpu}` on such a GPU makes it again"
        )
    lines = [
        f"# Reference results: {topo.get('gpu')} (sm_{cc})",
        "",
        f"{made}. Its traces name commit {_listed(prov['commit'])} and GPU "
        f"{_listed(prov['uuid'])} ({facts.get('sm_count')} SMs, driver "
        f"{facts.get('driver_version')}).",
        "",
    ]
    lines += _timing(folder)
    lines += ["## Layout", "", "| path | what |", "| --- | --- |"]
    lines += [f"| `{p}` | {w} |" for p, w in LAYOUT]
    lines += ["", "## Topology", ""] + to_markdown(topology_table(topo))
    by_carveout = ((topo.get("elements") or {}).get("l1d") or {}).get("size_bytes") or {}
    if by_carveout.get("by_carveout"):
        lines += ["", "## L1 size by carveout and shared buffer (`l1_size`)", ""]
        lines += ["| carveout | shared buffer (bytes) | L1 size (bytes) |", "| --- | --- | --- |"]
        for p in by_carveout["by_carveout"]:
            size = p["value"] if p.get("value") is not None else _value(p)
            lines.append(f"| {p['carveout_pct']}% | {p.get('shared_buffer_bytes')} | {size} |")
    lines += ["", "## Every quantity of the topology document", ""]
    for element, quantities in sorted((topo.get("elements") or {}).items()):
        lines.append(f"- `{element}`")
        for quantity, entry in sorted(quantities.items()):
            if isinstance(entry, dict):
                where = f" (`{entry['experiment']}`)" if entry.get("experiment") else ""
                lines.append(f"  - {quantity}: {_value(entry)}{where}")
    lines += _twin(folder, counts_line)
    lines += [
        "",
        "The fleet report of every reference GPU is `../fleet.md` (and `../fleet.pdf`), made "
        "by the same command.",
    ]
    return "\n".join(lines) + "\n"


def _listed(items: list[str]) -> str:
    return ", ".join(f"`{i}`" for i in items) if items else "(none recorded)"


def _timing(folder: Path) -> list[str]:
    path = folder / "benchmarks" / GPU_RUN
    if not path.is_file():
        return [f"The measured part's time is not recorded here (no `benchmarks/{GPU_RUN}`).", ""]
    doc = json.loads(path.read_text())
    lines = [
        f"The measured part (`snakemake measured --cores {doc['cores']}`: nvcc, every sweep, "
        f"analysis and figure, the topology document) took {doc['wall_s']} s of wall time; each "
        "sweep's own time, from the `sweep timing:` line of its log:",
        "",
        "| sweep | seconds |",
        "| --- | --- |",
    ]
    for name, s in sorted(doc["sweeps"].items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"| {name} | {s} |")
    return lines + [""]


def _twin(folder: Path, counts_line) -> list[str]:
    path = folder / "twin" / "agreement.json"
    if not path.is_file():
        return []
    doc = json.loads(path.read_text())
    c = doc["counts"]
    compared = c["agree"] + c["differ"]
    share = f"{100 * c['agree'] / compared:.1f} %" if compared else "no quantity"
    lines = [
        "",
        "## Digital twin",
        "",
        f"The twin's run on the simulator against this GPU: {counts_line(doc)}; of the "
        f"quantities both determined, {share} agree (`twin/agreement.md`).",
    ]
    if doc["open_questions"]:
        lines += ["", "Where they differ:", ""] + [f"- {q}" for q in doc["open_questions"]]
    config = folder / "twin" / "accel-sim.config"
    if config.is_file():
        options = [
            ln
            for ln in config.read_text().splitlines()
            if ln.startswith("-gpgpu_cache:dl1")
            or ln.startswith("-gpgpu_l1_latency")
            or ln.startswith("-gpgpu_cache:dl2 ")
            or ln.startswith("-gpgpu_n_mem")
        ]
        if options:
            lines += ["", "Accel-Sim options (`twin/accel-sim.config`), among them:", "", "```"]
            lines += options + ["```"]
    return lines
