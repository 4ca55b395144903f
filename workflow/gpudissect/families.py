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


def _bank_conflicts() -> Family:
    from .analysis import bank_model
    from .backends import banks_cuda, banks_sim  # noqa: F401 - registers the work handlers
    from .experiments import bank_conflicts
    from .plotting import banks
    from .report import sections_banks

    return Family(
        name="bank_conflicts",
        schema=bank_conflicts.SCHEMA,
        kernels=bank_conflicts.KERNELS,
        parse_params=bank_conflicts.parse_params,
        run=bank_conflicts.run,
        analyse=bank_model.analyse,
        plot=banks.plot_bank_conflicts,
        figures=("bank_conflicts_stride", "bank_conflicts_degree"),
        report_section=sections_banks.bank_conflicts_section,
    )


def _bank_result_input(device: Any) -> dict[str, str]:
    """The shared-throughput analysis reads the bank structure and latency, when measured."""
    if not device.enabled("bank_conflicts"):
        return {}
    return {"bank_conflicts": f"results/analysis/{device.name}/bank_conflicts.json"}


def _shared_throughput() -> Family:
    from .analysis import throughput
    from .backends import throughput_cuda, throughput_sim  # noqa: F401 - registers handlers
    from .experiments import shared_throughput
    from .plotting import throughput as plots
    from .report import sections_throughput

    return Family(
        name="shared_throughput",
        schema=shared_throughput.SCHEMA,
        kernels=shared_throughput.KERNELS,
        parse_params=shared_throughput.parse_params,
        run=shared_throughput.run,
        analyse=throughput.analyse_shared,
        plot=plots.plot_shared_throughput,
        figures=("shared_throughput_warps", "shared_throughput_ilp"),
        report_section=sections_throughput.shared_throughput_section,
        analysis_inputs=_bank_result_input,
    )


def _global_throughput() -> Family:
    from .analysis import throughput
    from .backends import throughput_cuda, throughput_sim  # noqa: F401 - registers handlers
    from .experiments import global_throughput
    from .plotting import throughput as plots
    from .report import sections_throughput

    return Family(
        name="global_throughput",
        schema=global_throughput.SCHEMA,
        kernels=global_throughput.KERNELS,
        parse_params=global_throughput.parse_params,
        run=global_throughput.run,
        analyse=throughput.analyse_global,
        plot=plots.plot_global_throughput,
        figures=("global_throughput_ctas",),
        report_section=sections_throughput.global_throughput_section,
    )


def _l2_flush_result_input(device: Any) -> dict[str, str]:
    """The requests analysis checks its footprint against the measured L2, when measured."""
    if not device.enabled("l2_flush"):
        return {}
    return {"l2_flush": f"results/analysis/{device.name}/l2_flush.json"}


def _requests() -> Family:
    from .analysis import requests as analysis
    from .backends import requests_cuda, requests_sim  # noqa: F401 - registers handlers
    from .experiments import requests
    from .plotting import requests as plots
    from .report import sections_requests

    return Family(
        name="requests",
        schema=requests.SCHEMA,
        kernels=requests.KERNELS,
        parse_params=requests.parse_params,
        run=requests.run,
        analyse=analysis.analyse,
        plot=plots.plot_requests,
        figures=plots.REQUEST_FIGURES,
        report_section=sections_requests.requests_section,
        analysis_inputs=_l2_flush_result_input,
    )


def _l2_flush() -> Family:
    from .analysis import l2_flush as analysis
    from .backends import requests_cuda, requests_sim  # noqa: F401 - registers handlers
    from .experiments import l2_flush
    from .plotting import requests as plots
    from .report import sections_requests

    return Family(
        name="l2_flush",
        schema=l2_flush.SCHEMA,
        kernels=l2_flush.KERNELS,
        parse_params=l2_flush.parse_params,
        run=l2_flush.run,
        analyse=analysis.analyse,
        plot=plots.plot_l2_flush,
        figures=plots.L2_FIGURES,
        report_section=sections_requests.l2_flush_section,
    )


def _tlbs() -> Family:
    from .analysis import tlb
    from .experiments import tlbs
    from .plotting import tlb as tlb_plots
    from .report import sections_tlb

    return Family(
        name="tlbs",
        schema=tlbs.SCHEMA,
        kernels=tlbs.KERNELS,
        parse_params=tlbs.parse_params,
        run=tlbs.run,
        analyse=tlb.analyse,
        plot=tlb_plots.plot_tlbs,
        figures=("tlbs_set_misses", "tlbs_reach"),
        report_section=sections_tlb.tlbs_section,
    )


def _tlbs_result_input(device: Any) -> dict[str, str]:
    """The latency-pattern chain and its classification use this device's measured TLBs."""
    return {"tlbs": f"results/analysis/{device.name}/tlbs.json"}


def _latency_patterns() -> Family:
    from .analysis import latency_patterns as patterns
    from .experiments import latency_patterns
    from .plotting import tlb as tlb_plots
    from .report import sections_tlb

    return Family(
        name="latency_patterns",
        schema=latency_patterns.SCHEMA,
        kernels=latency_patterns.KERNELS,
        parse_params=latency_patterns.parse_params,
        run=latency_patterns.run,
        analyse=patterns.analyse,
        plot=tlb_plots.plot_patterns,
        figures=("latency_patterns",),
        report_section=sections_tlb.latency_patterns_section,
        sweep_inputs=_tlbs_result_input,
        analysis_inputs=_tlbs_result_input,
    )


def _cache_stage1() -> Family:
    from .analysis import cache_levels
    from .experiments import cache_stage1
    from .plotting import caches as plots
    from .report import sections_caches

    return Family(
        name="cache_stage1",
        schema=cache_stage1.SCHEMA,
        kernels=cache_stage1.KERNELS,
        parse_params=cache_stage1.parse_params,
        run=cache_stage1.run,
        analyse=cache_levels.analyse,
        plot=plots.plot_stage1,
        figures=plots.STAGE1_FIGURES,
        report_section=sections_caches.stage1_section,
    )


def _caches() -> Family:
    from .analysis import caches as analysis
    from .experiments import caches
    from .plotting import caches as plots
    from .report import sections_caches

    return Family(
        name="caches",
        schema=caches.SCHEMA,
        kernels=caches.KERNELS,
        parse_params=caches.parse_params,
        run=caches.run,
        analyse=analysis.analyse,
        plot=plots.plot_caches,
        figures=plots.CACHES_FIGURES,
        report_section=sections_caches.caches_section,
        sweep_inputs=caches.stage1_path,
        analysis_inputs=caches.stage1_path,
    )


# name -> loader (imports lazily, so the config can be checked without plotting libraries)
FAMILIES: dict[str, Callable[[], Family]] = {
    "l1_size": _l1_size,
    "cache_stage1": _cache_stage1,
    "caches": _caches,
    "pchase_classic": _pchase_classic,
    "l2": _l2,
    "bank_conflicts": _bank_conflicts,
    "shared_throughput": _shared_throughput,
    "global_throughput": _global_throughput,
    "l2_flush": _l2_flush,
    "requests": _requests,
    "tlbs": _tlbs,
    "latency_patterns": _latency_patterns,
}


def family(name: str) -> Family:
    from .exceptions import ConfigError

    if name not in FAMILIES:
        raise ConfigError(f"experiment {name!r} is unknown; allowed: {sorted(FAMILIES)}")
    return FAMILIES[name]()
