"""The registry of experiment families: one entry per experiment, tying together what the
pipeline needs of it. Adding a family means writing its modules and adding one line to FAMILIES.

A family has
- `name`: the config key under `experiments:` and the stem of its trace and result files;
- `schema`: the Parquet schema of its trace;
- `kernels`: the `kernels/<name>.cu` files a GPU run needs;
- `parse_params(section, key)`: typed parameters, with checks the schema cannot express;
- `run(backend, params, *, device, inputs, progress)`: the sweep, one DataFrame;
- `analyse(data, *, provenance, inputs)`: the result document (DESIGN.md result contract);
- `plot(data, doc)`: figures by file stem, `{stem: matplotlib Figure}`;
- `figures`: the stems `plot` returns (Snakemake needs them before the run);
- `report_section(doc, figure_paths)`: the Markdown lines of its report section;
- `sweep_inputs(device)` / `analysis_inputs(device)`: extra files (often another family's result)
  the sweep or the analysis reads, by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa


def _no_inputs(device: Any) -> dict[str, str]:
    return {}


@dataclass(frozen=True)
class Family:
    name: str
    schema: pa.Schema
    kernels: tuple[str, ...]
    parse_params: Callable[[dict, str], Any]
    run: Callable[..., Any]
    analyse: Callable[..., dict]
    plot: Callable[..., dict]
    figures: tuple[str, ...]
    report_section: Callable[[dict, list[str]], list[str]]
    sweep_inputs: Callable[[Any], dict[str, str]] = field(default=_no_inputs)
    analysis_inputs: Callable[[Any], dict[str, str]] = field(default=_no_inputs)


def _l1_size() -> Family:
    from .analysis import cache_size
    from .experiments import l1_size
    from .plotting import pchase
    from .report import sections

    return Family(
        name="l1_size",
        schema=l1_size.SCHEMA,
        kernels=l1_size.KERNELS,
        parse_params=l1_size.parse_params,
        run=l1_size.run,
        analyse=cache_size.analyse,
        plot=pchase.plot_l1_size,
        figures=("l1_size_sweep", "l1_size_latency_map"),
        report_section=sections.l1_size_section,
    )


def _pchase_classic() -> Family:
    from .analysis import classic
    from .experiments import pchase_classic
    from .plotting.classic import plot_classic
    from .report import sections

    return Family(
        name="pchase_classic",
        schema=pchase_classic.SCHEMA,
        kernels=pchase_classic.KERNELS,
        parse_params=pchase_classic.parse_params,
        run=pchase_classic.run,
        analyse=classic.analyse,
        plot=plot_classic,
        figures=("pchase_classic",),
        report_section=sections.pchase_classic_section,
    )


def _l2() -> Family:
    from .analysis import l2 as analysis
    from .experiments import l2
    from .plotting.l2 import plot_l2
    from .report import sections

    return Family(
        name="l2",
        schema=l2.SCHEMA,
        kernels=l2.KERNELS,
        parse_params=l2.parse_params,
        run=l2.run,
        analyse=analysis.analyse,
        plot=plot_l2,
        figures=("l2_footprint",),
        report_section=sections.l2_section,
    )


# name -> loader (imports lazily, so the config can be checked without plotting libraries)
FAMILIES: dict[str, Callable[[], Family]] = {
    "l1_size": _l1_size,
    "pchase_classic": _pchase_classic,
    "l2": _l2,
}


def family(name: str) -> Family:
    from .exceptions import ConfigError

    if name not in FAMILIES:
        raise ConfigError(f"experiment {name!r} is unknown; allowed: {sorted(FAMILIES)}")
    return FAMILIES[name]()
