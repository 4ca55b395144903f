"""Snakemake script of rule run_sweep: one experiment on one device, the sweep inside the job."""

import logging
from pathlib import Path

from gpudissect.config import parse
from gpudissect.sweep import run_experiment

sm = snakemake  # noqa: F821 - provided by Snakemake
logging.basicConfig(
    filename=sm.log[0],
    level=logging.INFO,
    format="%(asctime)s %(levelname)s %(name)s: %(message)s",
)
# the workflow validated the whole config before any job started: this job types its own part
device = parse(sm.config, sweep=(sm.params.device, sm.params.experiment)).device(sm.params.device)
cubins = [v for k, v in sm.input.items() if k.startswith("cubin_")]
extra = {k: v for k, v in sm.input.items() if k != "profile" and not k.startswith("cubin_")}
run_experiment(
    device,
    sm.params.experiment,
    out=sm.output.trace,
    cubin_dir=Path(cubins[0]).parent if cubins else None,
    inputs=extra,
    repeat=int(getattr(sm.params, "repeat", 1)),
)
