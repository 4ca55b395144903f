"""Snakemake script of rule run_sweep: one experiment on one device, the sweep inside the job."""

import logging
import threading
from pathlib import Path

from gpudissect.backends.safety import keep_multicast_off

# NVLink multicast stays off in every sweep process, before the driver starts below
keep_multicast_off()

sm = snakemake  # noqa: F821 - provided by Snakemake
cubins = [v for k, v in sm.input.items() if k.startswith("cubin_")]


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

from gpudissect.config import parse  # noqa: E402 - after the driver's start began
from gpudissect.sweep import run_experiment  # noqa: E402

logging.basicConfig(
    filename=sm.log[0],
    level=logging.INFO,
    format="%(asctime)s %(levelname)s %(name)s: %(message)s",
)
# the workflow validated the whole config before any job started: this job types its own part
device = parse(sm.config, sweep=(sm.params.device, sm.params.experiment)).device(sm.params.device)
extra = {k: v for k, v in sm.input.items() if k != "profile" and not k.startswith("cubin_")}
if driver is not None:
    driver.join()
run_experiment(
    device,
    sm.params.experiment,
    out=sm.output.trace,
    cubin_dir=Path(cubins[0]).parent if cubins else None,
    inputs=extra,
    repeat=int(getattr(sm.params, "repeat", 1)),
)
