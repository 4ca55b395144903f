"""The registry of experiment families: one entry per experiment, tying together what the
pipeline needs of it. Adding a family means writing its modules and adding one line to FAMILIES.

A family has
- `name`: the config key under `experiments:` and the stem of its trace and result files;
- `schema`: the Parquet schema of its trace;
- `kernels`: the `kernels/<name>.cu` files a GPU run needs;
- `parse_params(section, key)`: typed parameters, with checks the schema cannot express;
- `run(backend, params, *, device, inputs, progress)`: the sweep, one DataFrame;
- `analyse(data, *, provenance, inputs)`: the result document (DESIGN.md result contract);
- `table(data, doc)` (optional): the tidy table its figures draw, which the analysis computes and
  writes beside the result document (`analysis.common.result.table_path`);
- `plot(data, doc)`, or `plot(data, doc, table=...)` where the family has a table: figures by
  file stem, `{stem: matplotlib Figure}`;
- `figures`: the stems `plot` returns (Snakemake needs them before the run);
- `report_section(doc, figure_paths)`: the Markdown lines of its report section;
- `sweep_inputs(device)` / `analysis_inputs(device)`: extra files (often another family's result)
  the sweep or the analysis reads, by name.

Each job imports only what its stage needs: the functions are named by module and imported on
first call (`_Ref`), so a sweep never loads plotting libraries, an analysis never loads the
simulator, and a plot never loads the analysis (start-up is most of a small job's time).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cached_property
from typing import Any


class _Ref:
    """A function named by module (relative to this package) and attribute, imported when first
    called."""

    def __init__(self, module: str, attr: str):
        self.module, self.attr = module, attr
        self._fn: Callable[..., Any] | None = None

    def resolve(self) -> Any:
        if self._fn is None:
            self._fn = getattr(importlib.import_module(f"{__package__}.{self.module}"), self.attr)
        return self._fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<{self.module}.{self.attr}>"


class _Analysis(_Ref):
    """A family's analysis: `(data, *, provenance, inputs)` -> the result document. A trace with
    a NaN or infinite measurement is refused first (AnalysisError naming the column and row);
    an empty one is the analysis's to report undetermined (the device lacks the load path). A
    GPU sweep's document gains `sweep_clocks`: its clocks and clock event reasons before and
    after, flagged where they changed or were set (`analysis.timing.clocks`)."""

    def __init__(self, family: str, module: str, attr: str):
        super().__init__(module, attr)
        self.family = family

    def __call__(self, data: Any, *, provenance: dict[str, Any], **kwargs: Any) -> Any:
        from .traces import refuse_non_finite

        refuse_non_finite(data, where=f"{self.family} trace of {provenance.get('device')}")
        doc = self.resolve()(data, provenance=provenance, **kwargs)
        from .analysis.timing.clocks import sweep_clocks

        clocks = sweep_clocks(provenance, data)  # a GPU sweep's clocks and throttle flag
        if clocks is not None and isinstance(doc, dict):
            doc["sweep_clocks"] = clocks
        return doc


def _no_inputs(device: Any) -> dict[str, str]:
    return {}


class Family:
    """One experiment family; see the module docstring. Build with `_family`."""

    def __init__(
        self,
        *,
        name: str,
        experiment: str,
        analyse: str,
        plot: str,
        report_section: str,
        figures: tuple[str, ...],
        table: str | None = None,
        sweep_inputs: Callable[[Any], dict[str, str]] = _no_inputs,
        analysis_inputs: Callable[[Any], dict[str, str]] = _no_inputs,
        heavy_analysis: bool = False,
    ):
        self.name = name
        # an analysis of several seconds (4-10 s on an H100 host, against at most 3 s for the
        # others): its sweep goes before the light ones of its device, so that the analysis
        # overlaps later sweeps instead of holding the figures at the end of the run
        self.heavy_analysis = heavy_analysis
        self.figures = tuple(figures)
        self._experiment = f"experiments.{experiment}"
        self.parse_params = _Ref(self._experiment, "parse_params")
        self.run = _Ref(self._experiment, "run")
        self.analyse = _Analysis(name, *analyse.split(":"))
        self.table = None if table is None else _Ref(*table.split(":"))
        self.plot = _Ref(*plot.split(":"))
        self.report_section = _Ref(*report_section.split(":"))
        self.sweep_inputs = sweep_inputs
        self.analysis_inputs = analysis_inputs

    @cached_property
    def _module(self) -> Any:
        return importlib.import_module(f"{__package__}.{self._experiment}")

    @property
    def schema(self) -> Any:
        """The Parquet schema of the trace (a pyarrow.Schema)."""
        return self._module.SCHEMA

    @property
    def kernels(self) -> tuple[str, ...]:
        return tuple(self._module.KERNELS)

    def __repr__(self) -> str:
        return f"Family({self.name!r})"


def _bank_result_input(device: Any) -> dict[str, str]:
    """The shared-throughput analysis reads the bank structure and latency, when measured."""
    if not device.enabled("bank_conflicts"):
        return {}
    return {"bank_conflicts": f"results/analysis/{device.name}/bank_conflicts.json"}


def _l2_flush_result_input(device: Any) -> dict[str, str]:
    """The requests analysis checks its footprint against the measured L2, when measured."""
    if not device.enabled("l2_flush"):
        return {}
    return {"l2_flush": f"results/analysis/{device.name}/l2_flush.json"}


def _l2_footprint_input(device: Any) -> dict[str, str]:
    """The slice map splits the footprint sweep's plateaus by the partition function (what a
    partition holds), when that sweep runs."""
    if not device.enabled("l2"):
        return {}
    return {
        "l2_trace": f"results/traces/{device.name}/l2.parquet",
        "l2": f"results/analysis/{device.name}/l2.json",
    }


def _tlbs_result_input(device: Any) -> dict[str, str]:
    """The latency-pattern chain and its classification use this device's measured TLBs."""
    return {"tlbs": f"results/analysis/{device.name}/tlbs.json"}


def _l1_size_result_input(device: Any) -> dict[str, str]:
    """The L1-set analysis caps its predicted walk capacities at the L1 size measured at the
    same carveout, when measured."""
    if not device.enabled("l1_size"):
        return {}
    return {"l1_size": f"results/analysis/{device.name}/l1_size.json"}


def _caches_result_input(device: Any) -> dict[str, str]:
    """The constant-L1 sets sweep takes its line from stage 2 (`caches`), when measured."""
    if not device.enabled("caches"):
        return {}
    return {"caches": f"results/analysis/{device.name}/caches.json"}


def _stage1_result_input(device: Any) -> dict[str, str]:
    """Stage 2 (`caches`) sweeps and analyses the levels stage 1 found."""
    return {"cache_stage1": f"results/analysis/{device.name}/cache_stage1.json"}


def _stage1_sizes_input(device: Any) -> dict[str, str]:
    """The bandwidth sweep sizes its footprints from the cache sizes stage 1 and the L2
    footprint sweep measured, when they run (else from the driver's L2 size, without an L1 or
    a near-L2 footprint)."""
    out = _stage1_result_input(device) if device.enabled("cache_stage1") else {}
    if device.enabled("l2"):  # the L2 size and its near partition, from the footprint sweep
        out["l2"] = f"results/analysis/{device.name}/l2.json"
    return out


def _classic_stage1_input(device: Any) -> dict[str, str]:
    """The classic P-chase's automatic sizes lie around the size stage 1 measured, when it runs
    and the config leaves a size to `auto`."""
    section = device.experiments.get("pchase_classic", {})
    auto = "auto" in (
        section.get("saavedra", {}).get("array_bytes"),
        section.get("wong", {}).get("array_bytes"),
    )
    if not (auto and device.enabled("cache_stage1")):
        return {}
    return _stage1_result_input(device)


# Figure stems Snakemake needs before any job runs (the plot functions return exactly these).
_REQUEST_PATTERNS = ("unq", "merger2", "merger4", "merger8", "merger16", "merger32")

_FAMILIES = (
    Family(
        name="l1_size",
        experiment="l1_size",
        analyse="analysis.caches.cache_size:analyse",
        table="analysis.caches.cache_size:figure_table",
        plot="plotting.pchase:plot_l1_size",
        figures=("l1_size_sweep", "l1_size_latency_map"),
        report_section="report.sections:l1_size_section",
    ),
    Family(
        name="cache_stage1",
        experiment="cache_stage1",
        analyse="analysis.caches.cache_levels:analyse",
        plot="plotting.caches:plot_stage1",
        figures=("cache_stage1_sweeps",),
        report_section="report.sections_caches:stage1_section",
    ),
    Family(
        name="caches",
        experiment="caches",
        analyse="analysis.caches.caches:analyse",
        plot="plotting.caches:plot_caches",
        figures=("caches_sets", "caches_replacement"),
        report_section="report.sections_caches:caches_section",
        sweep_inputs=_stage1_result_input,
        analysis_inputs=_stage1_result_input,
    ),
    Family(
        name="cache_sharing",
        experiment="cache_sharing",
        analyse="analysis.caches.cache_sharing:analyse",
        plot="plotting.disturbance:plot_sharing",
        figures=("cache_sharing_matrix",),
        report_section="report.sections_sharing:sharing_section",
        sweep_inputs=_stage1_result_input,
        analysis_inputs=_stage1_result_input,
    ),
    Family(
        name="cache_instances",
        experiment="cache_instances",
        analyse="analysis.caches.cache_instances:analyse",
        plot="plotting.disturbance:plot_instances",
        figures=("cache_instances_warps",),
        report_section="report.sections_sharing:instances_section",
        sweep_inputs=_stage1_result_input,
        analysis_inputs=_stage1_result_input,
    ),
    Family(
        name="pchase_classic",
        experiment="pchase_classic",
        analyse="analysis.caches.classic:analyse",
        plot="plotting.classic:plot_classic",
        figures=("pchase_classic",),
        report_section="report.sections:pchase_classic_section",
        sweep_inputs=_classic_stage1_input,
    ),
    Family(
        name="l2",
        experiment="l2",
        analyse="analysis.l2.l2:analyse",
        plot="plotting.l2:plot_l2",
        figures=("l2_footprint",),
        report_section="report.sections:l2_section",
    ),
    Family(
        name="bank_conflicts",
        experiment="bank_conflicts",
        analyse="analysis.banks.bank_model:analyse",
        plot="plotting.banks:plot_bank_conflicts",
        figures=("bank_conflicts_stride", "bank_conflicts_degree"),
        report_section="report.sections_banks:bank_conflicts_section",
    ),
    Family(
        name="shared_throughput",
        experiment="shared_throughput",
        analyse="analysis.throughput.throughput:analyse_shared",
        plot="plotting.throughput:plot_shared_throughput",
        figures=("shared_throughput_warps", "shared_throughput_ilp"),
        report_section="report.sections_throughput:shared_throughput_section",
        analysis_inputs=_bank_result_input,
    ),
    Family(
        name="global_throughput",
        experiment="global_throughput",
        analyse="analysis.throughput.throughput:analyse_global",
        plot="plotting.throughput:plot_global_throughput",
        figures=("global_throughput_ctas",),
        report_section="report.sections_throughput:global_throughput_section",
    ),
    Family(
        name="bandwidth",
        experiment="bandwidth",
        analyse="analysis.throughput.bandwidth:analyse",
        table="analysis.throughput.bandwidth:figure_table",
        plot="plotting.bandwidth:plot_bandwidth",
        figures=("bandwidth_ctas", "bandwidth_l1_capacity"),
        report_section="report.sections_bandwidth:bandwidth_section",
        sweep_inputs=_stage1_sizes_input,
    ),
    Family(
        name="l2_flush",
        experiment="l2_flush",
        analyse="analysis.l2.l2_flush:analyse",
        table="analysis.l2.l2_flush:figure_table",
        plot="plotting.requests:plot_l2_flush",
        figures=("l2_flush",),
        report_section="report.sections_requests:l2_flush_section",
    ),
    Family(
        name="requests",
        experiment="requests",
        analyse="analysis.requests.requests:analyse",
        table="analysis.requests.requests:figure_table",
        plot="plotting.requests:plot_requests",
        figures=tuple(f"requests_{p}" for p in _REQUEST_PATTERNS),
        report_section="report.sections_requests:requests_section",
        analysis_inputs=_l2_flush_result_input,
        heavy_analysis=True,
    ),
    Family(
        name="tlbs",
        experiment="tlbs",
        analyse="analysis.tlb.tlb_document:analyse",
        plot="plotting.tlb:plot_tlbs",
        figures=("tlbs_set_misses", "tlbs_reach"),
        report_section="report.sections_tlb:tlbs_section",
    ),
    Family(
        name="tlb_mappings",
        experiment="tlb_mappings",
        analyse="analysis.tlb.tlb_mappings:analyse",
        plot="plotting.tlb_mappings:plot_tlb_mappings",
        figures=("tlb_mappings_reach",),
        report_section="report.sections_tlb_mappings:tlb_mappings_section",
    ),
    Family(
        name="latency_patterns",
        experiment="latency_patterns",
        analyse="analysis.tlb.latency_patterns:analyse",
        table="analysis.tlb.latency_patterns:summary_table",
        plot="plotting.tlb:plot_patterns",
        figures=("latency_patterns",),
        report_section="report.sections_tlb:latency_patterns_section",
        sweep_inputs=_tlbs_result_input,
        analysis_inputs=_tlbs_result_input,
        heavy_analysis=True,
    ),
    Family(
        name="timing_overhead",
        experiment="timing_overhead",
        analyse="analysis.timing.timing_overhead:analyse",
        plot="plotting.timing:plot_timing_overhead",
        figures=("timing_overhead",),
        report_section="report.sections_timing:timing_overhead_section",
    ),
    Family(
        name="l1_sets",
        experiment="l1_sets",
        analyse="analysis.caches.l1_sets:analyse",
        analysis_inputs=_l1_size_result_input,
        table="analysis.caches.l1_sets:figure_table",
        plot="plotting.l1_sets:plot_l1_sets",
        figures=("l1_sets_strides",),
        report_section="report.sections_l1_sets:l1_sets_section",
    ),
    Family(
        name="l2_slices",
        experiment="l2_slices",
        analyse="analysis.l2.l2_slices:analyse",
        table="analysis.l2.l2_slices:figure_table",
        plot="plotting.l2_slices:plot_l2_slices",
        figures=("l2_slices_matrix",),
        report_section="report.sections_slices:l2_slices_section",
        analysis_inputs=_l2_footprint_input,
        heavy_analysis=True,
    ),
    Family(
        name="constant_sets",
        experiment="constant_sets",
        analyse="analysis.caches.constant_sets:analyse",
        table="analysis.caches.constant_sets:figure_table",
        plot="plotting.constant_sets:plot_constant_sets",
        figures=("constant_sets_strides",),
        report_section="report.sections_constant_sets:constant_sets_section",
        sweep_inputs=_caches_result_input,
    ),
    # the node of several GPUs: runs only where the config asks for a node (config.node_members),
    # on the node's first device
    Family(
        name="node",
        experiment="node",
        analyse="analysis.node.node:analyse",
        table="analysis.node.table:figure_table",
        plot="plotting.node:plot_node",
        figures=("node_latency", "node_bandwidth", "node_streams"),
        report_section="report.sections_node:node_section",
    ),
)

# name -> family, in report order
FAMILIES: dict[str, Family] = {f.name: f for f in _FAMILIES}


def family(name: str) -> Family:
    from .exceptions import ConfigError

    if name not in FAMILIES:
        raise ConfigError(f"experiment {name!r} is unknown; allowed: {sorted(FAMILIES)}")
    return FAMILIES[name]
