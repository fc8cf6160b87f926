# What every stage shares: the typed config (checked once, here, before any job), the wildcard patterns, the
# source files a job's output depends on, and the config slices jobs take as params. Each stage's own helpers are in
# rules/helpers/<stage>.smk, which the stage's rule file includes first (Snakemake's linter wants a rule file to
# hold rules only).
import json
from pathlib import Path

from chartrl.config import ConfigError, config_schema, parse_config, to_plain
from chartrl.tools.study_checks import tool_data_problems

REPO_ROOT = Path(workflow.basedir)
PACKAGE_DIR = REPO_ROOT / "src" / "chartrl"
# The checkout the jobs' chartrl must be (chartrl.installation): what the conda environments' post-deploy scripts
# install editable, and what every launched job compares its chartrl with, wherever --directory puts the results.
os.environ.setdefault("CHARTRL_SOURCE", str(REPO_ROOT))

# The same checks as `chartrl config check`: an eval series' `of`, dataset references, ... (after the schema),
# and that the tools of the tool series have label boxes to edit.
CFG = parse_config(config)
_STUDY_PROBLEMS = tool_data_problems(CFG)
if _STUDY_PROBLEMS:
    raise ConfigError("the study cannot work as configured:\n  " + "\n  ".join(_STUDY_PROBLEMS))

VERL = CFG.backend == "verl"


wildcard_constraints:
    dataset="[A-Za-z][A-Za-z0-9_]*",
    split="train|val|test",
    series="|".join(s.id for s in CFG.series.values()),


def package_sources(*parts):
    """Source files of chartrl a rule's output depends on. Snakemake does not see code imported by a shell
    command, so rules declare these as inputs and a change to them reruns the rule (mtime trigger)."""
    files = []
    for part in parts:
        path = PACKAGE_DIR / part
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return [str(f) for f in files]


def config_slice(*sections, **keys_of):
    """The resolved config a job depends on, as JSON (its params: a change elsewhere does not rerun it): whole
    `sections`, and of a section the job reads only some keys of, those keys (`warmstart=("eval_rows", "seed")`).
    tests/test_reruns.py shows which rules a change to each config section reruns."""
    data = {name: to_plain(CFG.resolved[name]) for name in sections}
    data.update({name: section_keys(name, keys) for name, keys in keys_of.items()})
    return json.dumps(data, sort_keys=True)


def section_keys(name, keys):
    """`keys` of the resolved section `name`, with the keys the schema requires of it (evaluate.dataset): a job
    validates the part of a section it is given, and a required key it lacks would fail it."""
    required = config_schema()["properties"][name].get("required", [])
    section = to_plain(CFG.resolved[name])
    return {key: section[key] for key in (*required, *keys)}


# The evaluate keys each kind of evaluation job reads (rules/evaluate.smk, rules/filter.smk), read off the commands
# (chartrl.commands.evaluate, .rerank, .shortcut, .verl): a change to another evaluate key does not rerun the job.
# A job that runs a model reads threads, which also fixes its CPU numerics. A command that starts reading another
# key needs it here: its spec would not hold it, and the job would run with the key's default.
EVALUATE_KEYS = {
    "generate": ("n", "greedy", "limit", "seed", "gallery_size", "threads"),
    "generate_verl": ("gallery_size",),  # n, greedy and limit reach verl in the job's overrides
    "rerank": ("limit", "threads"),  # the series' rerank settings say the rest
    "score": ("year_rule",),
    "diagonal": ("bootstrap_samples", "confidence", "seed", "hacking_drift"),
    "rerank_score": ("bootstrap_samples", "confidence", "seed", "greedy"),
    "test_accuracy": ("limit", "seed", "year_rule", "threads"),
    "test_curve": ("limit", "curve_rows", "seed", "year_rule", "threads"),
    "shortcut_answers": ("threads",),  # the local backend's; the verl backend's reads none
    "shortcut_filter": ("bootstrap_samples", "confidence", "seed"),
}


def evaluate_keys(kind):
    """The evaluate section's keys a `kind` of job reads, as its spec holds them."""
    return section_keys("evaluate", EVALUATE_KEYS[kind])


def verl_only(**entries):
    """Rule entries only a verl job has (its Hydra overrides, the GPUs it holds): these on the verl backend, none on
    the local one. A rule spreads them into its params or resources (`**verl_only(...)`)."""
    return entries if VERL else {}
