# What every stage shares: the typed config (checked once, here, before any job), the wildcard patterns, and how a
# job's params say what it depends on: its spec (the config its command declares it reads) and its code (the
# digest of the chartrl code it runs). Both come from chartrl.workflow, the one chartrl module the rules import;
# every job itself runs the chartrl CLI. Each stage's own helpers are in rules/helpers/<stage>.smk, which the
# stage's rule file includes first (Snakemake's linter wants a rule file to hold rules only).
import json
from pathlib import Path

from chartrl import workflow as chartrl  # chartrl.workflow: what the rules read of chartrl

REPO_ROOT = Path(workflow.basedir)
# The checkout the jobs' chartrl must be (chartrl.installation): what the conda environments' post-deploy scripts
# install editable, and what every launched job compares its chartrl with, wherever --directory puts the results.
os.environ.setdefault("CHARTRL_SOURCE", str(REPO_ROOT))
# Every job runs `chartrl`: the one beside the Python that runs Snakemake comes first, so `.venv/bin/snakemake`
# works without activating .venv (a job of a conda environment puts that environment's first when it activates it).
os.environ.update(PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))

# The same checks as `chartrl config check`: an eval series' `of`, dataset references, ... (after the schema),
# and that the tools of the tool series have label boxes to edit.
CFG = chartrl.checked_config(config)
VERL = CFG.backend == "verl"


wildcard_constraints:
    dataset="[A-Za-z][A-Za-z0-9_]*",
    split="train|val|test",
    series="|".join(s.id for s in CFG.series.values()),


def job_spec(command, *, sections=None, **entries):
    """The `spec` param of a job running `chartrl <command>`: what the command declares it reads (READS in its
    module), from the resolved config. An entry or a section given as a function is called with the job's
    wildcards (a series' own train keys, the judge only when its reward judges: chartrl.workflow.OMIT)."""

    def spec(wildcards):
        given = {name: value(wildcards) if callable(value) else value for name, value in entries.items()}
        own = {name: value(wildcards) if callable(value) else value for name, value in (sections or {}).items()}
        return chartrl.job_spec(command, CFG, own, **given)

    return spec


def job_code(*commands, uses=None, spec=None):
    """The `code` param of a job whose shell command runs `chartrl <command>` for each of `commands` (in order):
    the digest of every chartrl file they run, of the registry entries `uses(wildcards)` names (its reward, its
    judge, its dataset's reader) and of the prompt templates its `spec(wildcards)` names.
    tests/test_reruns.py checks that it names the commands of the job's shell."""

    def code(wildcards):
        return chartrl.job_code(commands, uses(wildcards) if uses else (), spec(wildcards) if spec else None)

    return code


def verl_only(**entries):
    """Rule entries only a verl job has (its Hydra overrides, the GPUs it holds): these on the verl backend, none on
    the local one. A rule spreads them into its params or resources (`**verl_only(...)`)."""
    return entries if VERL else {}
