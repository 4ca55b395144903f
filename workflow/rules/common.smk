import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

sys.path.insert(0, str(Path(workflow.basedir) / "workflow"))

from gpudissect.config import parse as parse_run_config  # noqa: E402
from gpudissect.devices import detect_arch  # noqa: E402
from gpudissect.exceptions import GpuDissectError  # noqa: E402

try:
    RUN = parse_run_config(config)
except GpuDissectError as exc:
    raise WorkflowError(f"gpudissect: {exc}") from None

DEVICES = {d.name: d for d in RUN.devices}
EXPERIMENTS = ["l1_size"]
KERNELS = {"l1_size": "pchase"}
ENV = "../../envs/gpudissect.yaml"
CUDA_ENV = "../../envs/gpudissect-cuda.yaml"


def device_arch(device):
    if device.arch:
        return device.arch
    try:
        return detect_arch(device.index)
    except GpuDissectError as exc:
        raise WorkflowError(
            f"gpudissect: devices entry {device.name!r}: {exc}"
        ) from None


ARCHS = {name: device_arch(d) for name, d in DEVICES.items() if d.backend == "cuda"}


def enabled(device, experiment):
    return getattr(DEVICES[device], experiment).enabled


def sweep_inputs(wildcards):
    d = DEVICES[wildcards.device]
    if d.backend == "sim":
        return {"profile": str(d.profile)}
    kernel = KERNELS[wildcards.experiment]
    return {"cubin": f"results/build/{ARCHS[d.name]}/{kernel}.cubin"}


def gpu_count(wildcards):
    return 1 if DEVICES[wildcards.device].backend == "cuda" else 0


def device_figures(device):
    return [
        f"results/figures/{device}/l1_size_sweep.png",
        f"results/figures/{device}/l1_size_sweep.pdf",
        f"results/figures/{device}/l1_size_latency_map.png",
    ]


def all_targets():
    targets = ["results/report/report.md"]
    for name in DEVICES:
        if enabled(name, "l1_size"):
            targets.append(f"results/analysis/{name}/l1_size.json")
            targets += device_figures(name)
    return targets
