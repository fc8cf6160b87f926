# The train stage's helpers (rules/train.smk): a train job's spec, launch prefix, folder and command (for a series'
# main run and its extra seeds alike), the targets.
TRAIN_SERIES = [s.id for s in CFG.train_series]
# The train series the extra seeds train again (Config.seeded_series: those the hypotheses compare).
SEEDED_SERIES = [s.id for s in CFG.seeded_series] if CFG.backend == "local" else []


def series_split(series, split):
    """The split a train series reads: its dataset's, or the shortcut-filtered train split when it opts in."""
    if split == "train":
        return train_split_of(series)
    return f"results/data/{CFG.series[series].dataset}/{split}.parquet"


def train_job_name(wildcards):
    """The job's name in its Ray submission id: the series, and the seed for an extra seed's run."""
    seed = wildcards.get("seed")
    return wildcards.series if seed is None else f"{wildcards.series}-seed{seed}"


def train_judge(wildcards):
    """The judge: section a train job reads: the series' own judge keys over judge:, only when its reward judges
    (a rule-graded series reads none of it)."""
    reward = CFG.series[wildcards.series].reward
    judged = chartrl.accuracy_signal(reward.name, reward.params) in ("judge", "panel")
    return CFG.judge_section(wildcards.series) if judged else chartrl.OMIT


def train_section(wildcards):
    """The train: section a train job reads: with the series' own train keys (a LoRA variant), and an extra seed's
    run's seed as train.seed."""
    section = CFG.train_section(wildcards.series)
    if wildcards.get("seed") is not None:
        section["seed"] = int(wildcards.seed)
    return section


# What one train job depends on: its series (with its id), the sections training reads (chartrl.commands.train,
# .verl: the verl backend also reads model: and verl:) and the checkpoint steps eval series name (saved, never
# pruned); the code of its command, of its reward and of the judge its reward grades with.
TRAIN_COMMAND = "verl train" if VERL else "train"
train_job_spec = job_spec(
    TRAIN_COMMAND,
    sections={"train": train_section, "judge": train_judge},
    series=lambda wildcards: {"id": wildcards.series, **chartrl.to_plain(CFG.resolved["series"][wildcards.series])},
    keep_steps=lambda wildcards: list(CFG.keep_steps(wildcards.series)) or None,
)
train_job_code = job_code(
    "launch", TRAIN_COMMAND, uses=lambda wildcards: chartrl.reward_code(CFG, wildcards.series), spec=train_job_spec
)


def verl_train_overrides(wildcards):
    """The series' verl overrides (chartrl.verl_backend.overrides), shell-quoted, for the verl train command: its
    paths under WORKDIR, which the job replaces by its working directory."""
    return shlex.join(chartrl.train_overrides(CFG, wildcards.series, chartrl.WORKDIR))


def train_launch(wildcards):
    """The launcher prefix of a train job (rules/launch.smk). A verl job's driver reserves one CPU: verl's own
    workers reserve the GPUs inside the cluster; a local job reserves its threads and ray.job_gpus. Only a series
    whose reward asks a judge or panel is given the judge's key variables."""
    secrets = judge_secrets_of(wildcards.series)
    if VERL:
        config_text = train_job_spec(wildcards) + verl_train_overrides(wildcards)
        return launch_command("train", train_job_name(wildcards), config_text, 1, 0, secrets)
    return local_launch("train", train_job_name(wildcards), train_job_spec(wildcards), CFG.train.threads, secrets)


def train_priority(wildcards):
    """Longest jobs first: a tool series' training (two passes per rollout) before a baseline's, both before the
    evaluation jobs (priority 0), so that the last jobs of a run are short ones on both cores and not one long
    training on one (measured on 2 cores: a tool series' training started last left a core idle for about 60 s)."""
    return 2 if CFG.series[wildcards.series].tools else 1


def train_targets():
    return [f"results/runs/{series}/run.json" for series in TRAIN_SERIES]


def train_folder(wildcards):
    """The folder of a train run: a series' main run under results/runs/, an extra seed's under results/seeds/."""
    seed = wildcards.get("seed")
    return f"results/runs/{wildcards.series}" if seed is None else f"results/seeds/{wildcards.series}/seed{seed}"


def extra_seed_argument(wildcards):
    """`--extra-seed N` for an extra seed's run (it names its MLflow run {series}/train/seed{N}), else nothing."""
    seed = wildcards.get("seed")
    return "" if seed is None else f" --extra-seed {seed}"


def train_shell():
    """The train command: the local trainer from the policy model, or verl's trainer with the series' Hydra
    overrides after `--` (verl reads the model from them)."""
    if VERL:
        command = "chartrl verl train --spec {params.spec:q}"
    else:
        command = f"chartrl train --spec {{params.spec:q}} --model {policy_model_argument()}"
    overrides = " -- {params.overrides}" if VERL else ""
    return (
        f"{{params.launch}} {command} --train {{input.train:q}} --val {{input.val:q}} --out {{params.out}}"
        " --tracking-uri {params.tracking_uri:q} --experiment {params.experiment:q}{params.extra_seed}"
        f"{overrides} > {{log:q}} 2>&1"
    )
