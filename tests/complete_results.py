"""A complete results folder without running anything: every output of the DAG written empty (a folder for a
folder output), then ``snakemake --touch --forceall`` records each job as Snakemake records a finished one (its
params, code fingerprint included, and inputs; without --forceall only the jobs that would run are recorded). What
a code or config change then reruns is what it would rerun after a real run; the tests ask Snakemake's own dry run
(``chartrl reruns``).

Run as a script (``python tests/complete_results.py WORKDIR SNAKEFILE [CONFIGFILE ...] [-- SNAKEMAKE ARGS]``) in
the environment whose chartrl the workflow imports; it prints the jobs as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def write_outputs(snakefile: Path, configfiles: list[Path], workdir: Path) -> list[str]:
    """Every output of the DAG, empty, in ``workdir``; the jobs, named as ``chartrl reruns`` names them."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.enums import Quietness
    from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, ResourceSettings

    with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
        workflow_api = api.workflow(
            resource_settings=ResourceSettings(cores=1),
            config_settings=ConfigSettings(configfiles=configfiles),
            snakefile=snakefile,
            workdir=workdir,
        )
        workflow_api.dag(DAGSettings())
        workflow = workflow_api._workflow
        workflow._prepare_dag(forceall=False, ignore_incomplete=True, lock_warn_only=True)
        workflow._build_dag()
        jobs = [job for job in workflow.dag.jobs if job.rule.name != "all"]
        for output in (output for job in jobs for output in job.output):
            path = workdir / str(output)
            if output.is_directory:
                path.mkdir(parents=True, exist_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()
        return sorted(" ".join([job.rule.name, *map(str, job.wildcards_dict.values())]) for job in jobs)


def touch(snakefile: Path, configfiles: list[Path], workdir: Path, env: dict[str, str], extra: list[str]) -> None:
    """``snakemake --touch --forceall``: each job's outputs touched in the DAG's order and recorded as made."""
    command = [Path(sys.executable).with_name("snakemake"), "-s", snakefile, "-d", workdir, "--touch", "--forceall"]
    command += ["--cores", "1", *extra]
    command += [f"--configfile={path}" for path in configfiles]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    if result.returncode != 0:
        raise AssertionError(f"snakemake --touch failed ({result.returncode}):\n{result.stderr[-6000:]}")


def main() -> None:
    cut = sys.argv.index("--") if "--" in sys.argv else len(sys.argv)
    args, extra = sys.argv[1:cut], sys.argv[cut + 1 :]
    workdir, snakefile = Path(args[0]), Path(args[1])
    configfiles = [Path(path) for path in args[2:]]
    jobs = write_outputs(snakefile, configfiles, workdir)
    touch(snakefile, configfiles, workdir, dict(os.environ), extra)
    print(json.dumps(jobs))


if __name__ == "__main__":
    main()
