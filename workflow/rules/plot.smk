rule plot_size_sweep:
    input:
        trace="results/traces/{device}/l1_size.parquet",
        result="results/analysis/{device}/l1_size.json",
    output:
        sweep_png=report(
            "results/figures/{device}/l1_size_sweep.png",
            caption="../report/size_sweep.rst",
            category="Cache size",
            subcategory="{device}",
        ),
        sweep_pdf="results/figures/{device}/l1_size_sweep.pdf",
        map_png=report(
            "results/figures/{device}/l1_size_latency_map.png",
            caption="../report/latency_map.rst",
            category="Cache size",
            subcategory="{device}",
        ),
    log:
        "logs/plot_size_sweep/{device}.log",
    conda:
        ENV
    shell:
        "python -m gpudissect plot --trace {input.trace} --analysis {input.result}"
        " --sweep-out {output.sweep_png} {output.sweep_pdf} --map-out {output.map_png}"
        " > {log} 2>&1"
