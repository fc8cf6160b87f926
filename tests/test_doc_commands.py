"""Every command of the ```bash blocks in README.md and docs/ runs, in the mode its tool offers for checking, so a
renamed CLI, subcommand or flag fails here and not on a user's first day:

- ``snakemake``: the dry run (``-n``) of the command as written, in an empty working folder, without ``--sdm conda``
  (which needs conda, not on the machines that run the tests); a command that needs a cluster, a Slurm profile, is
  parsed and its profile must exist (``tests/test_conventions.py``);
- ``chartrl``: commands that only read run as written (``config check``, ``plan``, ``verl overrides``, ``reward``
  with a rule reward); the others parse with chartrl's own parser (``tests/test_conventions.py``);
- ``hf`` and ``mlflow``: the exact subcommand's ``--help``, which must list every flag the command uses (``hf
  download --dry-run`` would ask the hub, which tests never reach);
- everything else is a shell built-in, a program of the GPU environment or of a cluster (``srun``, ``conda``), and
  must be one of :data:`ELSEWHERE`, where it runs.

Placeholders are filled as a user fills them: ``<commit>`` with a commit, ``F``/``T`` with measured figures,
``site.yaml`` with the guide's own example (its GPU environment's Python replaced by this one).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BIN, REPO

DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
COMMIT = "0123456789abcdef0123456789abcdef01234567"
PLACEHOLDERS = {
    "<commit>": COMMIT,
    "--fill F": "--fill 0.4",
    "--tokens-per-gpu-second T": "--tokens-per-gpu-second 900",
}
ELSEWHERE = {
    "git": "the clone, before .venv exists",
    "make": "targets checked against the Makefile in tests/test_conventions.py; make setup and make test run in CI",
    "source": "a shell built-in",
    "cd": "a shell built-in",
    "export": "a shell built-in",
    "ls": "a look at the unpacked data",
    "unzip": "unpacks the downloaded release",
    "mv": "renames the unpacked release",
    "srun": "a cluster: the GPU node's driver (docs/cluster.md says so)",
    "conda": "the GPU environment, made on the cluster (docs/cluster.md)",
    "/shared/envs/chartrl-gpu/bin/pip": "the GPU environment's pip, on the cluster",
}
USER_WRITTEN = {
    "e15.yaml": "docs/rewards.md walks through writing it; tests/test_adding_a_reward.py runs it",
    "v4_lean": "the reward docs/rewards.md has the user write; tests/test_adding_a_reward.py runs it",
}
"""What a command names that the user writes first (a file, a reward), with where that is checked instead."""


def bash_lines(text: str) -> list[str]:
    """Each command line of ``text``'s ```bash blocks (indented ones too), in order, a continued line joined;
    comment lines left out."""
    lines = []
    for block in re.findall(r"^ *```(?:bash|sh)\n(.*?)^ *```", text, re.MULTILINE | re.DOTALL):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                lines.append(line)
    return lines


def documented_commands() -> list[tuple[str, str]]:
    """(document, command) for each command of a ```bash block, ``&&`` chains split, ``.venv/bin/`` dropped from a
    program's name, comments kept off."""
    found = []
    for path in DOCUMENTS:
        for line in bash_lines(path.read_text()):
            for command in line.split(" && "):
                command = re.sub(r"^\.venv/bin/", "", command.strip())
                found.append((str(path.relative_to(REPO)), command))
    return found


def filled(command: str, site: Path) -> list[str]:
    for placeholder, value in PLACEHOLDERS.items():
        command = command.replace(placeholder, value)
    words = shlex.split(command, comments=True)
    return [str(site) if word == "site.yaml" else word for word in words]


def site_example(python: str) -> str:
    """docs/cluster.md's site overlay, as written there, its commit filled and ``python`` as the GPU environment's."""
    [example] = re.findall(r"`site.yaml`:\n\n```yaml\n(.*?)```", (REPO / "docs" / "cluster.md").read_text(), re.DOTALL)
    return example.replace("<commit>", COMMIT).replace("/shared/envs/chartrl-gpu/bin/python", python)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """docs/cluster.md's site overlay with this Python as the GPU environment's."""
    path = tmp_path_factory.mktemp("site") / "site.yaml"
    path.write_text(site_example(sys.executable))
    return path


def _program(command: str) -> str:
    return shlex.split(command, comments=True)[0]


def _names_user_file(command: str) -> bool:
    return any(name in command.split() for name in USER_WRITTEN)


def test_every_documented_command_is_checked_somewhere():
    programs = {_program(command) for _, command in documented_commands()}
    unchecked = programs - {"snakemake", "chartrl", "hf", "mlflow"} - set(ELSEWHERE)
    assert unchecked == set(), f"documented programs that no test checks: {sorted(unchecked)}"
    assert {"snakemake", "chartrl", "hf", "mlflow"} <= programs


def _env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "HF_HUB_DISABLE_UPDATE_CHECK": "1"}


# -- snakemake: the dry run ----------------------------------------------------------------------------------------


def snakemake_commands() -> list[tuple[str, str]]:
    """Each distinct snakemake command that runs the workflow here; the Slurm ones need a cluster's sbatch."""
    seen, found = set(), []
    for where, command in documented_commands():
        if _program(command) != "snakemake" or _names_user_file(command) or "slurm" in command:
            continue
        if command not in seen:
            seen.add(command)
            found.append((where, command))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("where,command", snakemake_commands())
def test_every_documented_snakemake_command_dry_runs(where, command, site, tmp_path):
    words = filled(command, site)[1:]
    if "--sdm" in words:  # conda makes the environments; the machine that runs the tests has none
        at = words.index("--sdm")
        del words[at : at + 2]
    if "-n" not in words and "--dry-run" not in words:
        words.insert(0, "-n")
    result = subprocess.run(
        [str(BIN / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path), *words],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"{where}: {command}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"


# -- chartrl: the commands that only read, as written ----------------------------------------------------------------

RUN_AS_WRITTEN = ("config check", "plan", "verl overrides", "reward")


def chartrl_commands() -> list[tuple[str, str]]:
    found = []
    for where, command in documented_commands():
        words = shlex.split(command, comments=True)
        if words[0] != "chartrl" or _names_user_file(command):
            continue
        if " ".join(words[1:3]) in RUN_AS_WRITTEN or words[1] in RUN_AS_WRITTEN:
            if "--name v1_judge" not in command:  # the judge's reward asks an endpoint: it parses (conventions)
                found.append((where, command))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("where,command", chartrl_commands())
def test_every_documented_chartrl_command_that_reads_runs(where, command, site):
    result = subprocess.run(
        [str(BIN / "chartrl"), *filled(command, site)[1:]], cwd=REPO, env=_env(), capture_output=True, text=True
    )
    assert result.returncode == 0, f"{where}: {command}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"


@pytest.mark.slow
def test_the_plan_for_the_site_is_the_users_plan(site):
    # the guide's site overlay names H200s: the plan the guide tells the user to run prices 141 GiB GPUs
    result = subprocess.run(
        [str(BIN / "chartrl"), "plan", "--configfile", "config/gpu.yaml", str(site)],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0 and "8 GPUs of 141 GiB" in result.stdout, result.stderr


# -- hf and mlflow: the exact subcommand's help lists every flag ---------------------------------------------------


def help_commands() -> list[tuple[str, str]]:
    return [(where, c) for where, c in documented_commands() if _program(c) in ("hf", "mlflow")]


@pytest.mark.slow
@pytest.mark.parametrize("where,command", help_commands())
def test_every_documented_hf_and_mlflow_flag_exists(where, command):
    words = shlex.split(command, comments=True)
    depth = 3 if words[0] == "hf" and words[1] in ("datasets", "models") else 2
    result = subprocess.run(
        [str(BIN / words[0]), *words[1:depth], "--help"], env=_env(), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"{where}: {' '.join(words[:depth])} --help\n{result.stderr[-2000:]}"
    flags = {word.split("=", 1)[0] for word in words[depth:] if word.startswith("--")}
    missing = {flag for flag in flags if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", result.stdout)}
    assert missing == set(), f"{where}: {command}: {' '.join(words[:depth])} has no {sorted(missing)}"
