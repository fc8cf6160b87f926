# The train stage's helpers (rules/train.smk): a train job's spec, launch prefix, folder and command (for a series'
# main run and its extra seeds alike), the targets.
# rewards/definitions/ holds each reward in a module of its own: code of the train jobs whose reward it defines only
# (train_code), so adding a reward there reruns no other series.
EXTRA_REWARDS = str(PACKAGE_DIR / "rewards" / "definitions") + "/"
TRAIN_CODE = MODEL_CODE + [
    path
    for path in package_sources("train", "rewards", "judge", "launch.py")
    if not path.startswith(EXTRA_REWARDS)
]
if VERL:
    TRAIN_CODE += package_sources("verl_backend")
TRAIN_SERIES = [s.id for s in CFG.train_series]


def train_code(wildcards):
    """The source files a train job depends on: the shared code, and its reward's own module
    (chartrl.rewards.reward_module)."""
    from chartrl.rewards import reward_module

    defined = sys.modules[reward_module(CFG.series[wildcards.series].reward.name)]
    return TRAIN_CODE + [str(defined.__file__)]


def reward_judges(reward):
    """Does the reward grade answers with the judge (or the panel)? Only then does its training read judge:."""
    from chartrl.rewards.registry import accuracy_signal

    return accuracy_signal(reward.name, reward.params) in ("judge", "panel")


def series_split(series, split):
    """The split a train series reads: its dataset's, or the shortcut-filtered train split when it opts in."""
    if split == "train":
        return train_split_of(series)
    return f"results/data/{CFG.series[series].dataset}/{split}.parquet"


def train_job_name(wildcards):
    """The job's name in its Ray submission id: the series, and the seed for an extra seed's run."""
    seed = wildcards.get("seed")
    return wildcards.series if seed is None else f"{wildcards.series}-seed{seed}"


def train_job_spec(wildcards):
    """What one train job depends on: its series (with its id) and the sections training reads (the verl backend
    also reads model: and verl:); an extra seed's run has its seed as train.seed."""
    series = {"id": wildcards.series, **to_plain(CFG.resolved["series"][wildcards.series])}
    judged = reward_judges(CFG.series[wildcards.series].reward)  # judge: only a reward that judges reads it
    names = ("train", "rollout", "prompts", "tools") + (("judge",) if judged else ()) + (("model", "verl") if VERL else ())
    sections = {name: to_plain(CFG.resolved[name]) for name in names}
    sections["train"] = CFG.train_section(wildcards.series)  # with the series' own train keys (a LoRA variant)
    if judged:
        sections["judge"] = CFG.judge_section(wildcards.series)  # with the series' own judge keys (a hack control)
    if wildcards.get("seed") is not None:
        sections["train"]["seed"] = int(wildcards.seed)
    keep = CFG.keep_steps(wildcards.series)  # checkpoint steps eval series name: saved and never pruned
    return json.dumps({"series": series, **sections, **({"keep_steps": list(keep)} if keep else {})}, sort_keys=True)


def verl_train_overrides(wildcards):
    """The series' verl overrides (chartrl.verl_backend.overrides), shell-quoted, for the verl train command."""
    from chartrl.verl_backend.overrides import train_overrides

    return shlex.join(train_overrides(CFG, wildcards.series, os.getcwd()))


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
