# The model stage's helpers (rules/model.smk): the policy every train series starts from, the targets.
MODEL_CODE = package_sources(
    "model", "warmstart", "rollout", "tools", "answers.py", "prompts", "config", "files.py", "tracking.py"
)
TRAIN_DATASET = CFG.resolved["train"]["dataset"]


def model_targets():
    """The embedded default builds and warm-starts its own model; a config with model.path uses that model."""
    if CFG.model.path is not None:
        return []
    return ["results/models/base", "results/models/warmstart_gallery.png"]


def policy_model(wildcards):
    """The model every train series starts from: the warm-started tiny model, or model.path."""
    return "results/models/base" if CFG.model.path is None else []
