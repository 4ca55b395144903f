rule build_topology:
    input:
        analyses=lambda wc: [
            f"results/analysis/{wc.device}/{exp}.json"
            for exp in experiments_of(wc.device)
        ],
    output:
        topology="results/topology/{device}.json",
    log:
        "logs/build_topology/{device}.log",
    conda:
        ENV
    shell:
        "python -m gpudissect topology --device {wildcards.device}"
        " --analyses {input.analyses} --out {output.topology} > {log} 2>&1"
