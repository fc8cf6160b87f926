# What every stage shares: the typed config (checked once, here, before any job), the wildcard patterns, the
# source files a job's output depends on, and the config slices jobs take as params. Each stage's own helpers are in
# rules/helpers/<stage>.smk, which the stage's rule file includes first (Snakemake's linter wants a rule file to
# hold rules only).
import json
from pathlib import Path

from chartrl.config import ConfigError, parse_config, to_plain
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


def config_slice(*sections):
    """The resolved config sections a job depends on, as JSON (its params: a change elsewhere does not rerun it)."""
    return json.dumps({name: to_plain(CFG.resolved[name]) for name in sections}, sort_keys=True)


def verl_only(**entries):
    """Rule entries only a verl job has (its Hydra overrides, the GPUs it holds): these on the verl backend, none on
    the local one. A rule spreads them into its params or resources (`**verl_only(...)`)."""
    return entries if VERL else {}
