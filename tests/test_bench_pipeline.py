"""benchmarks/bench_pipeline.py's list of a run's longest jobs, read from the rules'
benchmark files."""

from benchmark_module import load_benchmark


def _bench():
    return load_benchmark("bench_pipeline")


HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time"


def test_longest_jobs_come_first_with_their_rule_and_wildcards(tmp_path):
    folder = tmp_path / "results" / "benchmarks"
    rows = {"run_sweep/a_l2": (3.5, 0.1), "run_sweep/b_requests": (7.25, 6.5), "plot/a": (5.0, 9.0)}
    for name, (wall, cpu) in rows.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        line = f"{wall}\t0:00:0{int(wall)}\t25\t30\t14\t16\t0\t0\t0\t{cpu}"
        (folder / f"{name}.tsv").write_text(f"{HEADER}\n{line}\n")
    (folder / "plot" / "empty.tsv").write_text(HEADER + "\n")  # a job cut short: no row
    got = _bench().costliest_jobs(tmp_path, 2)
    assert got == [(7.25, 6.5, "run_sweep/b_requests"), (5.0, 9.0, "plot/a")]


def test_the_readme_block_holds_each_targets_twins_sweeps_and_time_and_nothing_else_changes():
    bench = _bench()
    text = (
        "before\n<!-- begin pipeline times (written by make bench) -->\nold table\n"
        "<!-- end pipeline times -->\nafter\n"
    )
    block = bench.times_block(
        [("lashgar", 4, 59.7), ("thesis", 5, 40.4)],
        (194, 150.2),
        host="2 CPUs (x86_64)",
        day="2026-12-07",
        load=("0.10 0.20 0.30", "1.00 1.10 1.20"),
    )
    got = bench.replace_block(text, "pipeline times", block)
    head, rest = got.split("<!-- begin pipeline times (written by make bench) -->\n")
    body, tail = rest.split("<!-- end pipeline times -->")
    assert head == "before\n" and tail == "\nafter\n" and "old table" not in got
    rows = [line for line in body.splitlines() if line.startswith("| `snakemake")]
    lashgar = bench.STUDIES["lashgar"]
    assert rows[0] == (
        f"| `snakemake --cores 1 lashgar` | {lashgar.title} | {', '.join(lashgar.devices)} | 4 "
        "| 60 s |"
    )
    assert rows[1].endswith("| 5 | 40 s |") and len(rows) == 2
    assert "the default pipeline (`snakemake --cores 2`, 194 sweeps) 150 s" in body
    assert "on 2026-12-07, 2 CPUs (x86_64)" in body and "0.10 0.20 0.30 before" in body
    # the same block written again replaces itself, nothing around it
    assert bench.replace_block(got, "pipeline times", block) == got


def test_a_readme_without_the_block_is_refused_naming_the_markers(tmp_path):
    import pytest

    with pytest.raises(SystemExit, match=r"README.md has no block from '<!-- begin pipeline"):
        _bench().replace_block("no block\n", "pipeline times", "x", source="README.md")


def test_the_readme_has_the_block_make_bench_writes():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    _bench().replace_block(readme, "pipeline times", "x")  # raises when the markers are gone
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    assert "benchmarks/bench_pipeline.py --readme README.md" in makefile


def test_the_ci_block_gives_the_commit_the_time_and_the_suite_line():
    ci = load_benchmark("bench_ci")
    line = ci.ci_block(1301.4, "fe859acae6c9", "==== 1206 passed, 1 skipped in 1231.49s ====",
                       ("0.1 0.2 0.3", "2.0 2.1 2.2"))  # fmt: skip
    assert "fresh clone of fe859ac" in line and "took 21.7 minutes (1301 s)" in line
    assert line.endswith("suite: 1206 passed, 1 skipped in 1231.49s.")
    readme = (ci.REPO / "README.md").read_text()
    _bench().replace_block(readme, "ci time", line)  # the README has the block
    assert "benchmarks/bench_ci.py --readme README.md" in (ci.REPO / "Makefile").read_text()
