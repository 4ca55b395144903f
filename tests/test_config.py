"""Run-config validation: bad input is refused before any job runs, naming key, value, allowed."""

import copy
from pathlib import Path

import pytest
import yaml

from gpudissect.config import load, parse
from gpudissect.exceptions import ConfigError

REPO = Path(__file__).resolve().parents[1]
GOOD = {
    "devices": [{"name": "twin", "backend": "sim", "profile": "tests/data/tiny_profile.yaml"}],
    "experiments": {"l1_size": {"array_bytes": {"start": 1024, "stop": 4096, "step": 256}}},
}


def _with(path: str, value):
    cfg = copy.deepcopy(GOOD)
    node = cfg
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[int(k)] if k.isdigit() else node.setdefault(k, {})
    node[keys[-1]] = value
    return cfg


def test_good_config_gets_defaults():
    cfg = parse(GOOD, base_dir=REPO)
    d = cfg.devices[0]
    assert d.backend == "sim" and d.seed == 0
    assert d.params["l1_size"].path == "ca" and d.params["l1_size"].stride_bytes == 128
    assert d.params["l1_size"].array_bytes.sizes()[:2] == (1024, 1280)


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("devices.0.backend", "opencl", ["devices[0].backend", "'opencl'", "sim, cuda"]),
        (
            "devices.0.profile",
            "no/such/profile.yaml",
            ["devices[0].profile", "no/such/profile.yaml", "does not exist"],
        ),
        (
            "experiments.l1_size.array_bytes.start",
            0,
            ["experiments.l1_size.array_bytes.start", "0", "minimum 1"],
        ),
        (
            "experiments.l1_size.array_bytes.start",
            -4096,
            ["experiments.l1_size.array_bytes.start", "-4096", "minimum 1"],
        ),
        (
            "experiments.l1_size.stride_bytes",
            8192,
            ["experiments.l1_size.stride_bytes", "8192", "larger than the smallest array"],
        ),
        ("experiments.l1_size.path", "ld", ["experiments.l1_size.path", "'ld'", "ca, cg, nc"]),
        ("devices.0.colour", "red", ["devices[0]", "unknown key", "colour", "allowed keys"]),
        ("experiments.l1_size.stride_bytes", 6, ["stride_bytes", "6", "multiple of 4"]),
    ],
)
def test_bad_config_names_key_value_and_allowed(path, value, expected):
    with pytest.raises(ConfigError) as err:
        parse(_with(path, value), base_dir=REPO)
    for text in expected:
        assert text in str(err.value)


def test_unknown_top_level_key():
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['experimnts'\]"):
        parse({**GOOD, "experimnts": {}}, base_dir=REPO)


def test_duplicate_device_names():
    cfg = copy.deepcopy(GOOD)
    cfg["devices"].append(dict(cfg["devices"][0]))
    with pytest.raises(ConfigError, match=r"devices\[1\].name: 'twin' is used twice"):
        parse(cfg, base_dir=REPO)


def test_shared_buffer_too_small_for_records():
    cfg = _with("experiments.l1_size.shared_buffer_bytes", [4096])
    cfg["experiments"]["l1_size"]["max_record_steps"] = 1024
    with pytest.raises(ConfigError, match="cannot hold 1024 records"):
        parse(cfg, base_dir=REPO)


def test_per_device_overrides_merge_over_top_level():
    cfg = copy.deepcopy(GOOD)
    cfg["devices"][0]["experiments"] = {"l1_size": {"stride_bytes": 256}}
    d = parse(cfg, base_dir=REPO).devices[0]
    assert d.params["l1_size"].stride_bytes == 256
    # from the top level, not the schema default
    assert d.params["l1_size"].array_bytes.start == 1024


def test_cuda_only_keys_refused_on_sim():
    with pytest.raises(ConfigError, match=r"devices\[0\].arch: only for backend cuda"):
        parse(_with("devices.0.arch", "sm_90"), base_dir=REPO)
    # carveouts only where the profile's L1 follows one (tests/sim/test_carveout.py)
    with pytest.raises(ConfigError, match=r"devices\[0\].carveouts: the profile .* no carveout"):
        parse(_with("devices.0.carveouts", [100]), base_dir=REPO)


@pytest.mark.parametrize("name", ["config.yaml", "gpu.yaml"])
def test_shipped_configs_are_valid(name, monkeypatch):
    monkeypatch.chdir(REPO)
    cfg = load(REPO / "config" / name)
    assert cfg.devices


def test_snakemake_refuses_bad_config_before_any_job(tmp_path):
    import subprocess
    import sys

    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"devices": [{"name": "x", "backend": "opencl"}]}))
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "--dry-run", "--configfile", str(bad)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0
    assert (
        "devices[0].backend: 'opencl' is not allowed; allowed: sim, cuda"
        in proc.stderr + proc.stdout
    )


@pytest.mark.parametrize("path", ["config/config.yaml", "config/gpu.yaml"])
def test_a_sweep_jobs_view_is_the_full_parse_of_its_device_and_experiment(path):
    # run_sweep types only its own device and experiment, without the schema check the
    # workflow made before any job: what it gets must be what the full parse gives
    import dataclasses

    raw = yaml.safe_load((REPO / path).read_text())
    raw["cuda_arch"] = "sm_90"
    for d in raw["devices"]:
        if d["backend"] == "cuda":
            d["twin"] = True  # and the twin of a GPU entry, built from it
    full = parse(raw, base_dir=REPO)
    assert any(d.twin_of for d in full.devices) == (path == "config/gpu.yaml")
    for d in full.devices:
        for exp, params in d.params.items():
            view = parse(raw, base_dir=REPO, sweep=(d.name, exp)).device(d.name)
            assert view.params == {exp: params}
            assert dataclasses.replace(view, params=d.params) == d
