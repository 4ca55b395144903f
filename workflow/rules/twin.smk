rule make_twin_profile:
    input:
        topology="results/topology/{gpu}.json",
    output:
        profile="results/twins/{gpu}.yaml",
        accel_sim="results/twins/{gpu}.accel-sim.config",
    log:
        "logs/make_twin_profile/{gpu}.log",
    wildcard_constraints:
        gpu=TWIN_PATTERN,
    # a second of CPU: on a cluster it runs where the run started, not as a job
    localrule: True
    conda:
        ENV
    shell:
        "(python -m gpudissect twin --topology {input.topology} --out {output.profile}"
        " && python -m gpudissect export --format accel-sim --topology {input.topology}"
        " --out {output.accel_sim}) > {log} 2>&1"


rule compare_twin_topology:
    input:
        gpu="results/topology/{gpu}.json",
        twin=lambda wc: f"results/topology/{TWINS[wc.gpu]}.json",
    output:
        agreement="results/twins/{gpu}.agreement.json",
        md="results/twins/{gpu}.agreement.md",
    log:
        "logs/compare_twin_topology/{gpu}.log",
    wildcard_constraints:
        gpu=TWIN_PATTERN,
    localrule: True
    conda:
        ENV
    shell:
        "python -m gpudissect agreement --gpu {input.gpu} --twin {input.twin}"
        " --out {output.agreement} --md {output.md} > {log} 2>&1"
