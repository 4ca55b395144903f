rule render_report:
    input:
        targets=[t for name in DEVICES for t in device_targets(name)],
    output:
        report="results/report/report.md",
    log:
        "logs/render_report/render_report.log",
    # a few seconds of CPU: on a cluster it runs where the run started, not as a job
    localrule: True
    conda:
        ENV
    params:
        devices=" ".join(DEVICES),
        title=RUN.report_title,
    shell:
        "python -m gpudissect report --device {params.devices} --title {params.title:q}"
        " --out {output.report} > {log} 2>&1"
