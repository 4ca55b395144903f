# One figure job per device: it draws the figures of every enabled experiment of the device
# (matplotlib and seaborn start once, not once per experiment), several experiments at once in
# forked processes when the job has several cores.
_names = [plot_rule_name(d) for d in DEVICES]
if len(set(_names)) != len(_names):
    raise WorkflowError(
        f"gpudissect: devices: names {sorted(DEVICES)} give clashing figure rules {_names}; "
        "make them differ in more than '.' and '-'"
    )

for _device in DEVICES:
    _exps = experiments_of(_device)
    if not _exps:
        continue

    rule:
        name:
            plot_rule_name(_device)
        input:
            trace=[f"results/traces/{_device}/{e}.parquet" for e in _exps],
            result=[f"results/analysis/{_device}/{e}.json" for e in _exps],
            table=figure_tables(_device),
        output:
            png=[
                report(
                    f"results/figures/{_device}/{stem}.png",
                    caption=f"../report/figures/{stem}.rst",
                    category=e,
                    subcategory=_device,
                    labels={"device": _device, "figure": f"{stem}.png"},
                )
                for e in _exps
                for stem in FAMILY[e].figures
            ],
            pdf=[f for e in _exps for f in figure_files(_device, e, "pdf")],
        log:
            f"logs/plot/{_device}.log",
        benchmark:
            f"results/benchmarks/plot/{_device}.tsv"
        localrule: True
        conda:
            ENV
        # the device's experiments are drawn in up to 8 processes at once; Snakemake gives the job
        # fewer where the run has fewer cores (a number, not workflow.cores: a cluster run has
        # no total of cores, and there `plot --jobs` stops at the host's CPUs itself)
        threads: 8
        params:
            experiments=" ".join(_exps),
            out_dir=lambda wildcards, output: Path(output.png[0]).parent,
        shell:
            "python -m gpudissect plot --experiment {params.experiments} --trace {input.trace}"
            " --analysis {input.result} --out-dir {params.out_dir} --jobs {threads} > {log} 2>&1"
