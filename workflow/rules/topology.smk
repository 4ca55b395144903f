rule build_topology:
    input:
        analyses=lambda wc: [
            f"results/analysis/{wc.device}/{exp}.json"
            for exp in experiments_of(wc.device)
        ],
        # a run that repeats: the values that do not repeat are undetermined
        repeats=lambda wc: (
            [f"results/analysis/{wc.device}/repeats.json"] if REPEATS > 1 else []
        ),
    output:
        topology="results/topology/{device}.json",
    log:
        "logs/build_topology/{device}.log",
    wildcard_constraints:
        device=r"[A-Za-z0-9_.\-]+",
    # a second of CPU: on a cluster it runs where the run started, not as a job
    localrule: True
    conda:
        ENV
    params:
        repeats=lambda wc, input: f" --repeats {input.repeats}" if input.repeats else "",
    shell:
        "python -m gpudissect topology --device {wildcards.device}"
        " --analyses {input.analyses}{params.repeats} --out {output.topology} > {log} 2>&1"


rule build_study_topology:
    input:
        analyses=lambda wc: [
            f"results/analysis/{wc.device}/{exp}.json"
            for exp in study_experiments(wc.study, wc.device)
        ],
    output:
        topology="results/topology/{study}/{device}.json",
    log:
        "logs/build_topology/{study}/{device}.log",
    wildcard_constraints:
        study="|".join(STUDIES),
    localrule: True
    conda:
        ENV
    shell:
        "python -m gpudissect topology --device {wildcards.device}"
        " --analyses {input.analyses} --out {output.topology} > {log} 2>&1"


# The CUDA devices' own results (gpudissect reference runs this first, timed)
rule measured:
    input:
        [t for d in RUN.cuda_devices for t in device_targets(d.name)],
