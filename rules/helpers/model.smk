# The model stage's helpers (rules/model.smk): the policy every train series starts from, the job specs and code,
# the targets.
TRAIN_DATASET = CFG.resolved["train"]["dataset"]


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
