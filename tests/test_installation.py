"""A job runs the checkout's chartrl: the conda environments install it editable, and a launched job whose
environment holds an older copy is refused before it runs, naming the files that differ and the fix."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chartrl.installation import differing_files

from conftest import REPO

PACKAGE = REPO / "src" / "chartrl"


def installed_copy(site: Path) -> Path:
    """A copy of the package as a non-editable install leaves it in site-packages (the schema link made a file)."""
    copy = site / "chartrl"
    shutil.copytree(PACKAGE, copy, symlinks=False, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def launch(pythonpath: Path, source: Path = REPO) -> subprocess.CompletedProcess:
    """``chartrl launch --launcher inline -- true`` with chartrl imported from ``pythonpath``."""
    env = {**os.environ, "PYTHONPATH": str(pythonpath), "CHARTRL_SOURCE": str(source), "CHARTRL_FORKSERVER": "off"}
    return subprocess.run(
        [sys.executable, "-m", "chartrl", "launch", "--launcher", "inline", "--submission-id", "x", "--", "true"],
        env=env, capture_output=True, text=True, timeout=120, cwd="/",
    )  # fmt: skip


@pytest.mark.slow
def test_a_copy_older_than_the_checkout_is_refused(tmp_path):
    """A reward fixed in the checkout after the environment was made: the job would train with the old reward."""
    copy = installed_copy(tmp_path)
    reward = copy / "rewards" / "symbolic.py"
    reward.write_text(reward.read_text() + "\n# the code of the day the environment was made\n")
    result = launch(tmp_path)
    assert result.returncode == 1
    assert f"the chartrl that {sys.executable} imports ({copy})" in result.stderr
    assert "rewards/symbolic.py differ" in result.stderr and f"pip install --no-deps -e {REPO}" in result.stderr


@pytest.mark.slow
def test_a_verl_job_checks_the_copy_of_the_environment_it_runs_in(tmp_path):
    """A Ray job's driver runs in the head's environment (ray.python), which may be another than its launcher's:
    the verl job itself refuses an older copy there, before verl starts."""
    copy = installed_copy(tmp_path)
    (copy / "judge" / "prompt.py").write_text((copy / "judge" / "prompt.py").read_text() + "\n# older\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "CHARTRL_SOURCE": str(REPO), "CHARTRL_FORKSERVER": "off"}
    result = subprocess.run(
        [sys.executable, "-m", "chartrl", "verl", "train", "--spec", "{}", "--train", "t", "--val", "v", "--out", "o",
         "--", "trainer.total_training_steps=1"],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1 and "judge/prompt.py differ" in result.stderr


@pytest.mark.slow
def test_the_checkouts_own_code_and_an_identical_copy_run(tmp_path):
    assert launch(REPO / "src").returncode == 0  # editable, as .venv and the post-deploy scripts install it
    installed_copy(tmp_path)
    assert launch(tmp_path).returncode == 0  # a copy of the very same files
    assert launch(tmp_path, source=tmp_path / "elsewhere").returncode == 0  # no checkout there: nothing to compare


def test_a_module_added_to_the_checkout_makes_the_copy_stale(tmp_path):
    copy = installed_copy(tmp_path / "site")
    source = tmp_path / "src"
    shutil.copytree(copy, source)
    (source / "rewards" / "new_reward.py").write_text("")
    (source / "NOTES.txt").write_text("")  # not a module: not shipped, not compared
    assert differing_files(copy, source) == ["rewards/new_reward.py"]


@pytest.mark.parametrize("script", ["envs/gpu.post-deploy.sh", "envs/cpu.post-deploy.sh"])
def test_the_conda_environments_install_the_checkout_editable(tmp_path, script):
    """Snakemake runs the post-deploy script once, when it creates the environment: it must install chartrl
    editable, or the environment keeps the code of that day (a stand-in pip records what it is asked)."""
    (tmp_path / "pip").write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "asked"}\n')
    (tmp_path / "pip").chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    env.pop("CHARTRL_SOURCE", None)
    subprocess.run(["bash", str(REPO / script)], cwd=REPO, env=env, check=True, timeout=60)
    asked = (tmp_path / "asked").read_text().split()
    assert asked[:1] == ["install"] and "--no-deps" in asked and asked[-2:] == ["--editable", "."]
