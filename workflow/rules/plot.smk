for _name, _fam in FAMILY.items():

    rule:
        name:
            f"plot_{_name}"
        input:
            trace=f"results/traces/{{device}}/{_name}.parquet",
            result=f"results/analysis/{{device}}/{_name}.json",
        output:
            png=[
                report(
                    f"results/figures/{{device}}/{stem}.png",
                    caption="../report/figure.rst",
                    category=_name,
                    subcategory="{device}",
                )
                for stem in _fam.figures
            ],
            pdf=[f"results/figures/{{device}}/{stem}.pdf" for stem in _fam.figures],
        log:
            f"logs/plot_{_name}/{{device}}.log",
        conda:
            ENV
        params:
            experiment=_name,
        shell:
            "python -m gpudissect plot --experiment {params.experiment} --trace {input.trace}"
            " --analysis {input.result} --out-dir results/figures/{wildcards.device}"
            " > {log} 2>&1"
