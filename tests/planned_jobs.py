"""What Snakemake's config-driven rerun triggers compare for every job a config plans: the job's params (where each
job's spec lives) and its input files, read from Snakemake's own DAG.

Run as a script (``python tests/planned_jobs.py WORKDIR`` with a JSON list of config-file lists on stdin; prints a
JSON list with one ``{"rule|wildcards": {"params": ..., "input": ...}}`` per config): the DAGs are built one after
another in one process, about half a second each against five for a dry run of its own. It lives apart from the
test modules, in a process of its own, because building a DAG changes the working directory and sets up
Snakemake's logging.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def planned_jobs(configs: list[list[Path]], workdir: Path) -> list[dict[str, dict[str, object]]]:
    """For each list of config files (each laid over config/config.yaml and config/series.yaml, as
    ``--configfile`` does), every job an empty ``workdir`` would run: ``"rule|wildcards"`` -> its params, inputs and
    shell command."""
    request = json.dumps([[str(path) for path in files] for files in configs])
    result = subprocess.run(
        [sys.executable, __file__, str(workdir)], input=request, capture_output=True, text=True, timeout=600
    )
    if result.returncode != 0:
        raise AssertionError(f"planning the DAG failed ({result.returncode}):\n{result.stderr[-6000:]}")
    return json.loads(result.stdout.splitlines()[-1])


def _plan(configfiles: list[Path], workdir: Path) -> dict[str, dict[str, object]]:
    # Snakemake's API builds the workflow; its DAG is read through the workflow object (not a public interface:
    # the same calls `snakemake --summary` makes), since no public call hands out each job's params.
    from snakemake.api import SnakemakeApi
    from snakemake.settings.enums import Quietness
    from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, ResourceSettings

    with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
        workflow_api = api.workflow(
            resource_settings=ResourceSettings(cores=1),
            config_settings=ConfigSettings(configfiles=configfiles),
            snakefile=REPO / "Snakefile",
            workdir=workdir,
        )
        workflow_api.dag(DAGSettings())
        workflow = workflow_api._workflow
        workflow._prepare_dag(forceall=False, ignore_incomplete=True, lock_warn_only=True)
        workflow._build_dag()
        jobs = {}
        for job in workflow.dag.jobs:
            wildcards = ", ".join(f"{key}={value}" for key, value in sorted(job.wildcards_dict.items()))
            jobs[f"{job.rule.name}|{wildcards}"] = {
                "params": {name: str(value) for name, value in job.params.items()},
                "input": sorted(str(path) for path in job.input),
                "shell": job.shellcmd,
            }
        return jobs


def main() -> None:
    workdir = Path(sys.argv[1])
    workdir.mkdir(parents=True, exist_ok=True)
    plans = [_plan([Path(f) for f in files], workdir) for files in json.loads(sys.stdin.read())]
    sys.stdout.write(json.dumps(plans) + "\n")


if __name__ == "__main__":
    main()
