rule analyze_trace:
    input:
        unpack(analysis_inputs),
    output:
        result="results/analysis/{device}/{experiment}.json",
    log:
        "logs/analyze_trace/{device}/{experiment}.log",
    # a few seconds of CPU: on a cluster it runs where the run started, not as a job
    localrule: True
    conda:
        ENV
    params:
        extra=extra_input_args,
    shell:
        "python -m gpudissect analyze --experiment {wildcards.experiment}"
        " --trace {input.trace} --out {output.result} {params.extra} > {log} 2>&1"
