"""Bounded inputs (config/README.md, "Limits"): a size far beyond any GPU is refused with the key,
the value and the limit, at once and before any per-set structure is built.

The limits below are written out from the README's table (1 GiB caches, 2^20 sets, 2^24 lines,
2^20 TLB entries, 1 TiB config arrays, 10^6 sweep points), not read from gpudissect.limits."""

import resource
import time
from pathlib import Path

import pytest
import yaml

from gpudissect.config import load, validate
from gpudissect.exceptions import ConfigError, ProfileError
from gpudissect.sim.profile import load_profile

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "data" / "tiny_profile.yaml"


def _profile(tmp_path, change) -> Path:
    doc = yaml.safe_load(TINY.read_text())
    change(doc)
    path = tmp_path / "huge.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _refused(path) -> str:
    """The refusal message; the refusal must take well under a second and almost no memory."""
    rss_before_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    with pytest.raises(ProfileError) as exc:
        load_profile(path)
    assert time.perf_counter() - started < 1.0
    # ru_maxrss is the peak in KiB: a 2^31-entry tuple would add gigabytes
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before_kib < 50 * 1024
    return str(exc.value)


def test_l2_of_one_tib_is_refused_with_key_value_and_limit(tmp_path):
    path = _profile(tmp_path, lambda d: d["caches"]["l2"].update(size_bytes=2**40))
    msg = _refused(path)
    assert str(path) in msg
    assert "caches.l2.size_bytes" in msg
    assert "1099511627776" in msg  # 2^40, the value given
    assert "1073741824" in msg  # 1 GiB, the limit


def test_a_billion_tlb_sets_are_refused(tmp_path):
    level = {"name": "l1_tlb", "entries": 10**9, "page_bytes": 2**21, "ways": 1}
    level["miss_penalty_cycles"] = 10
    path = _profile(tmp_path, lambda d: d.update(tlbs={"levels": [level]}))
    msg = _refused(path)
    assert "tlbs.levels.0.entries" in msg and "1000000000" in msg and "1048576" in msg


def test_too_many_sets_within_the_byte_limit_are_refused(tmp_path):
    # 512 MiB of 32 B lines, direct mapped: 2^24 lines (allowed), 2^24 sets (over 2^20)
    path = _profile(
        tmp_path, lambda d: d["caches"]["l2"].update(size_bytes=2**29, line_bytes=32, ways=1)
    )
    msg = _refused(path)
    assert "caches.l2.ways" in msg and str(2**24) in msg and str(2**20) in msg


def test_too_many_lines_within_the_byte_limit_are_refused(tmp_path):
    # 1 GiB of 32 B lines is 2^25 lines, over 2^24
    path = _profile(
        tmp_path, lambda d: d["caches"]["l2"].update(size_bytes=2**30, line_bytes=32, ways=32)
    )
    msg = _refused(path)
    assert "caches.l2.size_bytes" in msg and str(2**25) in msg and str(2**24) in msg


def test_a_profile_at_real_gpu_sizes_still_loads(tmp_path):
    # an H100-like L2: 50 MiB, 128 B lines, 16 ways (25,600 sets)
    path = _profile(
        tmp_path, lambda d: d["caches"]["l2"].update(size_bytes=50 * 2**20, line_bytes=128, ways=16)
    )
    assert load_profile(path).caches["l2"].size_bytes == 50 * 2**20


def _config(**l1_size):
    return {
        "devices": [{"name": "twin", "backend": "sim", "profile": str(TINY)}],
        "experiments": {"l1_size": l1_size},
    }


def test_config_array_above_one_tib_is_refused():
    sizes = {"start": 1024, "stop": 2**41, "step": 2**40}
    with pytest.raises(ConfigError) as exc:
        validate(_config(array_bytes=sizes))
    msg = str(exc.value)
    assert "experiments.l1_size.array_bytes.stop" in msg and str(2**41) in msg
    assert str(2**40) in msg


def test_config_sweep_of_too_many_points_is_refused():
    sizes = {"start": 128, "stop": 128 + 4 * 2 * 10**6, "step": 4}
    with pytest.raises(ConfigError) as exc:
        validate(_config(array_bytes=sizes))
    msg = str(exc.value)
    assert "array_bytes.step" in msg and "2000001 points" in msg and "1000000" in msg


def test_empty_config_file_is_named(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing here\n")
    with pytest.raises(ConfigError, match=r"empty\.yaml: the config file is empty"):
        load(path)


def test_missing_config_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"absent\.yaml.*does not exist"):
        load(tmp_path / "absent.yaml")


def test_sweep_that_cannot_fit_in_memory_is_refused_before_it_starts(tmp_path, monkeypatch):
    import gpudissect.sweep as sweep

    # the tiny profile's simulator, by hand at 320 B a set and 32 B a line: l1d 2048/128 = 16
    # lines in 4 sets (1280 + 512), l2 16384/128 = 128 lines in 16 sets (5120 + 4096): 11008 B
    doc = {"devices": [{"name": "twin", "backend": "sim", "profile": str(TINY)}]}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(doc))
    device = load(tmp_path / "run.yaml").devices[0]
    monkeypatch.setattr(sweep, "available_memory_bytes", lambda: 10000)
    opened = []
    monkeypatch.setattr(sweep, "open_backend", lambda *a, **k: opened.append(1))
    out = tmp_path / "trace.parquet"
    with pytest.raises(ConfigError) as exc:
        sweep.run_experiment(device, "l1_size", out=out)
    msg = str(exc.value)
    assert "twin/l1_size" in msg and "11008 B" in msg and "10000 B available" in msg
    assert not opened and not out.exists()
    monkeypatch.setattr(sweep, "available_memory_bytes", lambda: 11008)
    with pytest.raises(TypeError):  # it fits: the sweep goes on to open the (stubbed) backend
        sweep.run_experiment(device, "l1_size", out=out)
    assert opened


def _limit_cells() -> dict[str, str]:
    text = (REPO / "config" / "README.md").read_text()
    section = text[text.index("## Limits") :].split("\n## ", 1)[0]
    rows = [r.split(" | ") for r in section.splitlines() if r.startswith("| ") and "---" not in r]
    return {r[0].lstrip("| "): r[1] for r in rows[1:]}


def _number(cell: str) -> int:
    units = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
    cell = cell.split(" (")[0].strip()
    if "^" in cell:
        base, exp = cell.split("^")
        return int(base) ** int(exp)
    if cell.split()[-1] in units:
        return int(cell.split()[0]) * units[cell.split()[-1]]
    return int(cell)


def test_the_readme_table_of_limits_is_the_code_s():
    from gpudissect import limits

    cells = _limit_cells()
    pairs = {
        "a cache's `size_bytes`": limits.MAX_CACHE_BYTES,
        "a cache's lines (`size_bytes / line_bytes`)": limits.MAX_CACHE_LINES,
        "a cache's or TLB's sets (lines / `ways`, or `set_ways` entries)": limits.MAX_SETS,
        "`ways`, each `set_ways` entry": limits.MAX_WAYS,
        "a TLB level's `entries`": limits.MAX_TLB_ENTRIES,
        "`page_bytes`": limits.MAX_PAGE_BYTES,
        "`dram.size_bytes`": limits.MAX_DRAM_BYTES,
        "`shared.size_bytes`": limits.MAX_SHARED_BYTES,
        "`banks`": limits.MAX_BANKS,
        "any `_cycles` value": limits.MAX_LATENCY_CYCLES,
        "any other `_bytes` value of a profile": limits.MAX_ADDRESS_BYTES,
        "any other count of a profile": limits.MAX_PROFILE_COUNT,
        "the points of one size range (`start`..`stop` by `step`)": limits.MAX_SWEEP_POINTS,
        "any other count of a config (repetitions, passes, steps, threads)": (
            limits.MAX_CONFIG_COUNT
        ),
    }
    for row, constant in pairs.items():
        assert _number(cells[row]) == constant, row
    config_bytes = "any `_bytes` value of a config (array sizes, range bounds, flush buffers)"
    assert _number(cells[config_bytes]) == limits.MAX_ARRAY_BYTES
    assert cells["`sms`, `max_warps_per_sm`"] == (f"{limits.MAX_SMS}, {limits.MAX_WARPS_PER_SM}")
