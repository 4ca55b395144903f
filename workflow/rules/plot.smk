# Figure jobs. A simulated device gets one figure job, `plot_<device>`: its sweeps keep the CPUs
# busy, so matplotlib and seaborn start once for all its experiments, drawn several at once in
# forked processes when the job has several cores. A CUDA device gets one figure job per
# experiment, `plot_<device>_<experiment>`: its sweeps run one after another on the GPU while the
# host's CPUs wait, so each experiment's figures are drawn as soon as its analysis lands, beside
# the sweeps that follow, and the run does not end with every figure still to draw.


def _figure_jobs():
    """(rule name, log and benchmark stem, device, experiments) of every figure job."""
    jobs = []
    for device in DEVICES:
        exps = experiments_of(device)
        if DEVICES[device].backend == "cuda":
            jobs += [
                (f"{plot_rule_name(device)}_{e}", f"{device}/{e}", device, [e])
                for e in exps
            ]
        elif exps:
            jobs.append((plot_rule_name(device), device, device, exps))
    return jobs


_FIGURE_JOBS = _figure_jobs()
_names = [job[0] for job in _FIGURE_JOBS]
if len(set(_names)) != len(_names):
    raise WorkflowError(
        f"gpudissect: devices: names {sorted(DEVICES)} give clashing figure rules "
        f"{sorted({n for n in _names if _names.count(n) > 1})}; make them differ in more than "
        "'.' and '-', and no device name the figure rule of another's experiment"
    )

for _name, _stem, _device, _exps in _FIGURE_JOBS:

    rule:
        name:
            _name
        input:
            trace=[f"results/traces/{_device}/{e}.parquet" for e in _exps],
            result=[f"results/analysis/{_device}/{e}.json" for e in _exps],
            table=[t for t in figure_tables(_device) if Path(t).stem in _exps],
        output:
            png=[
                report(
                    f"results/figures/{_device}/{stem}.png",
                    # written by the job beside the figure, from what it drew; absolute, as
                    # Snakemake reads a caption relative to this file, not to the working folder
                    caption=os.path.abspath(f"results/figures/{_device}/{stem}.rst"),
                    category=e,
                    subcategory=_device,
                    labels={"device": _device, "figure": f"{stem}.png"},
                )
                for e in _exps
                for stem in FAMILY[e].figures
            ],
            pdf=[f for e in _exps for f in figure_files(_device, e, "pdf")],
            caption=[f for e in _exps for f in figure_files(_device, e, "rst")],
        log:
            f"logs/plot/{_stem}.log",
        benchmark:
            f"results/benchmarks/plot/{_stem}.tsv"
        localrule: True
        conda:
            ENV
        # a device's experiments are drawn in up to 8 processes at once; Snakemake gives the job
        # fewer where the run has fewer cores (a number, not workflow.cores: a cluster run has
        # no total of cores, and there `plot --jobs` stops at the host's CPUs itself)
        threads: min(8, len(_exps))
        params:
            experiments=" ".join(_exps),
            out_dir=lambda wildcards, output: Path(output.png[0]).parent,
        shell:
            "python -m gpudissect plot --experiment {params.experiments} --trace {input.trace}"
            " --analysis {input.result} --out-dir {params.out_dir} --jobs {threads} > {log} 2>&1"
