rule run_sweep:
    input:
        unpack(sweep_inputs),
    output:
        trace="results/traces/{device}/{experiment}.parquet",
    log:
        "logs/run_sweep/{device}/{experiment}.log",
    conda:
        CUDA_ENV if RUN.cuda_devices else ENV
    resources:
        **SWEEP_PLACEMENT,
        gpu=gpu_count,
    params:
        device=lambda wc: wc.device,
        experiment=lambda wc: wc.experiment,
    script:
        "../scripts/run_sweep.py"
