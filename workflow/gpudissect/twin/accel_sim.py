"""The GPGPU-Sim / Accel-Sim options (`gpgpusim.config`) that a topology document determines.

Each option is written after a comment that cites the measured quantity (or driver fact) it
comes from; an option whose geometry needs a value the run left undetermined is written with
the twin's documented default and says so; options the topology cannot determine are listed at
the end for the user. Formats (as GPGPU-Sim parses them):
- caches `-gpgpu_cache:dl1`, `-gpgpu_cache:dl2`, `-gpgpu_const_cache:l1`:
  `<N|S>:<sets>:<line bytes>:<ways>,<replacement>:<write>:<alloc>:<write alloc>:<set index>,`
  `<mshr type>:<mshr entries>:<mshr merge>,<miss queue>:<result fifo>` (S: sectored, 32-byte
  sectors; replacement L LRU or F FIFO; set index L linear); the L2's sets are per memory
  sub-partition (slice).
- latencies in core cycles, each the load's own (the topology's `calibrated_value`: the timed
  window's overhead taken off) where the topology calibrated it, else the raw timed window:
  `-gpgpu_l1_latency`, `-gpgpu_smem_latency`, `-gpgpu_l2_rop_latency`,
  `-dram_latency`; `-gpgpu_shmem_num_banks`, `-gpgpu_shmem_size`, `-gpgpu_n_clusters`,
  `-gpgpu_n_cores_per_cluster`, `-gpgpu_shader_core_pipeline <threads>:<warp size>`,
  `-gpgpu_compute_capability_major|minor`.
"""

from __future__ import annotations

from typing import Any

from . import defaults as D
from .reading import TopologyReader

SECTOR_BYTES = 32  # GPGPU-Sim's sectored caches have 4 sectors of 32 bytes per 128-byte line
REPLACEMENT = {"lru": "L", "fifo": "F"}
# fields no microbenchmark of this project measures (write and allocation policy, queue sizes):
# written as these placeholders and listed for the user
UNMEASURED_L1 = ("T:m:L:L", "16:0")
UNMEASURED_L2 = ("B:m:L:L", "32:0")
UNMEASURED_CONST = ("R:f:N:L", "4:0")
LEFT_FOR_USER = (
    ("-gpgpu_clock_domains", "interconnect, L2 and DRAM clocks are not measured"),
    ("-gpgpu_mem_addr_mapping, -gpgpu_dram_timing_opt", "DRAM organisation is not measured"),
    ("-gpgpu_shmem_option, -gpgpu_unified_l1d_size", "carveout steps are the driver's"),
    ("-gpgpu_cache:il1, -ptx_opcode_latency_*", "instruction caches and ALUs are not measured"),
)


class _Config:
    def __init__(self, b: TopologyReader) -> None:
        self.b = b
        self.lines: list[str] = []
        self.left: list[tuple[str, str]] = []

    def option(self, name: str, value: Any, why: str) -> None:
        self.lines += [f"# {why}", f"{name} {value}"]

    def leave(self, name: str, why: str) -> None:
        self.left.append((name, why))


def _geometry(c: _Config, element: str) -> tuple[int, int, int, str, list[str]]:
    """(lines, line bytes, ways, replacement char, notes) of one cache."""
    b = c.b
    line = int(b.value(element, "line_bytes"))
    lines = int(b.value(element, "size_bytes")) // line
    notes = [b.cite(element, "size_bytes"), b.cite(element, "line_bytes")]
    ways_per_set = b.value(element, "ways_per_set")
    sets = b.value(element, "sets")
    if ways_per_set and len(set(ways_per_set)) == 1 and sum(ways_per_set) == lines:
        ways = int(ways_per_set[0])
        notes.append(b.cite(element, "ways_per_set"))
    elif ways_per_set and len(set(ways_per_set)) == 1 and sets and sets * ways_per_set[0] >= lines:
        # the eviction sets' geometry: the sets and ways the tags index (the data the size
        # sweeps fit may be fewer lines: Hopper's L1 beside its carveout)
        ways = int(ways_per_set[0])
        notes[0] = (
            f"measured: {int(sets)} sets x {ways} ways ({b.cite(element, 'sets')}; "
            f"{b.cite(element, 'ways_per_set')}); the data the size sweeps fit: "
            f"{b.cite(element, 'size_bytes')}"
        )
        lines = int(sets) * ways
    else:
        ways = D.default_ways(lines, element)
        notes.append(f"ways ASSUMED {ways} (sets and ways undetermined; the twin's default)")
    policy = b.value(element, "policy")
    if policy in REPLACEMENT:
        rep = REPLACEMENT[policy]
        notes.append(b.cite(element, "policy"))
    else:
        rep = "L"
        notes.append(
            f"replacement ASSUMED LRU (measured: {policy})" if policy else "replacement ASSUMED LRU"
        )
    return lines, line, ways, rep, notes


def _hashed_index(b: TopologyReader, element: str) -> str | None:
    """The XOR masks of a hashed set index, as the analysis wrote them (or None)."""
    for quantity in ("sets", "set_index_bits"):
        entry = (b.elements.get(element) or {}).get(quantity) or {}
        for reading in (entry, *(entry.get("other_readings") or [])):
            function = (b.read_analysis(reading.get("analysis")) or {}).get("index_function")
            masks = ((function or {}).get("masks") or {}).get("value")
            if masks:
                return ", ".join(masks)
    return None


def _calibrated(b: TopologyReader, element: str, quantity: str) -> tuple[float, str] | None:
    """A latency as the load itself takes it: the entry's calibrated value (the timed window's
    overhead taken off) where the topology has one, else the raw value; with the citation."""
    entry = b.entry(element, quantity)
    if entry is None:
        return None
    if entry.get("calibrated_value") is not None:
        cal = entry.get("calibration") or {}
        return float(entry["calibrated_value"]), (
            f"{b.cite(element, quantity)}, calibrated {entry['calibrated_value']} (raw minus "
            f"the window overhead {cal.get('window_overhead_cycles')}: {cal.get('analysis')}"
            f"#{cal.get('source')})"
        )
    return float(entry["value"]), f"{b.cite(element, quantity)} (raw timed window: no calibration)"


def _sector(b, element: str) -> tuple[int | None, str]:
    """The sector the cache field gets: the measured one, else the fetch granularity (what one
    miss fills: Accel-Sim fills one sector per miss), with a note saying which."""
    sector = b.value(element, "sector_bytes")
    if sector:
        return sector, b.cite(element, "sector_bytes")
    fetch = b.value(element, "fetch_granularity_bytes")
    if not fetch:
        return None, "sector and fetch granularity undetermined: not sectored (N)"
    return fetch, (
        "sector undetermined; " + b.cite(element, "fetch_granularity_bytes") + " stands in "
        f"(Accel-Sim fills one sector per miss; its sectored caches take {SECTOR_BYTES}-B sectors)"
    )


def _mshr(c: _Config, default: str) -> tuple[str, str]:
    entries, merge = c.b.value("requests", "entries"), c.b.value("requests", "merge_capacity")
    if c.b.value("requests", "kind") == "mshr" and entries and merge:
        return f"A:{int(entries)}:{int(merge)}", (
            f"MSHR {c.b.cite('requests', 'entries')}; {c.b.cite('requests', 'merge_capacity')}"
        )
    return default, f"MSHR {default} placeholder (entries or merge capacity undetermined)"


def _cache_line(
    c: _Config,
    option: str,
    element: str,
    unmeasured: tuple[str, str],
    slices: int = 1,
    slices_from: str = "given on the command line, not measured",
) -> None:
    b = c.b
    if b.value(element, "size_bytes") is None or b.value(element, "line_bytes") is None:
        c.leave(option, f"{element} size or line undetermined")
        return
    lines, line, ways, rep, notes = _geometry(c, element)
    if lines % (ways * slices):
        c.leave(option, f"{lines} lines do not divide into {ways} ways x {slices} slices")
        return
    sets = lines // (ways * slices)
    sector, sector_note = _sector(b, element)
    kind = "S" if sector == SECTOR_BYTES and line == 4 * SECTOR_BYTES else "N"
    notes.append(sector_note)
    mshr, mshr_note = _mshr(c, "A:256:8" if element != "constant_l1" else "S:2:64")
    wr, queues = unmeasured
    value = f"{kind}:{sets}:{line}:{ways},{rep}:{wr},{mshr},{queues}"
    per = f" per slice ({slices} slices {slices_from})" if slices > 1 else ""
    notes += [
        f"{sets} sets{per}",
        mshr_note,
        f"write/alloc fields {wr} and queues {queues} not measured",
    ]
    masks = _hashed_index(b, element)
    if masks:
        notes.append(
            f"set index L (linear): the measured index is an XOR hash, masks {masks}, which no "
            "GPGPU-Sim set-index function (L, H Fermi hash, P ipoly, X bitwise XOR) expresses"
        )
    c.option(option, value, "; ".join(notes))
    c.leave(option, f"check the unmeasured write/allocation fields ({wr}) and queues")


def _latency(c: _Config, option: str, element: str, minus: str | None = None) -> None:
    b = c.b
    got = _calibrated(
        b, element, "hit_latency_cycles" if minus != "miss" else "miss_latency_cycles"
    )
    if got is None:
        c.leave(option, f"{element} latency undetermined")
        return
    v, why = got
    if minus is None:
        c.option(option, round(v), why + " (P-chase latency)")
        return
    other = _calibrated(b, element if minus == "miss" else minus, "hit_latency_cycles")
    if other is None:
        c.leave(option, f"{element if minus == 'miss' else minus} hit latency undetermined")
        return
    base, base_why = other
    if minus == "miss":  # DRAM: the L2's miss latency minus its hit latency
        c.option(option, round(v - base), f"derived: L2 miss - L2 hit ({why}; {base_why})")
        return
    c.option(
        option,
        round(v - base),
        f"derived: {element} hit - {minus} hit, interconnect included ({why}; {base_why})",
    )


def _slice_function(c: _Config, slices: int | None) -> None:
    """The address-to-slice function where GPGPU-Sim's options express it, else why not.

    GPGPU-Sim picks an address's memory channel (one L2 slice per sub-partition, one
    sub-partition per channel here) by `-gpgpu_memory_partition_indexing`: 0 takes the
    channel bits of `-gpgpu_mem_addr_mapping` as they are, or, where `-gpgpu_n_mem` is not a
    power of two, (address >> S) mod n_mem for the `dramid@S` of the mapping; 1 XORs the
    channel bits with the bits above them; 2 is IPOLY for a few power-of-two counts; 3 (PAE)
    and 4 (random) are fixed and random hashes. So a modulo function over whole lines is
    expressed exactly (indexing 0, dramid at the line bit); chosen XOR masks, tables and
    non-linear functions are not."""
    b = c.b
    f = b.value("l2", "slice_function")
    if not isinstance(f, dict):
        entry = (b.elements.get("l2") or {}).get("slice_function") or {}
        why = entry.get("undetermined") or "not in the topology"
        c.leave("L2 slice function", f"undetermined ({why})")
        return
    kind = f.get("kind")
    if kind == "modulo" and slices and f.get("period_bytes"):
        line = int(b.value("l2", "line_bytes") or 128)
        period = int(f["period_bytes"]) // line
        if period == int(slices):
            c.option(
                "-gpgpu_memory_partition_indexing",
                0,
                b.cite("l2", "slice_function") + f": slice = line mod {period}; indexing 0 "
                "takes the channel as (address >> S) mod -gpgpu_n_mem",
            )
            c.leave(
                "-gpgpu_mem_addr_mapping",
                f"begin it with dramid@{line.bit_length() - 1} (the measured slice = (address "
                f">> {line.bit_length() - 1}) mod {period}); the DRAM bits after it are not "
                "measured",
            )
            return
    what = {
        "xor": f"XOR masks {f.get('masks')}",
        "table": f"a table over a period of {f.get('period_bytes')} B",
        "modulo": f"a period of {f.get('period_bytes')} B against {slices} slices",
        "not_linear": f"not linear (linear part: masks {f.get('linear_masks')})",
    }.get(kind, str(kind))
    c.leave(
        "L2 slice function",
        f"measured: {what}; -gpgpu_memory_partition_indexing offers consecutive channel bits "
        "(a modulo of the address where -gpgpu_n_mem is not a power of two), the channel bits "
        "XORed with the bits above them, IPOLY for some power-of-two counts, PAE and a random "
        "hash: none of them is this function",
    )


def accel_sim_config(
    topology: dict[str, Any], *, l2_slices: int | None, command: str, base: str | None = None
) -> str:
    """The options as the text of a gpgpusim.config fragment (`base`: where the analysis
    documents are read from, `TopologyReader`)."""
    b = TopologyReader(topology, base=base)
    c = _Config(b)
    facts = topology.get("driver") or {}
    if facts.get("sm_count"):
        c.option("-gpgpu_n_clusters", facts["sm_count"], f"driver: sm_count = {facts['sm_count']}")
        c.option("-gpgpu_n_cores_per_cluster", 1, "one SM per cluster: clusters = SMs")
    if facts.get("max_threads_per_sm"):
        c.option(
            "-gpgpu_shader_core_pipeline",
            f"{facts['max_threads_per_sm']}:32",
            f"driver: max_threads_per_sm = {facts['max_threads_per_sm']}, 32 threads per warp",
        )
    cc = str(facts.get("compute_capability") or "")
    if "." in cc:
        major, minor = cc.split(".", 1)
        c.option("-gpgpu_compute_capability_major", major, f"driver: compute_capability = {cc}")
        c.option("-gpgpu_compute_capability_minor", minor, f"driver: compute_capability = {cc}")
    _cache_line(c, "-gpgpu_cache:dl1", "l1d", UNMEASURED_L1)
    _latency(c, "-gpgpu_l1_latency", "l1d")
    if "l1d" in (b.value("texture", "shared_with") or []):
        c.leave("-gpgpu_tex_cache:l1", "the texture path reads the L1 data cache (shared_with)")
    else:
        c.leave("-gpgpu_tex_cache:l1", "texture cache fields (fifo sizes) are not measured")
    _cache_line(c, "-gpgpu_const_cache:l1", "constant_l1", UNMEASURED_CONST)
    if b.value("shared", "size_bytes"):
        c.option(
            "-gpgpu_shmem_size",
            int(b.value("shared", "size_bytes")),
            b.cite("shared", "size_bytes"),
        )
    else:
        c.leave("-gpgpu_shmem_size", "shared memory size undetermined")
    if b.value("shared", "banks"):
        c.option(
            "-gpgpu_shmem_num_banks", int(b.value("shared", "banks")), b.cite("shared", "banks")
        )
    else:
        c.leave("-gpgpu_shmem_num_banks", "banks undetermined")
    _latency(c, "-gpgpu_smem_latency", "shared")
    measured_slices = b.value("l2", "slices")
    if l2_slices:
        _cache_line(c, "-gpgpu_cache:dl2", "l2", UNMEASURED_L2, slices=l2_slices)
        if measured_slices:
            c.leave(
                "-gpgpu_n_mem",
                f"--l2-slices {l2_slices} was given; the run measured {int(measured_slices)} "
                "slices",
            )
    elif measured_slices:
        _cache_line(
            c,
            "-gpgpu_cache:dl2",
            "l2",
            UNMEASURED_L2,
            slices=int(measured_slices),
            slices_from="measured by l2_slices",
        )
        c.option(
            "-gpgpu_n_mem",
            int(measured_slices),
            b.cite("l2", "slices") + "; one sub-partition per memory channel "
            "(-gpgpu_n_sub_partition_per_mchannel 1): GPGPU-Sim has one L2 slice per "
            "sub-partition",
        )
        c.option("-gpgpu_n_sub_partition_per_mchannel", 1, "one L2 slice per memory channel")
    else:
        c.leave("-gpgpu_cache:dl2", "its sets are per L2 slice: give --l2-slices N")
    if b.value("l2", "partition_function") or b.value("l2", "partitions"):
        c.leave(
            "L2 slice hash",
            f"measured partition function (XOR of address bits "
            f"{b.value('l2', 'partition_function')}) over {b.value('l2', 'partitions')} "
            "partitions; -gpgpu_memory_partition_indexing offers linear, XOR of fixed bits, IPOLY "
            "and a random hash, not a measured XOR of chosen bits",
        )
    _slice_function(c, l2_slices or measured_slices)
    _latency(c, "-gpgpu_l2_rop_latency", "l2", minus="l1d")
    _latency(c, "-dram_latency", "l2", minus="miss")
    if not measured_slices:
        c.leave(
            "-gpgpu_n_mem, -gpgpu_n_sub_partition_per_mchannel",
            "the run measures no L2 slice count",
        )
    for name, why in LEFT_FOR_USER:
        c.leave(name, why)
    if b.value("l2", "far_hit_latency_cycles") is not None:
        c.leave(
            "L2 near/far partitions",
            f"measured (far hit {b.value('l2', 'far_hit_latency_cycles')} cycles) but GPGPU-Sim "
            "has one L2 latency",
        )
    head = [
        f"# GPGPU-Sim / Accel-Sim options determined by the topology of {topology.get('gpu')}",
        f"# ({topology.get('device')}, {topology.get('backend')}); made by `{command}`.",
        "# Each option follows the comment that cites where it comes from; ASSUMED marks the",
        f"# twin's defaults (config/README.md). Fully associative up to "
        f"{D.FULLY_ASSOCIATIVE_MAX_LINES} lines.",
        "",
    ]
    tail = ["", "# Left for the user:"] + [f"#   {n}: {why}" for n, why in c.left]
    return "\n".join(head + c.lines + tail) + "\n"
