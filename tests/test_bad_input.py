"""The bad-input table of config/README.md ("Bad input and faults"), one test per row: each bad
input is refused before any job runs, with a message naming the key or file, the value and what
is allowed. (The interrupted and edited runs are in test_workflow.py.)"""

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpudissect.cli import build_parser, main
from gpudissect.config import load, parse
from gpudissect.exceptions import ConfigError

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "data" / "tiny_profile.yaml"


def _profile(tmp_path, old: str, new: str) -> Path:
    """The tiny profile with its first `old` replaced by `new`."""
    text = TINY.read_text()
    assert old in text
    path = tmp_path / "broken.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


def _config(tmp_path, profile: Path, **experiments) -> Path:
    doc = {"devices": [{"name": "twin", "backend": "sim", "profile": str(profile)}]}
    if experiments:
        doc["experiments"] = experiments
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        # 2 KiB of 128-B lines are 16 lines: they do not divide into sets of 3 ways
        ("ways: 4", "ways: 3", "caches.l1d.ways: 16 lines/entries do not divide into sets of 3"),
        ("hit_latency_cycles: 40", "hit_latency_cycles: -5", "hit_latency_cycles: -5 is negative"),
        ("line_bytes: 128", "line_bytes: 48", "caches.l1d.line_bytes: 48 is not a power of two"),
    ],
    ids=["ways-do-not-divide-lines", "negative-latency", "48-byte-line"],
)
def test_broken_profile_refused_with_the_run_config_and_by_validate(
    tmp_path, capsys, old, new, expected
):
    config = _config(tmp_path, _profile(tmp_path, old, new))
    with pytest.raises(ConfigError) as err:
        load(config)
    assert "devices[0].profile: the device profile is invalid" in str(err.value)
    assert expected in str(err.value)
    assert main(["validate", "--config", str(config)]) == 2
    assert expected in capsys.readouterr().err


def test_a_sound_profile_still_validates(tmp_path, capsys):
    assert main(["validate", "--config", str(_config(tmp_path, TINY))]) == 0
    assert "valid (1 device(s): twin)" in capsys.readouterr().out


def test_missing_config_file_named(tmp_path, capsys):
    missing = tmp_path / "nosuch.yaml"
    assert main(["validate", "--config", str(missing)]) == 2
    assert f"config file {str(missing)!r} does not exist" in capsys.readouterr().err


def test_yaml_indentation_error_gets_its_line(tmp_path, capsys):
    bad = tmp_path / "indent.yaml"
    bad.write_text("devices:\n  - name: a\n   backend: sim\n")
    assert main(["validate", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "indent.yaml: not valid YAML" in err and "line 3" in err


def test_l2_array_bytes_of_the_wrong_shape_says_what_it_holds():
    cfg = {
        "devices": [{"name": "twin", "backend": "sim", "profile": str(TINY)}],
        "experiments": {"l2": {"array_bytes": {"start": 512, "stop": 4096, "step": 256}}},
    }
    with pytest.raises(ConfigError) as err:
        parse(cfg)
    text = str(err.value)
    assert "experiments.l2.array_bytes: got a mapping with keys ['start', 'step', 'stop']" in text
    assert "allowed: a list" in text and "Footprints swept in bytes" in text
    assert "for example [65536, 131072" in text


def test_l2_contiguous_placement_with_a_stride_not_a_multiple_of_8_is_refused():
    cfg = {
        "devices": [{"name": "twin", "backend": "sim", "profile": str(TINY)}],
        "experiments": {"l2": {"stride_bytes": 36, "placement": "contiguous"}},
    }
    with pytest.raises(ConfigError) as err:
        parse(cfg)
    text = str(err.value)
    assert "experiments.l2.stride_bytes: 36 with placement contiguous" in text
    assert "allowed: a multiple of 8, or placement allocator" in text


def test_report_of_an_unknown_device_is_refused(tmp_path, capsys):
    (tmp_path / "analysis" / "real").mkdir(parents=True)
    (tmp_path / "analysis" / "real" / "l1_size.json").write_text("{}")
    out = tmp_path / "report.md"
    argv = ["report", "--device", "nosuch", "--analysis", str(tmp_path / "analysis")]
    assert main([*argv, "--figures", str(tmp_path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no result documents for device 'nosuch'" in err and "here ['real']" in err
    assert not out.exists()


def test_run_without_experiment_is_refused(capsys):
    argv = ["run", "--config", "c.yaml", "--device", "d", "--out", "t.parquet"]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "the following arguments are required: --experiment" in capsys.readouterr().err


def test_plot_with_no_processes_is_refused(tmp_path, capsys):
    argv = ["plot", "--experiment", "l2", "--trace", "t.parquet", "--analysis", "a.json"]
    assert main([*argv, "--out-dir", str(tmp_path), "--jobs", "0"]) == 2
    assert "plot --jobs: 0; allowed: a whole number of at least 1" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing was drawn or left behind


def test_plot_starts_no_more_processes_than_usable_cpus(tmp_path, monkeypatch):
    # a cluster run gives a local figure job all the threads its rule asks for (8), whatever
    # the host has: on one usable CPU every experiment is drawn in this process, none forked
    import concurrent.futures

    from gpudissect import cli

    drawn = []
    monkeypatch.setattr(cli.os, "sched_getaffinity", lambda pid: {0})
    monkeypatch.setattr(cli, "_draw_experiment", lambda name, *rest: drawn.append(name))
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", None)  # a fork would fail
    exps = ["l2", "l1_size", "bank_conflicts"]
    argv = ["plot", "--experiment", *exps, "--trace", "a", "b", "c", "--analysis", "d", "e", "f"]
    cli._draw_figures(build_parser().parse_args([*argv, "--out-dir", ".", "--jobs", "8"]), tmp_path)
    assert drawn == exps


def test_analyze_takes_the_experiment_from_the_trace(tmp_path, capsys):
    from test_traces import PROV, _frame

    from gpudissect.experiments import l1_size
    from gpudissect.traces import write_trace

    trace = write_trace(tmp_path / "t.parquet", _frame(), schema=l1_size.SCHEMA, provenance=PROV)
    out = tmp_path / "a.json"
    assert main(["analyze", "--trace", str(trace), "--out", str(out)]) == 0
    assert '"analysis": "l1_size"' in out.read_text()
    argv = ["analyze", "--experiment", "l2", "--trace", str(trace), "--out", str(out)]
    assert main(argv) == 2
    assert "was written by experiment 'l1_size'" in capsys.readouterr().err


def test_analyze_refuses_a_trace_whose_columns_are_not_its_experiments(tmp_path, capsys):
    import numpy as np
    import pyarrow as pa
    from test_traces import PROV, _frame

    from gpudissect.experiments import l1_size
    from gpudissect.traces import write_trace

    at = l1_size.SCHEMA.get_field_index("latency_cycles")
    schema = l1_size.SCHEMA.set(at, pa.field("latency_cycles", pa.float64()))
    frame = _frame().astype({"latency_cycles": np.float64})
    trace = write_trace(tmp_path / "w.parquet", frame, schema=schema, provenance=PROV)
    out = tmp_path / "a.json"
    assert main(["analyze", "--trace", str(trace), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{trace}: schema does not match the experiment's declared schema" in err
    assert "latency_cycles: double" in err and not out.exists()


def test_analyze_refuses_to_write_its_table_over_the_trace(tmp_path, capsys):
    # `--out X.json` puts the figure table at X.parquet: with the trace at that path it would
    # be overwritten
    from test_traces import PROV, _frame

    from gpudissect.experiments import l1_size
    from gpudissect.traces import write_trace

    trace = write_trace(tmp_path / "t.parquet", _frame(), schema=l1_size.SCHEMA, provenance=PROV)
    before = trace.read_bytes()
    assert main(["analyze", "--trace", str(trace), "--out", str(tmp_path / "t.json")]) == 2
    err = capsys.readouterr().err
    assert "analyze --out" in err and "the trace being read" in err
    assert trace.read_bytes() == before and not (tmp_path / "t.json").exists()


def _options(parser):
    for action in parser._actions:
        if hasattr(action, "choices") and isinstance(action.choices, dict):
            for name, sub in action.choices.items():
                yield from ((f"{name} {o}", h) for o, h in _options(sub))
        elif action.option_strings:
            yield "/".join(action.option_strings), action.help


def test_every_cli_option_has_help():
    options = list(_options(build_parser()))
    assert len(options) > 25
    assert [o for o, h in options if not h] == []


def _workflow_copy(tmp_path) -> Path:
    work = tmp_path / "work"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc")
    for item in ("Snakefile", "workflow", "config", "kernels", "envs", "profiles"):
        src = REPO / item
        if src.is_dir():
            shutil.copytree(src, work / item, ignore=ignore)
        else:
            work.mkdir(exist_ok=True)
            shutil.copy(src, work / item)
    return work


def _snakemake(work, *args):
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_zero_cores_refused(tmp_path):
    proc = _snakemake(_workflow_copy(tmp_path), "--cores", "0", "--dry-run")
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "--cores 0: no job could start; allowed: --cores N with N >= 1" in out


@pytest.mark.skipif(importlib.util.find_spec("pycuda") is not None, reason="pycuda is here")
def test_cuda_device_without_pycuda_stops_before_any_job(tmp_path):
    work = _workflow_copy(tmp_path)
    (work / "gpu.yaml").write_text(
        yaml.safe_dump({"devices": [{"name": "g", "backend": "cuda", "arch": "sm_90"}]})
    )
    proc = _snakemake(work, "--cores", "1", "--configfile", "gpu.yaml")
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "devices ['g'] use backend cuda: pycuda is not installed on this host" in out
    assert not (work / "results").exists() and not (work / "logs").exists()  # nvcc never ran
    dry = _snakemake(work, "--cores", "1", "--dry-run", "--configfile", "gpu.yaml")
    assert dry.returncode == 0, dry.stderr[-2000:]  # planning a GPU run needs no GPU


def test_missing_configfile_stops_snakemake_naming_the_file(tmp_path):
    # Snakemake reads --configfile before the workflow runs, so the message is Snakemake's own
    proc = _snakemake(_workflow_copy(tmp_path), "--cores", "1", "--configfile", "nosuch.yaml")
    assert proc.returncode != 0 and "nosuch.yaml" in proc.stdout + proc.stderr


def test_every_row_of_the_bad_input_table_names_a_test_that_exists():
    """config/README.md's table of bad inputs: each row's last cell names the tests that hold it
    (`file.py::test`; `::test` in the file of the name before; `...[case]`, a case of the test
    named before)."""
    text = (Path(__file__).resolve().parents[1] / "config/README.md").read_text()
    section = text[text.index("## Bad input and faults") :].split("\n## ", 1)[0]
    rows = [r for r in section.splitlines() if r.startswith("| ") and "| --- |" not in r][1:]
    assert len(rows) >= 20
    last_file = last_test = ""
    for row in rows:
        names = re.findall(r"`([^`]*::[^`]+|\.\.\.\[[^`]+\])`", row.rstrip(" |").split(" | ")[-1])
        assert names, row
        for name in names:
            if name.startswith("..."):
                assert last_test, row  # a case of the test named before
                continue
            file, test = name.split("::", 1)
            last_file, last_test = file or last_file, test.split("[")[0]
            source = (Path(__file__).parent / last_file).read_text()
            assert f"def {last_test}(" in source, (row, name)


@pytest.mark.skipif(shutil.which("latexmk") is not None, reason="latexmk is installed here")
def test_missing_latexmk_is_said_again_where_the_run_ends(tmp_path):
    work = _workflow_copy(tmp_path)
    shutil.copytree(REPO / "tests" / "data", work / "tests" / "data")
    target = "results/traces/tiny/l1_size.parquet"
    proc = _snakemake(work, target, "--cores", "1", "--configfile", "tests/data/tiny_config.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    notice = "latexmk not found: report.pdf"
    assert out.count(notice) >= 2  # once as the targets are planned, once at the end
    assert out.rindex(notice) > out.rindex("steps (100%) done")
