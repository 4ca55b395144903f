rule compile_kernel:
    input:
        source="kernels/{kernel}.cu",
    output:
        cubin="results/build/{arch}/{kernel}.cubin",
    log:
        "logs/compile_kernel/{arch}/{kernel}.log",
    wildcard_constraints:
        arch=r"sm_[0-9]+[a-z]?",
    conda:
        ENV
    params:
        nvcc=RUN.build.nvcc,
        flags=" ".join(f"--flag={f}" for f in RUN.build.nvcc_flags),
    shell:
        "python -m gpudissect compile --kernel {input.source} --arch {wildcards.arch}"
        " --out {output.cubin} --nvcc {params.nvcc} {params.flags} > {log} 2>&1"
