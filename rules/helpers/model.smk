# The model stage's helpers (rules/model.smk): the policy every train series starts from, the job specs, the
# targets.
MODEL_CODE = package_sources(
    "model", "warmstart", "rollout", "tools", "answers.py", "prompts", "config", "files.py", "tracking.py"
)
TRAIN_DATASET = CFG.resolved["train"]["dataset"]

# The warmstart keys the after-warm-start check reads (chartrl.warmstart.check: how many val rows, the seed of its
# sampling and shuffled-image control); eval_rows is the check's alone, so the warm start's spec leaves it out.
WARMSTART_CHECK_KEYS = ("eval_rows", "seed")
WARMSTART_TRAINING_KEYS = tuple(key for key in CFG.resolved["warmstart"] if key != "eval_rows")


def base_model_spec(wildcards):
    """The tiny model's settings and the tool names (the tokenizer learns them as words); no other tool key."""
    return config_slice("model", tools=("names",))


def warmstart_spec(wildcards):
    """What the warm start trains from: its settings (but the check's eval_rows), the prompts and tools its
    demonstrations are written with. Not the rollout settings: only the check samples."""
    return config_slice("prompts", "tools", warmstart=WARMSTART_TRAINING_KEYS)


def warmstart_check_spec(wildcards):
    return config_slice("prompts", "tools", "rollout", warmstart=WARMSTART_CHECK_KEYS)


def model_targets():
    """The embedded default builds and warm-starts its own model; a config with model.path uses that model."""
    if CFG.model.path is not None:
        return []
    return ["results/models/base", "results/models/warmstart_check.json"]


def policy_model(wildcards):
    """The model every train series starts from, as a file input: the warm-started tiny model; none with model.path
    (a hub id, or a folder the workflow does not make)."""
    return "results/models/base" if CFG.model.path is None else []


def policy_model_argument():
    """The ``--model`` of a local job that starts from the policy model, as its shell command writes it: the input
    (the warm-started tiny model), or model.path, quoted (its braces doubled for Snakemake's formatting)."""
    if CFG.model.path is None:
        return "{input.model:q}"
    return shlex.quote(CFG.model.path).replace("{", "{{").replace("}", "}}")
