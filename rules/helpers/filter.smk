# The shortcut filter's helpers (rules/filter.smk): which datasets have the stage, a job's spec, launch prefix and
# command, the split a train series reads, the targets.
FILTER_CODE = package_sources("evaluate/shortcut.py", "commands/shortcut.py", "rollout", "answers.py", "data")
if VERL:
    FILTER_CODE += package_sources("verl_backend/shortcut.py")
# Datasets that get the stage (answers, decision, filtered split, card): chartrl.config Config.filtered_datasets.
FILTER_DATASETS = CFG.filtered_datasets


ANSWER_SECTIONS = ("rollout", "prompts", "tools") + (("model", "verl") if VERL else ())
ANSWER_EVALUATE = None if VERL else "shortcut_answers"  # verl's answers job reads no evaluate key


def filter_spec(dataset, sections=ANSWER_SECTIONS, evaluate=ANSWER_EVALUATE):
    """A filter job's spec: the dataset's filter settings (with its name as id), the sections it reads and the
    evaluate keys of its kind (EVALUATE_KEYS, rules/common.smk)."""
    settings = {"id": dataset, **to_plain(CFG.resolved["datasets"][dataset]["shortcut_filter"])}
    data = {"filter": settings, **{s: to_plain(CFG.resolved[s]) for s in sections}}
    if evaluate is not None:
        data["evaluate"] = evaluate_keys(evaluate)
    return json.dumps(data, sort_keys=True)


def filter_model(wildcards):
    """The starting policy the filter asks: the warm-started tiny model, or model.path (not a file input)."""
    return "results/models/base" if CFG.model.path is None else CFG.model.path


def verl_shortcut_overrides(wildcards):
    """The dataset's verl generation job (chartrl.verl_backend.shortcut.shortcut_overrides), shell-quoted."""
    from chartrl.verl_backend.shortcut import shortcut_overrides

    return shlex.join(shortcut_overrides(CFG, wildcards.dataset, os.getcwd()))


def shortcut_answers_launch(wildcards):
    """The launcher prefix of an answers job (as generate_launch: a verl driver takes one CPU, its workers the
    GPUs; a local job evaluate.threads)."""
    spec = filter_spec(wildcards.dataset)
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
