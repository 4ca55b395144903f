"""Device profiles: YAML -> schema check -> semantic checks -> frozen dataclasses.

``load_profile(path)`` is the only place a profile is read as a raw mapping; everything after
it sees a typed ``DeviceProfile``. Every error is a ``ProfileError`` whose message names the
file, the field (as a dotted path) and what is allowed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from gpudissect import yamlio

from ..datafiles import schema_file
from ..exceptions import ProfileError
from ..limits import check_profile_limits
from .banks import SharedSpec
from .cache import CacheSpec
from .carveout import CarveoutSpec
from .indexing import IndexSpec
from .l2_slices import L2SliceSpec, per_slice_index
from .link import NodeSpec, node_spec
from .noise import NoiseSpec
from .outstanding import RequestsSpec
from .policies import PolicySpec
from .throughput import ThroughputSpec
from .timing import TimingSpec
from .tlb import TlbLevelSpec, TlbSpec

PROFILE_SCHEMA = schema_file("profile.schema.yaml")
LOAD_PATHS = ("ca", "cg", "nc", "tex", "const")
MAX_SECTORS_PER_LINE = 32
MAX_PLRU_WAYS = 32


@dataclass(frozen=True)
class ClocksSpec:
    sm_mhz: float
    memory_mhz: float


@dataclass(frozen=True)
class DramSpec:
    latency_cycles: int
    # what a driver reports as the device memory (None: the papers give none); it sets sweep
    # ranges only (DeviceFacts), never an analysis
    size_bytes: int | None = None


@dataclass(frozen=True)
class DeviceProfile:
    """A validated device profile (treat the mappings as read-only; plain dicts so that a
    profile pickles). ``citations`` maps a block's dotted path ("" for the top
    level, e.g. "caches.l1d", "tlbs.levels.0") to its ``cite`` map; the simulator ignores it."""

    name: str
    gpu: str
    architecture: str
    compute_capability: str | None
    clocks: ClocksSpec
    sms: int
    max_warps_per_sm: int
    dram: DramSpec
    caches: Mapping[str, CacheSpec]
    paths: Mapping[str, tuple[str, ...]]
    tlbs: TlbSpec | None = None
    shared: SharedSpec | None = None
    requests: RequestsSpec | None = None
    throughput: ThroughputSpec | None = None
    noise: NoiseSpec = field(default_factory=NoiseSpec)
    timing: TimingSpec = field(default_factory=TimingSpec)
    l2_slices: L2SliceSpec | None = None
    carveout: CarveoutSpec | None = None
    links: NodeSpec | None = None  # the node this GPU is one of (sim/link.py)
    citations: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    source: str = ""

    def path_caches(self, path: str) -> tuple[CacheSpec, ...]:
        """The caches a load on ``path`` passes through, nearest first."""
        return tuple(self.caches[name] for name in self.paths[path])


def profile_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of the profile file's bytes (recorded in trace provenance)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _loc(parts) -> str:
    return ".".join(str(p) for p in parts) or "(top level)"


def _describe(err: jsonschema.ValidationError) -> str:
    """One schema error as 'field: what is wrong; what is allowed'."""
    key, v, s = _loc(err.absolute_path), err.validator, err.schema
    if v == "additionalProperties":
        allowed = sorted(s.get("properties", {}))
        unknown = sorted(set(err.instance) - set(allowed))
        return f"{key}: unknown key(s) {', '.join(unknown)}; allowed keys: {', '.join(allowed)}"
    if v == "enum" and "propertyNames" in err.relative_schema_path:
        return f"{key}: name {err.instance!r} is not allowed; allowed names: {', '.join(s['enum'])}"
    if v == "enum":
        return f"{key}: {err.instance!r} is not allowed; allowed: {', '.join(map(str, s['enum']))}"
    if v in ("minimum", "exclusiveMinimum") and str(key).endswith("_cycles"):
        return f"{key}: {err.instance!r} is negative; latencies and penalties must be >= 0 cycles"
    if v in ("minimum", "maximum", "exclusiveMinimum"):
        return f"{key}: {err.instance!r} is out of range; allowed: {v} {s[v]}"
    if v == "type":
        return f"{key}: {err.instance!r} is not of type {s['type']}"
    if v == "const":
        return f"{key}: {err.instance!r} is not allowed; allowed: {s['const']!r}"
    return f"{key}: {err.message}"


def _schema_errors(doc: Any, schema_path: Path) -> list[str]:
    with open(schema_path) as f:
        schema = yamlio.safe_load(f)
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(doc))
    if not errors:
        return []
    best = jsonschema.exceptions.best_match(errors)
    rest = sorted({_describe(e) for e in errors} - {_describe(best)})
    return [_describe(best), *rest]


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


class _Checker:
    """Semantic checks the schema cannot express; raises ProfileError naming the field."""

    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, where: str, what: str) -> None:
        raise ProfileError(f"{self.file}: {where}: {what}")

    def set_ways(self, d: dict, where: str, *, units: int, unit_bytes: int, size_key: str) -> tuple:
        """``set_ways`` from ``set_ways`` or ``ways``; ``units`` lines (or entries) in all."""
        if ("set_ways" in d) == ("ways" in d):
            self.fail(where, "give exactly one of set_ways (ways of each set) and ways (uniform)")
        if "ways" in d:
            if units % d["ways"]:
                self.fail(
                    f"{where}.ways",
                    f"{units} lines/entries do not divide into sets of "
                    f"{d['ways']} ways; use set_ways for unequal sets",
                )
            return (d["ways"],) * (units // d["ways"])
        ways = tuple(d["set_ways"])
        if sum(ways) != units:
            n = sum(ways)
            if size_key == "size_bytes":
                what = (
                    f"the ways add up to {n} lines x {unit_bytes} B = {n * unit_bytes} B, "
                    f"but size_bytes is {units * unit_bytes}"
                )
            else:
                what = f"the ways add up to {n} entries, but entries is {units}"
            self.fail(f"{where}.set_ways", what)
        return ways

    def index(self, d: dict | None, where: str, *, sets: int, line_bytes: int) -> IndexSpec:
        if d is None:
            return IndexSpec()
        kind = d["kind"]
        own = {
            "bits": {"low_bit"},
            "bit_list": {"bits"},
            "xor": {"masks"},
            "table": {"period_bytes", "sets_of_lines"},
        }[kind]
        extra = set(d) - own - {"kind", "cite"}
        if extra:
            self.fail(
                where,
                f"{', '.join(sorted(extra))} not used by kind {kind}; "
                f"kind {kind} takes: {', '.join(sorted(own))}",
            )
        n = {"bit_list": "bits", "xor": "masks"}.get(kind)
        if n is not None:
            if n not in d:
                self.fail(where, f"kind {kind} needs {n}")
            k = len(d[n])
            if 2**k != sets:
                self.fail(
                    f"{where}.{n}",
                    f"{k} {n} select 2**{k} = {2**k} sets, but there are "
                    f"{sets} sets; give log2(sets) {n}, or change the ways",
                )
            if len(set(d[n])) != k:
                self.fail(f"{where}.{n}", f"repeated {n} {d[n]}; each must be distinct")
        if kind == "table":
            if "period_bytes" not in d or "sets_of_lines" not in d:
                self.fail(where, "kind table needs period_bytes and sets_of_lines")
            period, table = d["period_bytes"], d["sets_of_lines"]
            if period % line_bytes:
                self.fail(f"{where}.period_bytes", f"{period} is not a multiple of {line_bytes}")
            if len(table) != period // line_bytes:
                self.fail(
                    f"{where}.sets_of_lines",
                    f"has {len(table)} entries; a period of "
                    f"{period} B holds {period // line_bytes} lines of {line_bytes} B",
                )
            if max(table) >= sets:
                self.fail(
                    f"{where}.sets_of_lines",
                    f"set {max(table)} does not exist; sets are 0..{sets - 1}",
                )
        return IndexSpec(
            kind=kind,
            low_bit=d.get("low_bit"),
            bits=tuple(d.get("bits", ())),
            masks=tuple(d.get("masks", ())),
            period_bytes=d.get("period_bytes"),
            sets_of_lines=tuple(d.get("sets_of_lines", ())),
        )

    def policy(self, d: dict | None, where: str, *, set_ways: tuple) -> PolicySpec:
        if d is None:
            return PolicySpec()
        kind, weights = d["kind"], d.get("weights")
        if kind == "plru" and not all(_is_pow2(w) and w <= MAX_PLRU_WAYS for w in set_ways):
            self.fail(
                f"{where}.kind",
                f"plru needs a power of two (<= {MAX_PLRU_WAYS}) ways in "
                f"every set; the sets have {sorted(set(set_ways))} ways; use lru or fifo",
            )
        if kind != "weighted_random" and weights is not None:
            self.fail(f"{where}.weights", f"only kind weighted_random takes weights, not {kind}")
        if kind == "weighted_random":
            if weights is None:
                self.fail(where, "kind weighted_random needs weights (one per way)")
            if len(weights) != max(set_ways):
                self.fail(
                    f"{where}.weights",
                    f"{len(weights)} weights for {max(set_ways)} ways; give one weight per way",
                )
            if abs(sum(weights) - 1.0) > 0.005:
                self.fail(
                    f"{where}.weights", f"weights sum to {sum(weights):.4f}; they must sum to 1"
                )
        return PolicySpec(kind=kind, weights=tuple(float(w) for w in weights or ()))

    def cache(self, name: str, d: dict) -> CacheSpec:
        where = f"caches.{name}"
        line, size = d["line_bytes"], d["size_bytes"]
        sector = d.get("sector_bytes", line)
        if not _is_pow2(line):
            self.fail(f"{where}.line_bytes", f"{line} is not a power of two")
        if not _is_pow2(sector) or sector > line or line // sector > MAX_SECTORS_PER_LINE:
            self.fail(
                f"{where}.sector_bytes",
                f"{sector} must be a power of two dividing "
                f"line_bytes {line} into at most {MAX_SECTORS_PER_LINE} sectors",
            )
        if size % line:
            self.fail(f"{where}.size_bytes", f"{size} is not a multiple of line_bytes {line}")
        ways = self.set_ways(d, where, units=size // line, unit_bytes=line, size_key="size_bytes")
        if not d.get("translated", True) and d.get("miss_on_tlb_miss", False):
            self.fail(
                f"{where}.miss_on_tlb_miss",
                "a cache with translated: false is looked up before any TLB, so a TLB miss "
                "cannot cancel its hits; drop one of the two",
            )
        data = d.get("data_bytes")
        if data is not None:
            if data % line or data > size:
                self.fail(
                    f"{where}.data_bytes",
                    f"{data} must be a multiple of line_bytes {line} and at most size_bytes {size}",
                )
            if d.get("policy", {}).get("kind", "lru") != "lru":
                self.fail(
                    f"{where}.data_bytes",
                    "a data array smaller than the sets and ways drops its least recently used "
                    "line: give policy lru",
                )
        return CacheSpec(
            name=name,
            size_bytes=size,
            line_bytes=line,
            set_ways=ways,
            hit_latency_cycles=d["hit_latency_cycles"],
            sector_bytes=d.get("sector_bytes"),
            index=self.index(d.get("index"), f"{where}.index", sets=len(ways), line_bytes=line),
            policy=self.policy(d.get("policy"), f"{where}.policy", set_ways=ways),
            prefetch_lines=d.get("prefetch_lines", 0),
            translated=d.get("translated", True),
            miss_on_tlb_miss=d.get("miss_on_tlb_miss", False),
            path_latency_cycles=tuple(d.get("path_latency_cycles", {}).items()),
            instances_per_sm=d.get("instances_per_sm", 1),
            instance_select=d.get("instance_select", "warp_modulo"),
            data_bytes=data,
            reported_size_bytes=d.get("reported_size_bytes"),
        )

    def tlb_level(self, i: int, d: dict) -> TlbLevelSpec:
        where, page = f"tlbs.levels.{i}", d["page_bytes"]
        if not _is_pow2(page):
            self.fail(f"{where}.page_bytes", f"{page} is not a power of two")
        ways = self.set_ways(d, where, units=d["entries"], unit_bytes=page, size_key="entries")
        coalesce = d.get("coalesce_pages", 1)
        if not _is_pow2(coalesce):
            self.fail(f"{where}.coalesce_pages", f"{coalesce} is not a power of two (1, 2, 4, ...)")
        return TlbLevelSpec(
            name=d["name"],
            entries=d["entries"],
            page_bytes=page,
            set_ways=ways,
            miss_penalty_cycles=d["miss_penalty_cycles"],
            index=self.index(d.get("index"), f"{where}.index", sets=len(ways), line_bytes=page),
            policy=self.policy(d.get("policy"), f"{where}.policy", set_ways=ways),
            coalesce_pages=coalesce,
        )

    def tlbs(self, d: dict | None) -> TlbSpec | None:
        if d is None:
            return None
        levels = tuple(self.tlb_level(i, level) for i, level in enumerate(d["levels"]))
        names = [level.name for level in levels]
        if len(set(names)) != len(names):
            self.fail("tlbs.levels", f"level names {names} repeat; give each level its own name")
        if "window_switch_penalty_cycles" in d and "page_table_window_bytes" not in d:
            self.fail("tlbs.window_switch_penalty_cycles", "needs page_table_window_bytes")
        return TlbSpec(
            levels=levels,
            page_table_window_bytes=d.get("page_table_window_bytes"),
            window_switch_penalty_cycles=d.get("window_switch_penalty_cycles", 0),
        )

    def paths(self, d: dict, caches: Mapping[str, CacheSpec]) -> dict[str, tuple[str, ...]]:
        out = {}
        for path in LOAD_PATHS:
            if path not in d:
                continue
            names = tuple(d[path])
            for name in names:
                if name not in caches:
                    self.fail(
                        f"paths.{path}",
                        f"names cache {name!r}, which is not defined; "
                        f"defined caches: {', '.join(caches)}",
                    )
            if len(set(names)) != len(names):
                self.fail(f"paths.{path}", f"{list(names)} passes a cache twice")
            out[path] = names
        for name, spec in caches.items():
            for path, _ in spec.path_latency_cycles:
                if name not in out.get(path, ()):
                    on = [p for p, names in out.items() if name in names]
                    self.fail(
                        f"caches.{name}.path_latency_cycles.{path}",
                        f"path {path} does not pass cache {name!r}; paths through it: "
                        f"{', '.join(on) or 'none'}",
                    )
        return out

    def per_partition(self, value: Any, where: str, partitions: int) -> tuple[int, ...]:
        """One integer for every partition, or a list of one per partition."""
        out = tuple(value) if isinstance(value, list) else (value,) * partitions
        if len(out) != partitions:
            self.fail(where, f"has {len(out)} entries; give one per partition: {partitions}")
        return out

    def l2_slices(self, d: dict | None, caches: Mapping[str, CacheSpec], sms: int):
        """The ``l2_slices`` block: the slice function and the per-SM and per-slice terms."""
        if d is None:
            return None
        where, name, n = "l2_slices", d["cache"], d["slices"]
        if name not in caches:
            self.fail(
                f"{where}.cache",
                f"names cache {name!r}, which is not defined; defined caches: {', '.join(caches)}",
            )
        line = caches[name].line_bytes
        index = self.index(d["index"], f"{where}.index", sets=n, line_bytes=line)
        lengths = {"slice_partition": n, "slice_cycles": n, "sm_partition": sms, "sm_cycles": sms}
        values = {}
        for key, want in lengths.items():
            values[key] = tuple(d.get(key, [0] * want))
            if len(values[key]) != want:
                per = "slice" if key.startswith("slice") else f"SM (sms: {sms})"
                self.fail(
                    f"{where}.{key}", f"has {len(values[key])} entries; give one per {per}: {want}"
                )
        copies = d.get("near_copies")
        copies_index = IndexSpec()
        sizes = ways = None
        if copies is not None:
            partitions = max(max(values["slice_partition"]), max(values["sm_partition"])) + 1
            at = f"{where}.near_copies"
            sizes = self.per_partition(copies["size_bytes"], f"{at}.size_bytes", partitions)
            ways = self.per_partition(copies.get("ways", 16), f"{at}.ways", partitions)
            for size, w in zip(sizes, ways, strict=True):
                if size % line or size // line % w:
                    self.fail(
                        f"{where}.near_copies.size_bytes",
                        f"{size} must be whole sets of {w} ways of {line}-B lines",
                    )
            sets = {size // line // w for size, w in zip(sizes, ways, strict=True)}
            if copies.get("index") is not None and len(sets) > 1:
                self.fail(
                    f"{where}.near_copies",
                    f"sizes {list(sizes)} with ways {list(ways)} give {sorted(sets)} sets; one "
                    "index needs one set count: give every partition's store as many sets",
                )
            copies_index = self.index(
                copies.get("index"),
                f"{where}.near_copies.index",
                sets=min(sets),
                line_bytes=line,
            )
        return L2SliceSpec(
            near_copies_bytes=sizes,
            near_copies_ways=ways or (16,),
            near_copies_index=copies_index,
            near_copies_home_lines=False if copies is None else bool(copies.get("home_lines")),
            cache=name,
            slices=n,
            index=index,
            far_cycles=d["far_cycles"],
            line_bytes=line,
            atomic_cycles=d.get("atomic_cycles", L2SliceSpec.atomic_cycles),
            data_per_slice=bool(d.get("data_per_slice", False)),
            **values,
        )

    def sliced_caches(
        self, spec: L2SliceSpec | None, caches: dict[str, CacheSpec], doc: dict
    ) -> dict[str, CacheSpec]:
        """`caches` with the sliced cache's index split among the slices, where the block has
        ``data_per_slice: true`` (sim/l2_slices.py)."""
        if spec is None or not spec.data_per_slice:
            return caches
        if doc["caches"][spec.cache].get("index") is not None:
            self.fail(
                f"caches.{spec.cache}.index",
                "is given, but l2_slices.data_per_slice places the lines by slice; leave the "
                "index out, or set data_per_slice: false",
            )
        try:
            index = per_slice_index(spec, caches[spec.cache])
        except ValueError as e:
            self.fail("l2_slices.data_per_slice", str(e))
        return caches | {spec.cache: dataclasses.replace(caches[spec.cache], index=index)}

    def carveout(self, d: dict | None, caches: Mapping[str, CacheSpec]) -> CarveoutSpec | None:
        """The ``carveout`` block: the shared partitions beside a cache present here."""
        spec = self.block(CarveoutSpec, d, "carveout")
        if spec is not None and spec.cache not in caches:
            self.fail(
                "carveout.cache",
                f"{spec.cache!r} is not a cache of this profile; allowed: {', '.join(caches)}",
            )
        return spec

    def links(self, d: dict | None, caches: Mapping[str, CacheSpec]) -> NodeSpec | None:
        try:
            return node_spec(d, caches)
        except ProfileError as e:
            where, _, what = str(e).partition(": ")
            self.fail(where, what)

    def block(self, cls, d: dict | None, where: str):
        """A spec dataclass of another sim module (banks, outstanding, throughput), built from
        its block minus ``cite``."""
        if d is None:
            return None
        fields = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items() if k != "cite"}
        try:
            return cls(**fields)
        except (TypeError, ValueError, ProfileError) as e:
            self.fail(where, str(e))


def _citations(doc: Any, prefix: tuple = ()) -> dict[str, Mapping[str, str]]:
    out = {}
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k == "cite" and isinstance(v, dict):
                out[".".join(map(str, prefix))] = dict(v)
            else:
                out.update(_citations(v, (*prefix, k)))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out.update(_citations(v, (*prefix, i)))
    return out


def _fail_limit(file: str, key: str, what: str) -> None:
    raise ProfileError(f"{file}: {key}: {what} (limits: config/README.md, section Limits)")


def load_profile(path: str | os.PathLike, *, schema_path: Path = PROFILE_SCHEMA) -> DeviceProfile:
    """Read, validate and type a device profile; raises ProfileError naming file and field."""
    file = os.fspath(path)
    try:
        with open(file) as f:
            doc = yamlio.safe_load(f)
    except OSError as e:
        raise ProfileError(f"{file}: cannot read the profile: {e.strerror}") from e
    except yaml.YAMLError as e:
        raise ProfileError(f"{file}: not valid YAML: {e}") from e
    if not isinstance(doc, dict):
        raise ProfileError(f"{file}: a profile is a YAML mapping (see config/README.md)")
    # before the schema and before any per-set structure: an L2 of 1 TiB is refused at once
    check_profile_limits(doc, lambda key, what: _fail_limit(file, key, what))
    errors = _schema_errors(doc, schema_path)
    if errors:
        more = f" (and {len(errors) - 1} more: {'; '.join(errors[1:])})" if errors[1:] else ""
        raise ProfileError(f"{file}: {errors[0]}{more}")
    c = _Checker(file)
    caches = {name: c.cache(name, d) for name, d in doc["caches"].items()}
    l2_slices = c.l2_slices(doc.get("l2_slices"), caches, doc["sms"])
    caches = c.sliced_caches(l2_slices, caches, doc)
    noise = {k: v for k, v in doc.get("noise", {}).items() if k != "cite"}
    return DeviceProfile(
        name=doc["name"],
        gpu=doc.get("gpu", doc["name"]),
        architecture=doc.get("architecture", "unknown"),
        compute_capability=doc.get("compute_capability"),
        clocks=ClocksSpec(sm_mhz=doc["clocks"]["sm_mhz"], memory_mhz=doc["clocks"]["memory_mhz"]),
        sms=doc["sms"],
        max_warps_per_sm=doc["max_warps_per_sm"],
        dram=DramSpec(
            latency_cycles=doc["dram"]["latency_cycles"], size_bytes=doc["dram"].get("size_bytes")
        ),
        caches=caches,
        paths=c.paths(doc["paths"], caches),
        tlbs=c.tlbs(doc.get("tlbs")),
        shared=c.block(SharedSpec, doc.get("shared"), "shared"),
        requests=c.block(RequestsSpec, doc.get("requests"), "requests"),
        throughput=c.block(ThroughputSpec, doc.get("throughput"), "throughput"),
        noise=NoiseSpec(**noise),
        timing=c.block(TimingSpec, doc.get("timing"), "timing") or TimingSpec(),
        l2_slices=l2_slices,
        carveout=c.carveout(doc.get("carveout"), caches),
        links=c.links(doc.get("links"), caches),
        citations=_citations(doc),
        source=file,
    )
