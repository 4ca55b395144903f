rule analyze_trace:
    input:
        unpack(analysis_inputs),
    output:
        result="results/analysis/{device}/{experiment}.json",
    log:
        "logs/analyze_trace/{device}/{experiment}.log",
    benchmark:
        "results/benchmarks/analyze_trace/{device}_{experiment}.tsv"
    # a few seconds of CPU: on a cluster it runs where the run started, not as a job
    localrule: True
    conda:
        ENV
    params:
        extra=extra_input_args,
    shell:
        "python -m gpudissect analyze --experiment {wildcards.experiment}"
        " --trace {input.trace} --out {output.result} {params.extra} > {log} 2>&1"


# The same analysis, for the experiments whose figures draw a table the analysis computes: it
# writes that table beside the result document (analysis.result.table_path).
use rule analyze_trace as analyze_trace_with_table with:
    output:
        result="results/analysis/{device}/{experiment}.json",
        table="results/analysis/{device}/{experiment}.parquet",
    wildcard_constraints:
        experiment=TABLED,
    localrule: True


ruleorder: analyze_trace_with_table > analyze_trace
