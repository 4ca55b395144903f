"""Snakemake script of rule run_sweep: one experiment on one device, the sweep inside the job
(gpudissect.sweep_job). A simulated device's sweep goes to the run's fork server when there is
one (gpudissect.forkserver); a CUDA device's runs here."""

import threading
from pathlib import Path

from gpudissect.backends.safety import keep_multicast_off
from gpudissect.forkserver import forward

# NVLink multicast stays off in every sweep process, before the driver starts below
keep_multicast_off()

sm = snakemake  # noqa: F821 - provided by Snakemake
cubins = [v for k, v in sm.input.items() if k.startswith("cubin_")]
job = {
    "config": sm.config,
    "device": sm.params.device,
    "experiment": sm.params.experiment,
    "out": sm.output.trace,
    "log": sm.log[0],
    "inputs": {k: v for k, v in sm.input.items() if k != "profile" and not k.startswith("cubin_")},
    "cubin_dir": str(Path(cubins[0]).parent) if cubins else None,
    "repeat": int(getattr(sm.params, "repeat", 1)),
}
if not cubins:
    forward("sweep", job)  # returns only where no server takes it


def _start_cuda_driver() -> None:
    """The CUDA driver's and NVML's start, for the backend this job opens below. Both run
    without the GIL (pycuda releases it around cuInit, ctypes around every NVML call), so they
    go on beside this job's imports instead of after them. A failure here is the backend's to
    report: it starts both again itself (a second start returns at once)."""
    try:
        import pycuda.driver as drv

        drv.init()
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: S110 - see the docstring
        pass


# a CUDA device's sweep has kernels to load; a simulated one has none and starts no driver
driver = threading.Thread(target=_start_cuda_driver, daemon=True) if cubins else None
if driver is not None:
    driver.start()

from gpudissect.sweep_job import run_job  # noqa: E402 - after the driver's start began

run_job(**job, before_run=None if driver is None else driver.join)
