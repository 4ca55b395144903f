rule run_sweep:
    input:
        unpack(sweep_inputs),
    output:
        trace="results/traces/{device}/{experiment}.parquet",
    log:
        "logs/run_sweep/{device}/{experiment}.log",
    params:
        device=lambda wc: wc.device,
        experiment=lambda wc: wc.experiment,
    resources:
        gpu=gpu_count,
    conda:
        CUDA_ENV if RUN.cuda_devices else ENV
    script:
        "../scripts/run_sweep.py"
