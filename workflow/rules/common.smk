import atexit
import os
import re
import shutil
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

sys.path.insert(0, str(Path(workflow.basedir) / "workflow"))

from gpudissect import forkserver  # noqa: E402
from gpudissect.config import parse as parse_run_config  # noqa: E402
from gpudissect.backends.safety import keep_multicast_off  # noqa: E402
from gpudissect.devices import cuda_backend_missing, detect_arch  # noqa: E402
from gpudissect.exceptions import GpuDissectError  # noqa: E402
from gpudissect.families import FAMILIES  # noqa: E402
from gpudissect.provenance import config_hash, workflow_commit  # noqa: E402
from gpudissect.repeat_paths import repeat_path  # noqa: E402

# The jobs record the commit of this workflow's checkout (or, in an unpacked artifact bundle, the
# one its COMMIT file names) when their package cannot tell its own: an installed, not editable,
# package, or a tree with no git history.
os.environ.setdefault("GPUDISSECT_GIT_COMMIT", workflow_commit(workflow.basedir))
# NVLink multicast stays off in every job of the run (gpudissect/backends/safety.py)
keep_multicast_off()
from gpudissect.report.studies import STUDIES  # noqa: E402

try:
    RUN = parse_run_config(config)
except GpuDissectError as exc:
    # the config Snakemake merged from these files (the default, then each --configfile)
    _files = (
        ", ".join(map(str, getattr(workflow, "configfiles", None) or [])) or "(none)"
    )
    raise WorkflowError(f"gpudissect: config files {_files}: {exc}") from None

# `--cores 0` leaves the scheduler waiting for a core that never comes
_cores = workflow.global_resources.get("_cores")
if workflow.local_exec and getattr(_cores, "value", _cores) == 0:
    raise WorkflowError(
        "gpudissect: --cores 0: no job could start; allowed: --cores N with N >= 1, or --cores all"
    )

DEVICES = {d.name: d for d in RUN.devices}
# every experiment of every device runs REPEATS times (config key `repeats`); repeat k > 1
# writes <path>.r<k> beside the usual paths (gpudissect.repeat_paths)
REPEATS = RUN.repeats
# cuda device -> the sim device that runs its twin (a device entry with `twin: true`)
TWINS = {d.twin_of: d.name for d in RUN.devices if d.twin_of}
TWIN_PATTERN = "|".join(re.escape(g) for g in TWINS) or "(?!)"
FAMILY = dict(FAMILIES)
# experiments whose analysis also writes the tidy table its figures draw (beside the result)
TABLED = "|".join(name for name, fam in FAMILY.items() if fam.table is not None)
ENV = "../../envs/gpudissect.yaml"
CUDA_ENV = "../../envs/gpudissect-cuda.yaml"


def device_arch(device):
    if device.arch:
        return device.arch
    try:
        return detect_arch(device.index)
    except GpuDissectError as exc:
        raise WorkflowError(
            f"gpudissect: devices entry {device.name!r}: {exc}; where the run starts on a host "
            "without the GPU (a cluster's login node), name the arch for every cuda device "
            "with --config cuda_arch=sm_XX"
        ) from None


# Sweeps on one GPU must not overlap (they disturb each other's timings): a sweep measures only
# while it holds the GPU's lock (gpudissect/backends/gpu_lock.py). On a local run every sweep on
# a CUDA device also holds one of two `gpu` resources, unless the command line or a profile sets
# how many there are (`--resources gpu=N`): while one sweep measures, the next one starts its
# interpreter, imports and driver (about a second) and waits for the lock, instead of starting
# only once the first has ended.
if RUN.cuda_devices and workflow.local_exec and "gpu" not in workflow.global_resources:
    workflow.global_resources["gpu"] = 2


def cuda_traces_missing():
    """Whether a CUDA device of the run lacks a trace (a run that resumes on another host,
    its GPU's traces all made, needs no GPU backend here)."""
    return any(
        not Path("results", "traces", d.name, f"{exp}.parquet").is_file()
        for d in RUN.cuda_devices
        for exp in experiments_of(d.name)
    )


# The run's fork server (gpudissect/forkserver.py): on a local run, a process that imports the
# package once and forks a warm copy of itself for each job; stopped where the run ends.
FORK_SERVER = []


def stop_fork_server():
    while FORK_SERVER:
        forkserver.stop(FORK_SERVER.pop())


onstart:
    # A local run on a CUDA device needs pycuda here: found out before any job (nvcc among them)
    # starts. Only now does Snakemake know whether the jobs run here or on a cluster's nodes.
    if RUN.cuda_devices and workflow.local_exec and cuda_traces_missing():
        if (reason := cuda_backend_missing()) is not None:
            raise WorkflowError(
                f"gpudissect: devices {[d.name for d in RUN.cuda_devices]} use backend cuda: "
                f"{reason}"
            )
    if workflow.local_exec and not FORK_SERVER:
        server = forkserver.start(Path(".snakemake", "gpudissect"))
        if server is not None:
            FORK_SERVER.append(server)
            atexit.register(stop_fork_server)


onerror:
    stop_fork_server()


# an experiment is a family's name (so `<experiment>.r<k>.json` and `repeats.json` never read
# as an experiment); a repeat's number is 2 or more (repeat 1 writes the usual paths)
wildcard_constraints:
    experiment="|".join(re.escape(name) for name in FAMILY),
    repeat=r"[2-9]|[1-9][0-9]+",


ARCHS = {name: device_arch(d) for name, d in DEVICES.items() if d.backend == "cuda"}


def experiments_of(device):
    """The enabled experiments of a device, in registry order."""
    return [name for name in FAMILY if DEVICES[device].enabled(name)]


# The devices the report and the topology documents cover: those with an experiment to run (a
# node config measures the node from its first GPU and runs nothing on the others of their
# own; config/node.yaml). In every other config each device has some.
REPORTED = [name for name in DEVICES if experiments_of(name)]


def sweep_inputs(wildcards):
    d = DEVICES[wildcards.device]
    fam = FAMILY[wildcards.experiment]
    inputs = dict(fam.sweep_inputs(d))
    if d.backend == "sim":
        inputs["profile"] = str(d.profile)
    else:
        for kernel in fam.kernels:
            inputs[f"cubin_{kernel}"] = f"results/build/{ARCHS[d.name]}/{kernel}.cubin"
    return inputs


def analysis_inputs(wildcards):
    d = DEVICES[wildcards.device]
    return {
        "trace": f"results/traces/{d.name}/{wildcards.experiment}.parquet",
        **FAMILY[wildcards.experiment].analysis_inputs(d),
    }


def _of_repeat(inputs, repeat):
    """A repeat's inputs: its own trace, and another family's result document of the same
    repeat (kernels and profiles are the same for every repeat)."""
    return {
        k: (
            repeat_path(v, repeat)
            if v.startswith(("results/analysis/", "results/traces/"))
            else v
        )
        for k, v in inputs.items()
    }


def repeat_sweep_inputs(wildcards):
    return _of_repeat(sweep_inputs(wildcards), int(wildcards.repeat))


def repeat_analysis_inputs(wildcards):
    return _of_repeat(analysis_inputs(wildcards), int(wildcards.repeat))


def repeat_analyses(device):
    """Every repeat's result documents of a device (rule compare_repeats)."""
    return [
        repeat_path(f"results/analysis/{device}/{e}.json", k)
        for k in range(1, REPEATS + 1)
        for e in experiments_of(device)
    ]


def extra_input_args(wildcards, input):
    """`--input name=path` for every input that is not the trace itself."""
    return " ".join(f"--input {k}={v}" for k, v in input.items() if k != "trace")


def node_gpus(device):
    """The GPUs a device's node sweep measures (experiments.node; config.node_members)."""
    return DEVICES[device].experiments.get("node", {}).get("gpus", [])


def gpu_count(wildcards):
    if DEVICES[wildcards.device].backend != "cuda":
        return 0
    if getattr(wildcards, "experiment", None) == "node":
        # every GPU of the node, on one host
        return max(1, len(node_gpus(wildcards.device)))
    return 1


# A node sweep asks the cluster for all the node's GPUs on one node (`gpu` above, `nodes` here);
# set only where a cuda device runs one, so that no other run's submissions change.
NODE_PLACEMENT = (
    {"nodes": 1}
    if any(d.backend == "cuda" and d.enabled("node") for d in RUN.devices)
    else {}
)


def _device_value(key):
    return lambda wildcards: getattr(DEVICES[wildcards.device], key) or ""


# Slurm placement of the sweeps (profiles/slurm): a device entry's `partition` and `gpu_model`.
# Set only when some entry names one, so that otherwise a partition set in the profile's
# default-resources still reaches the sweeps (a rule's resource overrides the profile's default).
SWEEP_PLACEMENT = {
    resource: _device_value(key)
    for resource, key in (("slurm_partition", "partition"), ("gpu_model", "gpu_model"))
    if any(getattr(d, key) for d in RUN.devices)
}


# Cluster runs: a device's sweeps can go to the cluster as one job instead of one job per sweep
# (each job pays a queue wait, a Snakemake start-up and the lag until the status check sees it
# finish). Every sweep of a device is in group `sweeps_<device>`, and so are the analyses that a
# sweep of the run reads (FED_ANALYSES, run by analyze_sweep_input in analyze.smk: stage 1 of the
# caches for stage 2, the TLBs for the latency patterns). In the job they run between the sweep
# that writes their trace and the sweeps that read them, so the device needs no second job for
# the sweeps that waited on them. A profile merges a device's sweeps into one job with
# `group-components: {sweeps: N}` (profiles/slurm does); without that, each connected part of the
# group (a sweep alone; or a sweep, its analysis and the sweeps that read it) is a job of its own.
# A local run ignores groups: every sweep and analysis is a job of its own there.
def sweep_read_analyses(device):
    """The device's experiments whose result document a sweep of the device reads."""
    d = DEVICES[device]
    return {
        Path(path).stem
        for e in experiments_of(device)
        for path in FAMILY[e].sweep_inputs(d).values()
        if Path(path).parent == Path(f"results/analysis/{device}")
    }


FED_ANALYSES = sorted(set().union(*(sweep_read_analyses(d) for d in DEVICES)))
# analyze_sweep_input writes the result document alone: an analysis that also writes a table
# needs a variant with that output before a sweep may read it (a development error)
if _tabled_fed := set(FED_ANALYSES) & set(TABLED.split("|")):
    raise WorkflowError(
        f"gpudissect: sweeps read the analyses {sorted(_tabled_fed)}, which write a table: give "
        "analyze_sweep_input a variant with the table output (workflow/rules/analyze.smk)"
    )
FED_PATTERN = "|".join(re.escape(e) for e in FED_ANALYSES) or "(?!)"


# A device's sweeps run one at a time on its GPU; the ones other jobs wait on go first: a sweep's
# priority is twice the number of the device's other experiments whose sweep or analysis reads
# its analysis (caches and pchase_classic read cache_stage1's, the requests analysis l2_flush's,
# latency_patterns tlbs', shared_throughput bank_conflicts'), plus one where its own analysis is
# a heavy one (families.Family.heavy_analysis: requests, latency_patterns, l2_slices). Their
# analyses then overlap the later sweeps instead of holding the figures at the end of the run.
def sweep_priority(wildcards):
    d = DEVICES[wildcards.device]
    mine = f"results/analysis/{wildcards.device}/{wildcards.experiment}.json"
    readers = sum(
        mine
        in {*FAMILY[e].sweep_inputs(d).values(), *FAMILY[e].analysis_inputs(d).values()}
        for e in experiments_of(wildcards.device)
        if e != wildcards.experiment
    )
    return 2 * readers + int(FAMILY[wildcards.experiment].heavy_analysis)


# Within a device's group job its jobs run one after another: sweeps on a GPU would disturb each
# other's timings, and one after another they ask the cluster for one sweep's CPUs, memory and
# GPU (Snakemake sums the resources of the jobs of a group that may run at once). So on a cluster
# run every device has a resource of its own, `sweep_slot_<n>`, of which there is one, held by
# its sweeps and by the analyses in its job; it is declared when Snakemake places the jobs in
# groups, the first moment it knows where they run.
SWEEP_SLOTS = {name: f"sweep_slot_{i}" for i, name in enumerate(DEVICES)}


def sweep_group(wildcards):
    group = "sweeps_{}".format(re.sub(r"\W", "_", wildcards.device))
    # `group-components` counts per group name as a profile writes it (`sweeps`), as Snakemake
    # does for a group name with wildcards
    workflow.parent_groupids[group] = "sweeps"
    # Inside the device's Slurm job, Snakemake (started with --local-groupid, without the
    # profile's group-components) would split the job again into its connected components and
    # start each as a job step of its own, an srun and a Snakemake start-up (2-3 s) per sweep
    # that reads no analysis: the job's sweeps and analyses run as one job step instead.
    settings = workflow.group_settings
    if settings.local_groupid != "local" and "sweeps" not in settings.group_components:
        settings.group_components = {**settings.group_components, "sweeps": sys.maxsize}
    if not workflow.local_exec:
        for slot in SWEEP_SLOTS.values():
            if slot not in workflow.global_resources:
                workflow.register_resource(slot, 1)
    return group


def sweep_slot_resources():
    return {
        slot: (lambda wc, s=slot: int(SWEEP_SLOTS[wc.device] == s))
        for slot in SWEEP_SLOTS.values()
    }


def plot_rule_name(device):
    """The name of a device's figure job, `plot_` and the device name with `_` for every
    character that may not appear in a name of a Snakemake job."""
    return "plot_{}".format(re.sub(r"\W", "_", device))


def figure_tables(device):
    """The tidy tables a device's figure job reads (those its analyses write)."""
    return [
        f"results/analysis/{device}/{e}.parquet"
        for e in experiments_of(device)
        if FAMILY[e].table is not None
    ]


def figure_files(device, experiment, ext="png"):
    return [
        f"results/figures/{device}/{stem}.{ext}" for stem in FAMILY[experiment].figures
    ]


def device_targets(device):
    targets = [f"results/topology/{device}.json"]
    if REPEATS > 1:
        targets.append(f"results/analysis/{device}/repeats.json")
    for exp in experiments_of(device):
        targets.append(f"results/analysis/{device}/{exp}.json")
        targets += figure_files(device, exp) + figure_files(device, exp, "pdf")
    return targets


def all_targets():
    # the PDF needs latexmk and TeX (README: Requirements); without them the run ends at the
    # Markdown and LaTeX and says so
    targets = ["results/report/report.md", "results/report/report.tex"]
    if shutil.which("latexmk"):
        targets.append("results/report/report.pdf")
    else:
        print("gpudissect: latexmk not found: report.pdf is skipped", file=sys.stderr)
    for name in REPORTED:
        targets += device_targets(name)
    targets += twin_agreements()
    return targets


def twin_agreements():
    """The agreement of every GPU that has a twin in this run with its twin (rule
    compare_twin_topology)."""
    return [f"results/twins/{g}.agreement.json" for g in TWINS]


# ---- the report and the studies (workflow/rules/report.smk) ----

# Studies whose twins this config runs: each gets a part in the report and a target of its own.
RUN_STUDIES = {
    key: [d for d in s.devices if d in DEVICES] for key, s in STUDIES.items()
}
RUN_STUDIES = {key: devs for key, devs in RUN_STUDIES.items() if devs}


def report_tables(study=None):
    """The named tables a report writes (its CSV exports, report items of the HTML report)."""
    keys = [study] if study else list(RUN_STUDIES)
    names = [t.name for k in keys for t in STUDIES[k].tables]
    if study is None and len(REPORTED) > 1:
        names.append("fleet")
    if study is None and any(d.enabled("node") for d in RUN.devices):
        # the pair table of the node section (report/sections_node.py)
        names.append("node")
    return names + ["provenance", "regenerate"]


def topology_files(devices):
    """The topology documents the report summarises (rule build_topology)."""
    return [f"results/topology/{d}.json" for d in devices]


def study_figure_files(study, device):
    """A study draws its figures in a folder of its own (results/figures/<device>/<study>/):
    the device's figure job needs every experiment, a study only its own."""
    return [
        f"results/figures/{device}/{study}/{stem}.{ext}"
        for exp in study_experiments(study, device)
        for stem in FAMILY[exp].figures
        for ext in ("png", "pdf")
    ]


def study_experiments(study, device):
    return [e for e in experiments_of(device) if e in STUDIES[study].experiments]


def study_targets(wildcards):
    study = STUDIES[wildcards.study]
    devices = RUN_STUDIES.get(wildcards.study)
    if not devices:
        raise WorkflowError(
            f"gpudissect: study {wildcards.study!r} needs the twins {list(study.devices)}; "
            f"none is among the configured devices {sorted(DEVICES)}"
        )
    targets = []
    for d in devices:
        targets += [
            f"results/analysis/{d}/{e}.json"
            for e in study_experiments(wildcards.study, d)
        ]
        targets += study_figure_files(wildcards.study, d)
        targets.append(f"results/topology/{wildcards.study}/{d}.json")
    return targets


def report_args(devices, tables_dir, tables, topology_dir="results/topology"):
    topo = f"--topology {topology_dir}" if devices else ""
    if TWINS and topology_dir == "results/topology":
        topo += " --twins results/twins"
    return (
        f"--device {' '.join(devices)} {topo} --benchmarks results/benchmarks"
        f" --tables-dir {tables_dir} --table {' '.join(tables)}"
    )
