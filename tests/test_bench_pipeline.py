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
