"""Where a report's devices come from: the pipeline's results folders, or a fleet of reference
results (`results/reference/<gpu>/`, one run each, laid out as the pipeline's `results/`)."""

from __future__ import annotations

from pathlib import Path

from ..exceptions import GpuDissectError
from .build import DeviceData, load_device
from .studies import STUDIES, Study


def run_devices(
    names: list[str],
    *,
    analysis_dir: Path,
    figures_dir: Path,
    topology_dir: Path | None,
    benchmarks_dir: Path | None,
    study: str | None = None,
    twins_dir: Path | None = None,
) -> tuple[list[DeviceData], list[Study]]:
    """The devices of one run; with `study`, only that study's devices and experiments."""
    studies = list(STUDIES.values())
    experiments = None
    if study is not None:
        s = STUDIES[study]
        names = [n for n in names if n in s.devices]
        if not names:
            raise GpuDissectError(
                f"report --study {study}: none of its twins {list(s.devices)} was given "
                "with --device"
            )
        studies, experiments = [s], s.experiments
    devices = [
        load_device(
            n,
            analysis_dir=analysis_dir,
            # a study draws its figures in a folder of its own (workflow/rules/report.smk)
            figures_dir=figures_dir if study is None else figures_dir / n / study,
            figures_flat=study is not None,
            topology=topology_dir / f"{n}.json" if topology_dir else None,
            benchmarks_dir=benchmarks_dir,
            experiments=experiments,
            twin_agreement=twins_dir / f"{n}.agreement.json" if twins_dir else None,
        )
        for n in names
    ]
    return devices, studies


def reference_devices(root: Path) -> list[DeviceData]:
    """Every reference GPU under `root` (a folder per GPU, each holding one configured device's
    `analysis/<device>/`, `figures/<device>/` and optionally `topology/<device>.json` and the
    agreement with its twin, `twin/agreement.json`), named by its folder."""
    if not root.is_dir():
        raise GpuDissectError(f"report --reference {root}: no such folder")
    devices = []
    for gpu in sorted(p for p in root.iterdir() if (p / "analysis").is_dir()):
        runs = sorted(p for p in (gpu / "analysis").iterdir() if p.is_dir())
        if len(runs) != 1:
            raise GpuDissectError(
                f"report --reference: {gpu / 'analysis'} holds {len(runs)} devices "
                f"({[p.name for p in runs]}); a reference folder holds exactly one"
            )
        run = runs[0].name
        d = load_device(
            run,
            analysis_dir=gpu / "analysis",
            figures_dir=gpu / "figures",
            topology=gpu / "topology" / f"{run}.json",
            twin_agreement=gpu / "twin" / "agreement.json",
        )
        d.name, d.figure_dir = gpu.name, f"results/figures/{run}"
        devices.append(d)
    if not devices:
        raise GpuDissectError(
            f"report --reference {root}: no <gpu>/analysis/<device>/ folders in it"
        )
    return devices
