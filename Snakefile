# chartrl: the whole study as one DAG, one rule file per stage in the order the experiment runs them. Config:
# config/series.yaml (the study's series) + config/config.yaml (the embedded default, which may set series keys too);
# overlay with `--configfile config/smoke.yaml` or `--configfile config/gpu.yaml`. Every key is documented in
# workflow/schemas/config.schema.yaml.
from snakemake.utils import min_version, validate

min_version("9.0")


configfile: os.path.join(workflow.basedir, "config/series.yaml")
configfile: os.path.join(workflow.basedir, "config/config.yaml")


validate(config, "workflow/schemas/config.schema.yaml")


include: "rules/common.smk"  # the typed config and what every stage shares
include: "rules/launch.smk"  # how model jobs run: inline or as Ray jobs, and the run's own Ray head
include: "rules/data.smk"  # datasets -> parquet splits and a card per dataset
include: "rules/model.smk"  # the tiny model and its warm start (unless model.path names a model)
include: "rules/filter.smk"  # the shortcut filter of a train split (datasets.<name>.shortcut_filter)
include: "rules/train.smk"  # one RL run per train series, and per extra seed
include: "rules/evaluate.smk"  # test generations, scores, the diagonal check, test accuracy
include: "rules/report.smk"  # the report and metrics.json


rule all:
    default_target: True
    input:
        data_targets(),
        model_targets(),
        filter_targets(),
        train_targets(),
        eval_targets(),
        "results/report/index.html",
