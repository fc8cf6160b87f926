# The shortcut filter's helpers (rules/filter.smk): which datasets have the stage, a job's spec, launch prefix and
# command, the split a train series reads, the targets.
# Datasets that get the stage (answers, decision, filtered split, card): chartrl.config Config.filtered_datasets.
FILTER_DATASETS = CFG.filtered_datasets


def filter_settings(wildcards):
    """The dataset's shortcut filter settings, with the dataset's name as id: the `filter` entry of its jobs' specs."""
    return {"id": wildcards.dataset, **chartrl.to_plain(CFG.resolved["datasets"][wildcards.dataset]["shortcut_filter"])}


ANSWERS_COMMAND = "verl shortcut-answers" if VERL else "shortcut answers"
shortcut_answers_spec = job_spec(ANSWERS_COMMAND, filter=filter_settings)
shortcut_answers_code = job_code("launch", ANSWERS_COMMAND, spec=shortcut_answers_spec)
shortcut_filter_spec = job_spec("shortcut filter", filter=filter_settings)


def filter_model(wildcards):
    """The starting policy the filter asks: the warm-started tiny model, or model.path (not a file input)."""
    return "results/models/base" if CFG.model.path is None else CFG.model.path


def verl_shortcut_overrides(wildcards):
    """The dataset's verl generation job (chartrl.verl_backend.shortcut.shortcut_overrides), shell-quoted, its paths
    under WORKDIR."""
    return shlex.join(chartrl.shortcut_overrides(CFG, wildcards.dataset, chartrl.WORKDIR))


def shortcut_answers_launch(wildcards):
    """The launcher prefix of an answers job (as generate_launch: a verl driver takes one CPU, its workers the
    GPUs; a local job evaluate.threads)."""
    spec = shortcut_answers_spec(wildcards)
    if VERL:
        config_text = spec + verl_shortcut_overrides(wildcards)
        return launch_command("shortcut", wildcards.dataset, config_text, num_cpus=1, num_gpus=0)
    return local_launch("shortcut", wildcards.dataset, spec)


def shortcut_answers_shell():
    if VERL:
        return (
            "{params.launch} chartrl verl shortcut-answers --spec {params.spec:q} --data {input.train:q}"
            " --out {output:q} -- {params.overrides} > {log:q} 2>&1"
        )
    return (
        "{params.launch} chartrl shortcut answers --spec {params.spec:q} --model {params.model:q}"
        " --data {input.train:q} --out {output:q} > {log:q} 2>&1"
    )


def train_split_of(series_id):
    """The train split a train series reads: the shortcut-filtered one when it opts in."""
    series = CFG.series[series_id]
    if series.shortcut_filter:
        return f"results/filter/{series.dataset}/train.parquet"
    return f"results/data/{series.dataset}/train.parquet"


def filter_targets():
    return [f"results/filter/{name}/card.json" for name in FILTER_DATASETS]
