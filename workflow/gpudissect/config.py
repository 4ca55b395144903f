"""Run configuration: validated against the schema, then frozen dataclasses.

Every error names the key (as a path like `devices[0].backend`), the value and what is allowed,
and is raised before any job runs.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml

from gpudissect import yamlio

from .datafiles import schema_file
from .exceptions import ConfigError, ProfileError
from .limits import check_config_limits

if TYPE_CHECKING:  # imported where a config is validated, not by every sweep job
    import jsonschema

CONFIG_SCHEMA = schema_file("config.schema.yaml")


REPEAT_STREAM = 0x5EED  # keeps a repeat's seed apart from any device's own seed
AUTO = "auto"  # a sweep range the sweep derives from the driver's facts and earlier results


@dataclass(frozen=True)
class SizeRange:
    start: int
    stop: int
    step: int

    def sizes(self) -> tuple[int, ...]:
        return tuple(range(self.start, self.stop + 1, self.step))


@dataclass(frozen=True)
class DeviceEntry:
    name: str
    backend: str
    profile: Path | None
    seed: int
    index: int
    arch: str | None
    carveouts: tuple[int, ...]
    partition: str | None  # Slurm partition of the sweeps (profiles/slurm)
    gpu_model: str | None  # Slurm GPU type of the sweeps
    experiments: dict[str, Any]  # effective (merged) experiment sections, raw for hashing
    params: dict[str, Any]  # typed parameters of each experiment (see gpudissect.families)
    twin_of: str | None = None  # the cuda device whose twin this sim device runs

    def for_repeat(self, repeat: int) -> DeviceEntry:
        """This device as repeat `repeat` (from 1) of a run runs it: repeat 1 is the device
        itself; a later one draws the simulator's noise from a seed of its own."""
        if repeat == 1:
            return self
        seed = int(np.random.SeedSequence([self.seed, REPEAT_STREAM, repeat]).generate_state(1)[0])
        return dataclasses.replace(self, seed=seed)

    def enabled(self, experiment: str) -> bool:
        return bool(self.experiments.get(experiment, {}).get("enabled", False))

    def sweep_fragment(self, experiment: str) -> dict[str, Any]:
        """The part of the config one sweep depends on: this device's own keys and this
        experiment's section, nothing of the other experiments. Its hash is the trace's
        `config_hash` and a param of the sweep's rule, so editing it reruns this sweep alone."""
        return {
            "device": {
                "name": self.name,
                "backend": self.backend,
                "profile": None if self.profile is None else str(self.profile),
                "seed": self.seed,
                "index": self.index,
                "arch": self.arch,
                "carveouts": list(self.carveouts),
            },
            "experiment": experiment,
            "parameters": self.experiments[experiment],
        }


@dataclass(frozen=True)
class BuildConfig:
    nvcc: str
    nvcc_flags: tuple[str, ...]


@dataclass(frozen=True)
class RunConfig:
    devices: tuple[DeviceEntry, ...]
    build: BuildConfig
    report_title: str
    repeats: int = 1  # every experiment of every device runs this many times (`repeats`)

    def device(self, name: str) -> DeviceEntry:
        for d in self.devices:
            if d.name == name:
                return d
        raise ConfigError(f"no device named {name!r}; configured: {[d.name for d in self.devices]}")

    @property
    def cuda_devices(self) -> tuple[DeviceEntry, ...]:
        return tuple(d for d in self.devices if d.backend == "cuda")


def load_schema(path: Path = CONFIG_SCHEMA) -> dict[str, Any]:
    """The run-config schema, with each experiment family's fragment
    (config/schemas/experiments/<name>.schema.yaml) added under `experiments`."""
    with open(path) as f:
        schema = yamlio.safe_load(f)
    props = schema["$defs"]["experiments"]["properties"]
    for fragment in sorted((path.parent / "experiments").glob("*.schema.yaml")):
        with open(fragment) as f:
            doc = yamlio.safe_load(f)
        props[doc["experiment"]] = {**doc["schema"], "default": {}}
    return schema


_FORMS = {"sizeRange": "a range {start, stop, step}"}  # how an error names a schema $def


def _key_path(parts) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


_YAML_KIND = {
    "array": "a list",
    "object": "a mapping",
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "boolean": "true or false",
}


def _kind_of(value: Any) -> str:
    if isinstance(value, dict):
        return f"a mapping with keys {sorted(map(str, value))}"
    if isinstance(value, list):
        return "a list"
    return f"{value!r}"


def _type_error(key: str, value: Any, schema: dict[str, Any]) -> str:
    """A wrong shape, with what the key is for and an example of the right shape."""
    wanted = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    allowed = " or ".join(_YAML_KIND.get(t, t) for t in wanted)
    text = f"{key}: got {_kind_of(value)}; allowed: {allowed}"
    if "description" in schema:
        text += f"; the key holds: {' '.join(schema['description'].split())}"
    if schema.get("examples"):
        text += f", for example {json.dumps(schema['examples'][0])}"
    elif "default" in schema:
        text += f", for example {json.dumps(schema['default'])}"
    return text


def describe_error(err: jsonschema.ValidationError) -> str:
    """One line naming the key, the value and what is allowed."""
    key = _key_path(err.absolute_path)
    v, s = err.validator, err.schema
    if v == "additionalProperties":
        allowed = sorted(s.get("properties", {}))
        unknown = sorted(set(err.instance) - set(allowed))
        where = key if err.absolute_path else "top level"
        return f"{where}: unknown key(s) {unknown}; allowed keys: {allowed}"
    if v == "enum":
        return f"{key}: {err.instance!r} is not allowed; allowed: {', '.join(map(str, s['enum']))}"
    if v == "required":
        return f"{key}: {err.message}"
    if v in ("minimum", "maximum", "exclusiveMinimum"):
        return f"{key}: {err.instance!r} is out of range; allowed: {v} {s[v]}"
    if v == "type":
        return _type_error(key, err.instance, s)
    if v == "pattern":
        return f"{key}: {err.instance!r} does not match the allowed form {s['pattern']}"
    if v == "multipleOf":
        return f"{key}: {err.instance!r} is not allowed; allowed: a multiple of {s['multipleOf']}"
    if v in ("anyOf", "oneOf"):
        # a mapping meant the range form: name what is wrong inside it
        inner = [e for e in err.context if e.validator != "const"]
        if isinstance(err.instance, dict) and inner:
            import jsonschema

            best = jsonschema.exceptions.best_match(inner)
            if best.validator == "type":  # the form's own schema: describe it by the key's
                outer = {k: s[k] for k in ("description", "examples") if k in s}
                return _type_error(key, best.instance, {**outer, **best.schema})
            return describe_error(best)
        forms = [str(o.get("const", o.get("$ref", o.get("type", "?")))) for o in s[v]]
        allowed = ", ".join(_FORMS.get(f.split("/")[-1], f.split("/")[-1]) for f in forms)
        return f"{key}: {err.instance!r} is not allowed; allowed: one of {allowed}"
    if v == "minItems":
        return f"{key}: needs at least {s['minItems']} item(s)"
    return f"{key}: {err.message}"


def _fill_defaults(
    instance: Any,
    schema: dict[str, Any],
    root: dict[str, Any],
    skip: frozenset[str] = frozenset({"experiments"}),
    depth: int = 0,
) -> None:
    """Fill `default`s from the schema into `instance` in place (objects and array items)."""
    if "$ref" in schema:
        ref = schema["$ref"].split("/")[-1]
        schema = {**root["$defs"][ref], **{k: v for k, v in schema.items() if k != "$ref"}}
    if isinstance(instance, dict):
        for key, sub in schema.get("properties", {}).items():
            if key not in instance and "default" in sub:
                instance[key] = copy.deepcopy(sub["default"])
            if key in instance:
                # per-device experiment overrides stay sparse: they are merged, then filled
                if depth > 0 and key in skip:
                    continue
                _fill_defaults(instance[key], sub, root, skip, depth + 1)
    elif isinstance(instance, list) and "items" in schema:
        for item in instance:
            _fill_defaults(item, schema["items"], root, skip, depth + 1)


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in override.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _fail_limit(key: str, what: str) -> None:
    raise ConfigError(f"config: {key}: {what} (limits: config/README.md, section Limits)")


def validate(raw: dict[str, Any], *, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """Validate a raw config against the schema; return a copy with defaults filled."""
    import jsonschema  # here, not at the top: a sweep job reads a config already validated

    schema = schema or load_schema()
    if not isinstance(raw, dict):
        raise ConfigError(f"config: expected a mapping at the top level, got {type(raw).__name__}")
    check_config_limits(raw, _fail_limit)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(raw), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        raise ConfigError("invalid config:\n  " + "\n  ".join(describe_error(e) for e in errors))
    filled = copy.deepcopy(raw)
    _fill_defaults(filled, schema, schema)
    return filled


def _check_line_source(merged: dict[str, Any], where: str) -> None:
    """constant_sets takes an `auto` line from the `caches` result: caches must run."""
    c = merged.get("constant_sets") or {}
    if c.get("enabled") and c.get("line_bytes") == AUTO and not merged["caches"]["enabled"]:
        raise ConfigError(
            f"{where}.constant_sets.line_bytes: auto takes the constant L1's line from the "
            f"`caches` experiment, which {where}.caches.enabled turns off; allowed: enable "
            "caches, or give line_bytes (e.g. 64)"
        )


def _typed_params(merged: dict[str, Any], where: str, only: str | None = None) -> dict[str, Any]:
    from .families import FAMILIES

    return {
        name: fam.parse_params(merged[name], f"{where}.{name}")
        for name, fam in FAMILIES.items()
        if name in merged and only in (None, name)
    }


def check_stride_and_sizes(sizes: SizeRange, stride_bytes: int, key: str) -> None:
    """Shared checks of a size sweep: stop >= start, stride within the smallest array."""
    if sizes.stop < sizes.start:
        raise ConfigError(
            f"{key}.array_bytes.stop: {sizes.stop} is below start {sizes.start}; "
            "allowed: stop >= start"
        )
    if stride_bytes > sizes.start:
        raise ConfigError(
            f"{key}.stride_bytes: {stride_bytes} is larger than the smallest array "
            f"({key}.array_bytes.start = {sizes.start}); allowed: a stride up to the smallest "
            "array size"
        )


def _check_profile(path: Path, key: str, *, carveouts: bool = False) -> None:
    """Load the device profile as the simulator will, so a broken one (ways that do not divide
    the lines, a negative latency, a 48-byte line) stops the run before any job starts; a sim
    device given `carveouts` needs a profile with a `carveout` block."""
    from .sim.profile import load_profile

    try:
        profile = load_profile(path)
    except ProfileError as exc:
        raise ConfigError(f"{key}: the device profile is invalid: {exc}") from None
    if carveouts and profile.carveout is None:
        raise ConfigError(
            f"{key.rsplit('.', 1)[0]}.carveouts: the profile {path} has no carveout block, so "
            "its L1 does not follow a carveout; allowed: carveouts only with a profile that "
            "has one (config/README.md, device profiles)"
        )


NODE_EXPERIMENT = "node"


def _sim_node_profile(entry: dict[str, Any], base_dir: str | os.PathLike) -> bool:
    """Whether a sim device's profile describes a node (has a `links:` block)."""
    path = Path(base_dir, entry.get("profile", ""))
    if not path.is_file():
        return False  # the device's own check names the missing file
    with open(path) as f:
        doc = yamlio.safe_load(f)
    return isinstance(doc, dict) and "links" in doc


def node_members(cfg: dict[str, Any], *, base_dir: str | os.PathLike = ".") -> dict[str, list]:
    """The devices that run the node experiment, each with the node's GPUs (name and CUDA
    index; [] for a sim device, whose profile's links block has them). The top-level `node`:
    `auto` (the default) - a node of the cuda devices when there are two or more with distinct
    indices and the same Slurm placement (GPUs of one host; a fleet of one GPU per host is no
    node); `true` - that, or every sim device whose profile has a links block, and an error
    where there is neither; `false` - none. The node's first cuda device runs it."""
    mode = cfg.get("node", AUTO)
    if mode is False:
        return {}
    cuda = [(i, d) for i, d in enumerate(cfg["devices"]) if d["backend"] == "cuda"]
    indices = [d.get("index", 0) for _, d in cuda]
    places = {(d.get("partition"), d.get("gpu_model")) for _, d in cuda}
    one_host = len(cuda) >= 2 and len(set(indices)) == len(indices) and len(places) == 1
    members: dict[str, list] = {}
    if one_host:
        members[cuda[0][1]["name"]] = [
            {"name": d["name"], "index": d.get("index", 0)} for _, d in cuda
        ]
    if mode is True:
        for d in cfg["devices"]:
            if d["backend"] == "sim" and _sim_node_profile(d, base_dir):
                members[d["name"]] = []
        if not members:
            why = (
                f"the cuda devices share an index ({indices}) or differ in partition or "
                "gpu_model, so they are no GPUs of one host"
                if len(cuda) >= 2
                else f"the config has {len(cuda)} cuda device(s) and no sim device whose "
                "profile has a links block"
            )
            raise ConfigError(
                f"node: true, but {why}; allowed: two or more cuda devices of one host "
                "(distinct devices[].index), or a sim device whose profile has a links block "
                "(for example tests/data/node2_sim.yaml), or node: false"
            )
    return members


def parse(
    raw: dict[str, Any],
    *,
    base_dir: str | os.PathLike = ".",
    sweep: tuple[str, str] | None = None,
) -> RunConfig:
    """Validate and type a run config. Relative profile paths resolve against `base_dir`.

    `sweep` = (device, experiment): the view of one sweep job of a run whose config the
    workflow has parsed in full before any job started. The schema is not checked again nor
    the device profiles loaded (a second or so of every job on a GPU host, most of it
    importing and compiling the schema validators), only that device (or the cuda entry of
    that twin) is built, and only that experiment's parameters are typed."""
    schema = load_schema()
    if sweep is None:
        cfg = validate(raw, schema=schema)
    else:
        cfg = copy.deepcopy(raw)
        _fill_defaults(cfg, schema, schema)
    names = [d["name"] for d in cfg["devices"]]
    for i, name in enumerate(names):
        if names.index(name) != i:
            raise ConfigError(f"devices[{i}].name: {name!r} is used twice; allowed: unique names")
    node = node_members(cfg, base_dir=base_dir)
    devices = []
    for i, d in enumerate(cfg["devices"]):
        where = f"devices[{i}]"
        if sweep is not None and sweep[0] not in (d["name"], d["name"] + TWIN_SUFFIX):
            continue
        if d["backend"] == "sim":
            if "profile" not in d:
                raise ConfigError(
                    f"{where}.profile: missing; a sim device needs a device profile "
                    "(for example config/devices/gtx560ti.yaml)"
                )
            profile = Path(base_dir, d["profile"])
            if not profile.is_file():
                raise ConfigError(
                    f"{where}.profile: file {d['profile']!r} does not exist "
                    f"(resolved to {profile}); allowed: a path to a device "
                    "profile YAML file"
                )
            if sweep is None:
                _check_profile(
                    profile, f"{where}.profile", carveouts="carveouts" in raw["devices"][i]
                )
            for k in ("arch", "partition", "gpu_model", "twin"):
                if k in raw["devices"][i]:
                    raise ConfigError(f"{where}.{k}: only for backend cuda, not sim")
        else:
            profile = None
            if "profile" in d:
                raise ConfigError(f"{where}.profile: only for backend sim, not cuda")
        merged = _merge(cfg["experiments"], d.get("experiments", {}))
        # fill defaults of any section the override brought in partially
        wrapper = {"experiments": merged}
        _fill_defaults(
            wrapper, {"properties": {"experiments": schema["$defs"]["experiments"]}}, schema
        )
        merged = wrapper["experiments"]
        if NODE_EXPERIMENT in merged:  # the node's first device runs it, no other one
            merged[NODE_EXPERIMENT] = {
                **merged[NODE_EXPERIMENT],
                "enabled": d["name"] in node,
                "gpus": node.get(d["name"], []),
            }
        exp_where = f"{where}.experiments" if d.get("experiments") else "experiments"
        _check_line_source(merged, exp_where)
        devices.append(
            DeviceEntry(
                name=d["name"],
                backend=d["backend"],
                profile=profile,
                seed=d["seed"],
                index=d["index"],
                arch=d.get("arch") or (cfg.get("cuda_arch") if d["backend"] == "cuda" else None),
                carveouts=tuple(d["carveouts"]),
                partition=d.get("partition"),
                gpu_model=d.get("gpu_model"),
                experiments=merged,
                params=_typed_params(merged, exp_where, None if sweep is None else sweep[1]),
            )
        )
    built = {d.name for d in devices}
    for i, raw_d in enumerate(cfg["devices"]):
        if not raw_d.get("twin") or raw_d["name"] not in built:
            continue
        d = next(e for e in devices if e.name == raw_d["name"])
        if d.name + TWIN_SUFFIX in names:
            raise ConfigError(
                f"devices[{i}].twin: its twin would be named {d.name + TWIN_SUFFIX!r}, which "
                "another device entry uses; allowed: twin: false, or rename that entry"
            )
        devices.append(twin_device(d))
    b = cfg["build"]
    return RunConfig(
        devices=tuple(devices),
        build=BuildConfig(nvcc=b["nvcc"], nvcc_flags=tuple(b["nvcc_flags"])),
        report_title=cfg["report"]["title"],
        repeats=cfg["repeats"],
    )


# the experiments a twin runs: those the topology document needs (config/topology_only.yaml)
# and the structure below the sizes that the twin carries (the L1's eviction sets, the L2's
# slice map and partitions, the TLB levels and their coalescing), so that the agreement
# compares them too
TOPOLOGY_EXPERIMENTS = (
    "cache_stage1",
    "cache_sharing",
    "cache_instances",
    "l2",
    "bank_conflicts",
    "timing_overhead",
    "bandwidth",  # the L1 a kernel without shared memory gets heads the topology's L1 size
)
STRUCTURE_EXPERIMENTS = ("l1_sets", "l2_slices", "tlbs", "tlb_mappings", "l1_size")
TWIN_EXPERIMENTS = TOPOLOGY_EXPERIMENTS + STRUCTURE_EXPERIMENTS
TWIN_SUFFIX = "_twin"


def twin_profile_path(gpu: str) -> Path:
    """Where rule make_twin_profile writes the twin of cuda device `gpu`."""
    return Path("results/twins", f"{gpu}.yaml")


def twin_device(gpu: DeviceEntry) -> DeviceEntry:
    """The sim device that runs the twin of cuda device `gpu` (its entry says `twin: true`): the
    profile is generated during the run, so it is not checked here; the twin runs the
    topology's experiments with the GPU's own settings."""
    experiments = {
        name: {**section, "enabled": section.get("enabled", True) and name in TWIN_EXPERIMENTS}
        for name, section in gpu.experiments.items()
    }
    return dataclasses.replace(
        gpu,
        name=gpu.name + TWIN_SUFFIX,
        backend="sim",
        profile=twin_profile_path(gpu.name),
        arch=None,
        # followed where the twin's profile has a carveout block (the GPU's L1 per carveout)
        carveouts=gpu.carveouts,
        partition=None,
        gpu_model=None,
        experiments=experiments,
        twin_of=gpu.name,
    )


def load(path: str | os.PathLike, *, base_dir: str | os.PathLike = ".") -> RunConfig:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    with open(path) as f:
        try:
            raw = yamlio.safe_load(f)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML ({exc})") from exc
    if raw is None:
        raise ConfigError(
            f"{path}: the config file is empty; it needs at least a `devices:` list "
            "(see config/config.yaml and config/README.md)"
        )
    try:
        return parse(raw, base_dir=base_dir)
    except ConfigError as exc:
        if str(exc).startswith(str(path)):
            raise
        raise ConfigError(f"{path}: {exc}") from None
