# The train stage's helpers (rules/train.smk): a train job's spec, launch prefix and command, the kinds of train
# run (a series' main run and its extra seeds), the targets.
from typing import NamedTuple

TRAIN_CODE = MODEL_CODE + package_sources("train", "rewards", "judge", "launch.py")
if VERL:
    TRAIN_CODE += package_sources("verl_backend")
TRAIN_SERIES = [s.id for s in CFG.train_series]


def series_split(series, split):
    return f"results/data/{CFG.series[series].dataset}/{split}.parquet"


def train_job_name(wildcards):
    """The job's name in its Ray submission id: the series, and the seed for an extra seed's run."""
    seed = wildcards.get("seed")
    return wildcards.series if seed is None else f"{wildcards.series}-seed{seed}"


def train_job_spec(wildcards):
    """What one train job depends on: its series (with its id) and the sections training reads (the verl backend
    also reads model: and verl:); an extra seed's run has its seed as train.seed."""
    series = {"id": wildcards.series, **to_plain(CFG.resolved["series"][wildcards.series])}
    names = ("train", "rollout", "prompts", "tools", "judge") + (("model", "verl") if VERL else ())
    sections = {name: to_plain(CFG.resolved[name]) for name in names}
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
    workers reserve the GPUs inside the cluster; a local job reserves its threads and ray.job_gpus."""
    if VERL:
        config_text = train_job_spec(wildcards) + verl_train_overrides(wildcards)
        return launch_command("train", train_job_name(wildcards), config_text, num_cpus=1, num_gpus=0)
    return local_launch("train", train_job_name(wildcards), train_job_spec(wildcards), CFG.train.threads)


def train_targets():
    return [f"results/runs/{series}/run.json" for series in TRAIN_SERIES]


class TrainRun(NamedTuple):
    """One kind of train run: the rule that writes it, the folder of its files, the name of its log and benchmark
    (under results/logs/ and results/benchmarks/), the patterns its wildcards must match, and what its command adds
    (an extra seed's run says it is one, which names its MLflow run)."""

    rule_name: str
    folder: str
    log_name: str
    patterns: dict
    extra_args: str = ""


# Extra seeds run on the local backend only: seed_targets (rules/evaluate.smk) asks for none on verl.
TRAIN_RUNS = (
    TrainRun("train", "results/runs/{series}", "train/{series}", {}),
    TrainRun(
        "train_seed",
        "results/seeds/{series}/seed{seed}",
        "seeds/{series}/seed{seed}/train",
        {"series": "|".join(TRAIN_SERIES) or "(?!)", "seed": r"\d+"},
        " --extra-seed {wildcards.seed}",
    ),
)


def train_shell(run):
    """The train command: the local trainer from the policy model, or verl's trainer with the series' Hydra
    overrides after `--` (verl reads the model from them)."""
    if VERL:
        command = "chartrl verl train --spec {params.spec:q}"
    else:
        command = "chartrl train --spec {params.spec:q} --model {input.model:q}"
    command += " --train {input.train:q} --val {input.val:q}"
    out = run.folder.replace("{series}", "{wildcards.series}").replace("{seed}", "{wildcards.seed}")
    return (
        f"{{params.launch}} {command} --out {out} --tracking-uri {{params.tracking_uri:q}}"
        f" --experiment {{params.experiment:q}}{run.extra_args}"
        + (" -- {params.overrides}" if VERL else "")
        + " > {log:q} 2>&1"
    )
