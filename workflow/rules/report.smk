rule render_report:
    input:
        targets=[t for name in REPORTED for t in device_targets(name)],
        topology=topology_files(REPORTED),
        twins=twin_agreements(),
    output:
        md="results/report/report.md",
        tex="results/report/report.tex",
        tables=[
            report(
                f"results/report/tables/{t}.csv",
                caption="../report/table.rst",
                category="tables",
                labels={"table": t},
            )
            for t in report_tables()
        ],
    log:
        "logs/render_report/render_report.log",
    # a few seconds of CPU: on a cluster it runs where the run started, not as a job
    localrule: True
    conda:
        ENV
    params:
        args=report_args(REPORTED, "results/report/tables", report_tables()),
        title=RUN.report_title,
    shell:
        "python -m gpudissect report {params.args} --title {params.title:q}"
        " --out {output.md} --tex {output.tex} > {log} 2>&1"


rule render_study_report:
    input:
        study_targets,
    output:
        md="results/report/{study}.md",
        tex="results/report/{study}.tex",
        tables=directory("results/report/{study}_tables"),
    log:
        "logs/render_report/{study}.log",
    wildcard_constraints:
        study="|".join(STUDIES),
    conda:
        ENV
    params:
        args=lambda wc, output: report_args(
            RUN_STUDIES.get(wc.study, []),
            output.tables,
            report_tables(wc.study),
            f"results/topology/{wc.study}",
        ),
        title=lambda wc: f"gpudissect: {STUDIES[wc.study].title} reproduced",
    shell:
        "python -m gpudissect report {params.args} --study {wildcards.study}"
        " --title {params.title:q} --out {output.md} --tex {output.tex} > {log} 2>&1"


rule compile_report_pdf:
    input:
        tex="results/report/{name}.tex",
    output:
        pdf=report(
            "results/report/{name}.pdf",
            caption="../report/pdf.rst",
            category="report",
        ),
    log:
        "logs/compile_report_pdf/{name}.log",
    wildcard_constraints:
        name="|".join(["report", *STUDIES]),
    # a second of CPU: on a cluster it runs where the run started, not as a job
    localrule: True
    conda:
        ENV
    shell:
        "python -m gpudissect pdf --tex {input.tex} --out {output.pdf} > {log} 2>&1"


for _key, _devices in RUN_STUDIES.items():
    for _device in _devices:
        _exps = study_experiments(_key, _device)
        if not _exps:
            continue

        rule:
            name:
                f"{plot_rule_name(_device)}_for_{_key}"
            input:
                trace=[f"results/traces/{_device}/{e}.parquet" for e in _exps],
                result=[f"results/analysis/{_device}/{e}.json" for e in _exps],
            output:
                study_figure_files(_key, _device),
            log:
                f"logs/plot/{_device}_for_{_key}.log",
            benchmark:
                f"results/benchmarks/plot/{_device}_for_{_key}.tsv"
            localrule: True
            conda:
                ENV
            params:
                experiments=" ".join(_exps),
                out_dir=lambda wildcards, output: Path(output[0]).parent,
            shell:
                "python -m gpudissect plot --experiment {params.experiments} --trace {input.trace}"
                " --analysis {input.result} --out-dir {params.out_dir} > {log} 2>&1"


for _key in STUDIES:

    rule:
        name:
            _key
        input:
            f"results/report/{_key}.md",
            f"results/report/{_key}.pdf",
        localrule: True


onsuccess:
    stop_fork_server()
    # the notice of all_targets() scrolls away above the jobs' output: repeat it where the run
    # ends, so a reader looking for report.pdf learns why there is none
    if not shutil.which("latexmk"):
        print(
            "gpudissect: latexmk not found: report.pdf was skipped; the report is "
            "results/report/report.md and report.tex (README: Requirements)",
            file=sys.stderr,
        )
