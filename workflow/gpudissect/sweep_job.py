"""One sweep job of the workflow (rule run_sweep): the device's part of the run config typed,
then the experiment run into its trace. The rule's script (workflow/scripts/run_sweep.py) calls
it in its own interpreter, or hands it to the run's fork server (gpudissect.forkserver)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any


def run_job(
    *,
    config: dict[str, Any],
    device: str,
    experiment: str,
    out: str,
    log: str,
    inputs: dict[str, str],
    cubin_dir: str | None = None,
    repeat: int = 1,
    before_run: Any = None,
) -> None:
    """Run `experiment` on `device` of the run config `config` (Snakemake's, validated whole
    before any job started) into the trace `out`, logging to `log`. `before_run`, when given,
    is called once the device is typed, before the sweep starts (the script waits there for
    the CUDA driver it started beside the imports)."""
    from .config import parse
    from .sweep import run_experiment

    logging.basicConfig(
        filename=log,
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # the workflow validated the whole config before any job started: this job types its own
    # part
    typed = parse(config, sweep=(device, experiment)).device(device)
    if before_run is not None:
        before_run()
    run_experiment(
        typed,
        experiment,
        out=out,
        cubin_dir=None if cubin_dir is None else Path(cubin_dir),
        inputs=inputs,
        repeat=repeat,
    )
