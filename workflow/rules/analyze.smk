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
# writes that table beside the result document (analysis.common.result.table_path).
use rule analyze_trace as analyze_trace_with_table with:
    output:
        result="results/analysis/{device}/{experiment}.json",
        table="results/analysis/{device}/{experiment}.parquet",
    wildcard_constraints:
        experiment=TABLED,
    localrule: True


ruleorder: analyze_trace_with_table > analyze_trace


# The same analysis, for the experiments whose result a sweep reads (FED_ANALYSES: stage 1 of the
# caches, the TLBs): on a cluster run it runs inside its device's sweep job (group
# `sweeps_<device>`, common.smk), between the sweep that writes its trace and the sweeps that
# read it, so the device's sweeps need one job, not one before it and one after. A local run
# runs it as any analysis.
use rule analyze_trace as analyze_sweep_input with:
    wildcard_constraints:
        experiment=FED_PATTERN,
    group:
        sweep_group
    localrule: False
    resources:
        **SWEEP_PLACEMENT,
        **sweep_slot_resources(),


ruleorder: analyze_sweep_input > analyze_trace


# Repeat k > 1 of a run that repeats (config key `repeats`): its own documents, from its traces
# and its own earlier results.
use rule analyze_trace as analyze_repeat with:
    input:
        unpack(repeat_analysis_inputs),
    output:
        result="results/analysis/{device}/{experiment}.r{repeat}.json",
    log:
        "logs/analyze_trace/{device}/{experiment}.r{repeat}.log",
    benchmark:
        "results/benchmarks/analyze_trace/{device}_{experiment}.r{repeat}.tsv"
    localrule: True


use rule analyze_repeat as analyze_repeat_with_table with:
    output:
        result="results/analysis/{device}/{experiment}.r{repeat}.json",
        table="results/analysis/{device}/{experiment}.r{repeat}.parquet",
    wildcard_constraints:
        experiment=TABLED,
    localrule: True


ruleorder: analyze_repeat_with_table > analyze_repeat


# Repeat k > 1 of an analysis that a sweep reads: in its device's sweep job too, as above.
use rule analyze_repeat as analyze_sweep_input_repeat with:
    wildcard_constraints:
        experiment=FED_PATTERN,
    group:
        sweep_group
    localrule: False
    resources:
        **SWEEP_PLACEMENT,
        **sweep_slot_resources(),


ruleorder: analyze_sweep_input_repeat > analyze_repeat


rule compare_repeats:
    input:
        analyses=lambda wc: repeat_analyses(wc.device),
    output:
        repeats="results/analysis/{device}/repeats.json",
    log:
        "logs/compare_repeats/{device}.log",
    localrule: True
    conda:
        ENV
    shell:
        "python -m gpudissect repeats --device {wildcards.device}"
        " --analyses {input.analyses} --out {output.repeats} > {log} 2>&1"
