# chartrl: the whole study as one DAG. Stages live in rules/*.smk; helpers and targets in rules/common.smk.
# Config: config/config.yaml (embedded default) + config/series.yaml (the 14 series); overlay with
# `--configfile config/smoke.yaml` or `--configfile config/gpu.yaml`. Every key is documented in
# workflow/schemas/config.schema.yaml.
from snakemake.utils import min_version, validate

min_version("9.0")


configfile: os.path.join(workflow.basedir, "config/config.yaml")
configfile: os.path.join(workflow.basedir, "config/series.yaml")


validate(config, "workflow/schemas/config.schema.yaml")


include: "rules/common.smk"
include: "rules/launch.smk"
include: "rules/data.smk"
include: "rules/model.smk"
include: "rules/train.smk"
include: "rules/evaluate.smk"
include: "rules/seeds.smk"
include: "rules/report.smk"


rule all:
    default_target: True
    input:
        all_targets(),
