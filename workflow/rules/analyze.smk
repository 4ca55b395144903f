rule analyze_trace:
    input:
        unpack(analysis_inputs),
    output:
        result="results/analysis/{device}/{experiment}.json",
    log:
        "logs/analyze_trace/{device}/{experiment}.log",
    benchmark:
        "results/benchmarks/analyze_trace/{device}_{experiment}.tsv"
    conda:
        ENV
    params:
        extra=extra_input_args,
    shell:
        "python -m gpudissect analyze --experiment {wildcards.experiment}"
        " --trace {input.trace} --out {output.result} {params.extra} > {log} 2>&1"
