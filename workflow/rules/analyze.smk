rule detect_changepoints:
    input:
        trace="results/traces/{device}/l1_size.parquet",
    output:
        result="results/analysis/{device}/l1_size.json",
        table="results/analysis/{device}/l1_size_summary.parquet",
    log:
        "logs/detect_changepoints/{device}.log",
    conda:
        ENV
    shell:
        "python -m gpudissect analyze --experiment l1_size --trace {input.trace}"
        " --out {output.result} --table {output.table} > {log} 2>&1"
