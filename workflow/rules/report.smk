from gpudissect.report.studies import STUDIES  # noqa: E402

# Studies whose twins this config runs: each gets a part in the report and a target of its own.
RUN_STUDIES = {
    key: [d for d in s.devices if d in DEVICES] for key, s in STUDIES.items()
}
RUN_STUDIES = {key: devs for key, devs in RUN_STUDIES.items() if devs}


def report_tables(study=None):
    """The named tables a report writes (its CSV exports, report items of the HTML report)."""
    keys = [study] if study else list(RUN_STUDIES)
    names = [t.name for k in keys for t in STUDIES[k].tables]
    if study is None and len(DEVICES) > 1:
        names.append("fleet")
    return names + ["provenance", "regenerate"]


def topology_files(devices):
    """The topology documents the report summarises (none are built yet: no rule writes them)."""
    return []


def study_figure_files(study, device):
    """A study draws its figures in a folder of its own (results/figures/<device>/<study>/):
    the device's figure job needs every experiment, a study only its own."""
    return [
        f"results/figures/{device}/{study}/{stem}.{ext}"
        for exp in study_experiments(study, device)
        for stem in FAMILY[exp].figures
        for ext in ("png", "pdf")
    ]


def study_experiments(study, device):
    return [e for e in experiments_of(device) if e in STUDIES[study].experiments]


def study_targets(wildcards):
    study = STUDIES[wildcards.study]
    devices = RUN_STUDIES.get(wildcards.study)
    if not devices:
        raise WorkflowError(
            f"gpudissect: study {wildcards.study!r} needs the twins {list(study.devices)}; "
            f"none is among the configured devices {sorted(DEVICES)}"
        )
    targets = []
    for d in devices:
        targets += [
            f"results/analysis/{d}/{e}.json"
            for e in study_experiments(wildcards.study, d)
        ]
        targets += study_figure_files(wildcards.study, d)
    return targets


def report_args(devices, tables_dir, tables):
    topo = "--topology results/topology" if topology_files(devices) else ""
    return (
        f"--device {' '.join(devices)} {topo} --benchmarks results/benchmarks"
        f" --tables-dir {tables_dir} --table {' '.join(tables)}"
    )


rule render_report:
    input:
        targets=[t for name in DEVICES for t in device_targets(name)],
        topology=topology_files(list(DEVICES)),
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
    conda:
        ENV
    params:
        args=report_args(list(DEVICES), "results/report/tables", report_tables()),
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
                out_dir=f"results/figures/{_device}/{_key}",
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
