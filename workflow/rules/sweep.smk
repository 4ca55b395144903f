rule run_sweep:
    input:
        unpack(sweep_inputs),
    output:
        trace="results/traces/{device}/{experiment}.parquet",
    log:
        "logs/run_sweep/{device}/{experiment}.log",
    benchmark:
        "results/benchmarks/run_sweep/{device}_{experiment}.tsv"
    priority: sweep_priority
    group:
        sweep_group
    conda:
        CUDA_ENV if RUN.cuda_devices else ENV
    resources:
        **SWEEP_PLACEMENT,
        **NODE_PLACEMENT,
        **sweep_slot_resources(),
        gpu=gpu_count,
    params:
        device=lambda wc: wc.device,
        experiment=lambda wc: wc.experiment,
        # an edited seed, profile path or sweep range reruns exactly the sweeps it changes
        config_hash=lambda wc: config_hash(
            DEVICES[wc.device].sweep_fragment(wc.experiment)
        ),
    script:
        "../scripts/run_sweep.py"


# Repeat k > 1 of a run that repeats (config key `repeats`): the same sweep, seeded apart.
use rule run_sweep as run_sweep_repeat with:
    input:
        unpack(repeat_sweep_inputs),
    output:
        trace="results/traces/{device}/{experiment}.r{repeat}.parquet",
    log:
        "logs/run_sweep/{device}/{experiment}.r{repeat}.log",
    benchmark:
        "results/benchmarks/run_sweep/{device}_{experiment}.r{repeat}.tsv"
    params:
        device=lambda wc: wc.device,
        experiment=lambda wc: wc.experiment,
        repeat=lambda wc: int(wc.repeat),
        config_hash=lambda wc: config_hash(
            DEVICES[wc.device].for_repeat(int(wc.repeat)).sweep_fragment(wc.experiment)
        ),
