from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/build.smk"
include: "workflow/rules/sweep.smk"
include: "workflow/rules/analyze.smk"
include: "workflow/rules/plot.smk"
include: "workflow/rules/topology.smk"
include: "workflow/rules/twin.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        all_targets(),
