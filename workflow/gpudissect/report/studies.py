"""The studies the pipeline reproduces, as data: for each, the twins of its GPUs, the
experiments its tables and figures need, and its tables (rows of measured quantity against the
paper value). `snakemake <study>` and the report's study parts both read this; adding an
experiment family to a study is one name in `experiments` (and its rows in a table).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    label: str
    experiment: str  # the result document the value comes from
    path: str  # dotted path in that document
    paper: str  # "<config/papers file stem>:<dotted key>"
    unit: str = ""  # how to print it: bytes, cycles, GB/s
    timing: bool = False  # agrees within compare.TIMING_TOLERANCE, not exactly


@dataclass(frozen=True)
class PaperTable:
    name: str  # file stem of its CSV export
    title: str  # the paper's table, by number
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class Study:
    key: str
    title: str
    citation: str
    devices: tuple[str, ...]  # names of the twins in config/config.yaml
    experiments: tuple[str, ...]
    methods: str  # one paragraph
    tables: tuple[PaperTable, ...]


def _cache_rows(element: str, label: str, paper: str, *, structure: bool = True) -> tuple[Row, ...]:
    base = f"elements.{element}"
    rows = [
        Row(
            f"{label} size",
            "caches",
            f"{base}.size_bytes",
            f"{paper}:{element}.size_bytes",
            "bytes",
        ),
        Row(
            f"{label} line",
            "caches",
            f"{base}.line_bytes",
            f"{paper}:{element}.line_bytes",
            "bytes",
        ),
    ]
    if structure:
        rows += [
            Row(f"{label} sets", "caches", f"{base}.sets", f"{paper}:{element}.sets"),
            Row(f"{label} LRU", "caches", f"{base}.policy", f"{paper}:{element}.lru"),
        ]
    return tuple(rows)


def _latency_rows(element: str, label: str, paper: str) -> tuple[Row, ...]:
    return (
        Row(
            f"{label} hit latency",
            "caches",
            f"elements.{element}.hit_latency_cycles",
            f"{paper}:{element}.hit_latency_cycles",
            "cycles",
            True,
        ),
    )


_TLB = tuple(
    Row(
        f"{lvl.upper().replace('_', ' ')} {label}",
        "tlbs",
        f"elements.{lvl}.{q}",
        f"tpds_tlb:{lvl}.{q}",
        unit,
    )
    for lvl in ("l1_tlb", "l2_tlb")
    for q, label, unit in (
        ("page_bytes", "page", "bytes"),
        ("entries", "entries", ""),
        ("sets", "sets", ""),
    )
) + (
    Row(
        "L1 TLB miss penalty",
        "tlbs",
        "elements.l1_tlb.miss_penalty_cycles",
        "tpds_tlb:l1_tlb_penalty",
        "cycles",
        True,
    ),
    Row(
        "L2 TLB miss penalty",
        "tlbs",
        "elements.l2_tlb.miss_penalty_cycles",
        "tpds_tlb:l2_tlb_penalty",
        "cycles",
        True,
    ),
)

_BANKS = (
    Row("banks", "bank_conflicts", "elements.shared.banks", "tpds_banks_throughput:banks.banks"),
    Row(
        "bank width",
        "bank_conflicts",
        "elements.shared.bank_width_bytes",
        "tpds_banks_throughput:banks.bank_width_bytes",
        "bytes",
    ),
    Row(
        "no-conflict latency",
        "bank_conflicts",
        "elements.shared.hit_latency_cycles",
        "tpds_banks_throughput:banks.latency_no_conflict_cycles",
        "cycles",
        True,
    ),
)

_THROUGHPUT = (
    Row(
        "DRAM copy maximum",
        "global_throughput",
        "elements.dram.throughput_gbps",
        "tpds_banks_throughput:global_throughput.max_throughput_gbps",
        "GB/s",
        True,
    ),
    Row(
        "shared copy peak per SM (4 B)",
        "shared_throughput",
        "by_vector_bytes.4.gbps_per_sm",
        "tpds_banks_throughput:shared_throughput.peak_gbps_per_sm",
        "GB/s",
        True,
    ),
)

STUDIES: dict[str, Study] = {
    s.key: s
    for s in (
        Study(
            key="tpds",
            title="Mei & Chu, IEEE TPDS 2017",
            citation=(
                'X. Mei, X. Chu, "Dissecting GPU Memory Hierarchy through Microbenchmarking", '
                "IEEE TPDS 28(1), 2017"
            ),
            devices=("gtx560ti", "gtx780", "gtx980"),
            experiments=(
                "l1_size",
                "cache_stage1",
                "caches",
                "pchase_classic",
                "l2",
                "bank_conflicts",
                "shared_throughput",
                "global_throughput",
                "tlbs",
                "latency_patterns",
            ),
            methods=(
                "Fine-grained pointer chase (TPDS Sec. 3.2): one thread walks a chain of "
                "dependent loads and times every access, so each access is a hit or a miss. "
                "Stage 1 (Fig. 6) finds size, line and latency per load path; stage 2 walks "
                "arrays of C + k b to count sets, ways and the replacement policy (Table V, "
                "Figs. 7 and 11). TLBs are read with page-size strides (Figs. 9-10), the "
                "latency patterns P1-P6 with a non-uniform stride (Fig. 14), shared-memory "
                "banks from the latency against stride (Figs. 17-19, Table VIII) and the "
                "throughput of copy kernels (Tables VI and VII)."
            ),
            tables=(
                PaperTable(
                    "tpds_table5_caches",
                    "TPDS Table V: caches",
                    _cache_rows("l1d", "L1 data", "tpds_table5")
                    + _cache_rows("texture", "texture L1", "tpds_table5")
                    + _cache_rows("readonly", "read-only", "tpds_table5")
                    + _cache_rows("l2", "L2", "tpds_table5", structure=False),
                ),
                PaperTable("tpds_table5_tlbs", "TPDS Table V and Fig. 14: TLBs", _TLB),
                PaperTable(
                    "tpds_table8_banks", "TPDS Sec. 6 and Table VIII: shared-memory banks", _BANKS
                ),
                PaperTable(
                    "tpds_tables6_7_throughput", "TPDS Tables VI and VII: throughput", _THROUGHPUT
                ),
            ),
        ),
        Study(
            key="npc",
            title="Mei, Zhao, Liu & Chu, NPC 2014",
            citation=(
                'X. Mei, K. Zhao, C. Liu, X. Chu, "Benchmarking the Memory Hierarchy of Modern '
                'GPUs", NPC 2014'
            ),
            devices=("gtx560ti", "gtx780", "gtx980"),
            experiments=("cache_stage1", "caches", "bank_conflicts", "tlbs", "latency_patterns"),
            methods=(
                "The conference version of the TPDS study: the fine-grained pointer chase for "
                "caches and TLBs (Table 4), the latency of each memory level (Table 5) and the "
                "global-memory latency patterns (Table 3), shared-memory bank conflicts "
                "(Figs. 5-7)."
            ),
            tables=(
                PaperTable(
                    "npc_table4_5_caches",
                    "NPC Tables 4 and 5: caches and their latencies",
                    _cache_rows("l1d", "L1 data", "tpds_table5")
                    + _latency_rows("l1d", "L1 data", "tpds_table5")
                    + _cache_rows("texture", "texture L1", "tpds_table5")
                    + _latency_rows("texture", "texture L1", "tpds_table5")
                    + _latency_rows("l2", "L2", "tpds_table5"),
                ),
                PaperTable("npc_table4_tlbs", "NPC Table 4 and Table 3: TLBs", _TLB),
                PaperTable("npc_banks", "NPC Sec. 4.1: shared-memory banks", _BANKS),
            ),
        ),
        Study(
            key="lashgar",
            title="Lashgar, Salehi & Baniasadi",
            citation=(
                'A. Lashgar, E. Salehi, A. Baniasadi, "A Case Study in Reverse Engineering '
                'GPGPUs: Outstanding Memory Handling Resources"'
            ),
            devices=("tesla_m2070", "tesla_k20"),
            experiments=("l2_flush", "requests"),
            methods=(
                "The Thread-Latency sweep (Listing 1): N loads per thread over 2-1024 threads in "
                "the UNQ and MergerK patterns; the thread count where latency jumps tells how many "
                "requests one SM keeps in flight, and whether they are counted per thread (MSHR) "
                "or per warp instruction (pending request table). The L2 size comes from a copy "
                "timed with and without a flushed L2 (Sec. 3.3, Fig. 2)."
            ),
            tables=(
                PaperTable(
                    "lashgar_findings",
                    "Lashgar et al., Secs. 3.3 and 5: outstanding requests and L2",
                    tuple(
                        Row(label, "requests", f"elements.requests.{q}", f"lashgar:requests.{q}")
                        for q, label in (
                            ("kind", "request table kind"),
                            ("entries", "entries"),
                            ("merge_capacity", "merge capacity"),
                            ("max_outstanding", "outstanding requests"),
                            ("per_warp_limit", "per-warp limit"),
                        )
                    )
                    + (
                        Row(
                            "L2 size",
                            "l2_flush",
                            "elements.l2.size_bytes",
                            "lashgar:l2_size_bytes",
                            "bytes",
                        ),
                    ),
                ),
            ),
        ),
        Study(
            key="thesis",
            title="Größler, BSc thesis 2022",
            citation=(
                'D. Größler, "Capturing the Memory Topology of GPUs", BSc thesis, TU Munich, 2022'
            ),
            devices=("tesla_k20c",),
            experiments=("l1_size", "cache_stage1", "caches", "cache_sharing", "cache_instances"),
            methods=(
                "The thesis runs the fine-grained pointer chase of Mei & Chu on every load path "
                "of a Tesla K20c (Table 5.4): size, line and hit latency of the L1 data, "
                "texture, read-only, constant L1 and L1.5 caches and the L2; two threads on two "
                "load paths tell whether two caches are one (Sec. 4.5), and a base thread against "
                "threads in other warps how many copies of a cache an SM has (Sec. 4.6). The "
                "topology table gathers every value with the thesis's beside it."
            ),
            tables=(
                PaperTable(
                    "thesis_table5_4",
                    "Größler Table 5.4: caches of the Tesla K20c",
                    tuple(
                        row
                        for element, label in (
                            ("l1d", "L1 data"),
                            ("texture", "texture L1"),
                            ("readonly", "read-only"),
                            ("constant_l1", "constant L1"),
                            ("constant_l15", "constant L1.5"),
                            ("l2", "L2"),
                        )
                        for row in _cache_rows(element, label, "tpds_table5", structure=False)
                        + _latency_rows(element, label, "tpds_table5")
                    ),
                ),
            ),
        ),
    )
}


def study(key: str) -> Study:
    from ..exceptions import ConfigError

    if key not in STUDIES:
        raise ConfigError(f"study {key!r} is unknown; allowed: {sorted(STUDIES)}")
    return STUDIES[key]
