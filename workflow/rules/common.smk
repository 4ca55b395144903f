import re
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

sys.path.insert(0, str(Path(workflow.basedir) / "workflow"))

from gpudissect.config import parse as parse_run_config  # noqa: E402
from gpudissect.devices import detect_arch  # noqa: E402
from gpudissect.exceptions import GpuDissectError  # noqa: E402
from gpudissect.families import FAMILIES  # noqa: E402

try:
    RUN = parse_run_config(config)
except GpuDissectError as exc:
    raise WorkflowError(f"gpudissect: {exc}") from None

DEVICES = {d.name: d for d in RUN.devices}
FAMILY = dict(FAMILIES)
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


# Sweeps on one GPU must not overlap (they disturb each other's timings): on a local run every
# sweep on a CUDA device holds the one `gpu` resource, unless the command line or a profile
# sets how many there are (`--resources gpu=N`).
if RUN.cuda_devices and workflow.local_exec and "gpu" not in workflow.global_resources:
    workflow.global_resources["gpu"] = 1

ARCHS = {name: device_arch(d) for name, d in DEVICES.items() if d.backend == "cuda"}


def experiments_of(device):
    """The enabled experiments of a device, in registry order."""
    return [name for name in FAMILY if DEVICES[device].enabled(name)]


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


def extra_input_args(wildcards, input):
    """`--input name=path` for every input that is not the trace itself."""
    return " ".join(f"--input {k}={v}" for k, v in input.items() if k != "trace")


def gpu_count(wildcards):
    return 1 if DEVICES[wildcards.device].backend == "cuda" else 0


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


def plot_rule_name(device):
    """The name of a device's figure job, `plot_` and the device name with `_` for every
    character that may not appear in a name of a Snakemake job."""
    return "plot_{}".format(re.sub(r"\W", "_", device))


def figure_files(device, experiment, ext="png"):
    return [
        f"results/figures/{device}/{stem}.{ext}" for stem in FAMILY[experiment].figures
    ]


def device_targets(device):
    targets = []
    for exp in experiments_of(device):
        targets.append(f"results/analysis/{device}/{exp}.json")
        targets += figure_files(device, exp) + figure_files(device, exp, "pdf")
    return targets


def all_targets():
    targets = ["results/report/report.md"]
    for name in DEVICES:
        targets += device_targets(name)
    return targets
