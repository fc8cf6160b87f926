"""docs/cluster.md, sections 1 to 5, walked through in order as a user does before booking a GPU: in a fresh clone of
this checkout, every command of those sections' ```bash blocks, as written and in the order written, each one
starting where the one before left the shell (its folder, its exported variables, the `.venv` that `make setup`
made, the results the data stage wrote), up to the commands that need what this machine has not:

- a GPU (the smoke run): its `snakemake` command is dry-run (`-n`, without `--sdm conda`), so its plan of jobs is
  checked and nothing is started;
- the hub (the ChartQA release and the model's snapshot): the real ChartQA sample in `tests/fixtures/chartqa_real`
  takes the release's place, named in the site overlay as `config/rehearsal.yaml` names it;
- a cluster (`srun`, `conda`, the site's Slurm profile): named with where else it is checked.

The site overlay is the guide's own example (`site.yaml`), with its placeholders filled as a user fills them: the
GPU environment's Python (the clone's `.venv` stands in), an MLflow server (one this test starts), a commit.
Run by `make guide-check` (and `.ci/run`); `make test` leaves it out.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from test_doc_commands import PLACEHOLDERS, bash_lines, site_example

from conftest import REPO, mlflow_server

pytestmark = [pytest.mark.guide, pytest.mark.slow]

GUIDE = REPO / "docs" / "cluster.md"
SAMPLE_DATA = """
datasets:                     # the real ChartQA sample stands in for the release the hub would give (section 3)
  chartqa:
    path: {sample}
    annotations: false
    refocus_boxes: {{test: test/refocus_chartqa_vcot_test.jsonl}}
    carve: {{from: test, shares: {{train: 3, val: 1, test: 2}}, seed: 0}}
"""

NOT_HERE = {
    "srun ": "a cluster's GPU node (its driver); chartrl.verl_backend.driver checks it in every verl job",
    "conda env create": "the GPU environment, made on the cluster (envs/gpu.yaml is checked by tests/test_envs.py)",
    "/shared/envs/chartrl-gpu/bin/pip": "the GPU environment's pip, on the cluster",
    "hf datasets info": "the hub (no network here); flags checked against --help in tests/test_doc_commands.py",
    "hf models info": "the hub; flags checked against --help in tests/test_doc_commands.py",
    "hf download": "the hub; flags checked against --help in tests/test_doc_commands.py",
    "cd data && unzip": "unpacks the release the hub gives; the real sample stands in for it (site.yaml)",
    "ls data/chartqa/train": "a look at the unpacked release",
    "snakemake --workflow-profile my-slurm": "the site's Slurm; make slurm-check runs the profile on a one-node Slurm",
}
"""A command of sections 1-5 that does not run here (its start, as written, less ``.venv/bin/``), and why."""

GPU_RUN = "--resources gpu="
"""A snakemake command that starts GPU jobs: dry-run here."""

FILLED = {"<this repository>": str(REPO), **PLACEHOLDERS}
"""Placeholders filled as a user fills them (tests/test_doc_commands.py's, and the clone's source)."""


def guide_commands() -> list[tuple[str, str]]:
    """(section, command line) for each line of the ```bash blocks of sections 1-5, in order, continued lines
    joined, comments dropped."""
    text = GUIDE.read_text()
    start, end = text.index("\n## 1. "), text.index("\n## 6. ")
    found, section = [], None
    for piece in re.split(r"(^## \d+\..*$)", text[start:end], flags=re.MULTILINE):
        if piece.startswith("## "):
            section = piece.split(".")[0].removeprefix("## ")
            continue
        found += [(section, line.split(" #")[0].strip()) for line in bash_lines(piece)]
    return found


def _bare(line: str) -> str:
    """A command line without the ``.venv/bin/`` its program is written with."""
    return line.removeprefix(".venv/bin/")


def _fresh_clone(into: Path) -> None:
    """``git clone`` of this checkout, with its uncommitted changes and new files (the code under test)."""
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(into)], check=True)
    diff = subprocess.run(["git", "diff", "HEAD", "--binary"], cwd=REPO, capture_output=True, check=True).stdout
    if diff:
        subprocess.run(["git", "apply", "--whitespace=nowarn"], cwd=into, input=diff, check=True)
    untracked = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, untracked.split("\0")):
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, into / name)


def _user_env() -> dict[str, str]:
    """A login shell's environment: no virtual environment active (this test's own is taken off PATH)."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "CHARTRL_FORKSERVER")}
    outer = str(REPO / ".venv" / "bin")
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != outer)
    return env


class Shell:
    """Where the walk-through stands: the folder, the exported variables, each command's output."""

    def __init__(self, cwd: Path, env: dict[str, str]):
        self.cwd, self.env, self.log = cwd, env, []

    def run(self, words: list[str], timeout: int = 900) -> str:
        program = words[0]
        if program.startswith(".venv/"):
            program = str(self.cwd / program)
        result = subprocess.run(
            [program, *words[1:]], cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        self.log.append((" ".join(words), result.returncode))
        assert result.returncode == 0, f"{' '.join(words)}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        return result.stdout + result.stderr


@pytest.fixture(scope="module")
def walked(tmp_path_factory):
    """Every command of sections 1-5 in order; returns the shell, the outputs by command and the skipped ones."""
    home = tmp_path_factory.mktemp("login")
    with mlflow_server(f"sqlite:///{home}/mlflow.db", home) as server:
        shell = Shell(home, _user_env())
        outputs, skipped, site_written = {}, [], False
        for section, line in guide_commands():
            reason = next((why for start, why in NOT_HERE.items() if _bare(line).startswith(start)), None)
            if reason:
                skipped.append((section, line, reason))
                continue
            for command in line.split(" && "):
                for placeholder, value in FILLED.items():
                    command = command.replace(placeholder, value)
                words = shlex.split(command)
                if "site.yaml" in words and not site_written:  # the user writes the guide's overlay first
                    site = site_example(str(shell.cwd / ".venv/bin/python")).replace("http://mlflow-host:5000", server)
                    site += SAMPLE_DATA.format(sample=shell.cwd / "tests/fixtures/chartqa_real")
                    (shell.cwd / "site.yaml").write_text(site)
                    site_written = True
                if words[0] == "git":
                    assert words[:2] == ["git", "clone"], command
                    _fresh_clone(shell.cwd / words[3])
                    shell.log.append((command, 0))
                elif words[0] == "cd":
                    shell.cwd = (shell.cwd / words[1]).resolve()
                elif words[0] == "export":
                    name, _, value = words[1].partition("=")
                    shell.env[name] = value
                elif words[0] == "make":
                    outputs[command] = shell.run(words, timeout=1200)
                elif words[0].endswith("snakemake") and GPU_RUN in command:
                    if "--sdm" in words:  # conda makes the environments; this machine has none
                        at = words.index("--sdm")
                        del words[at : at + 2]
                    outputs[command] = shell.run([words[0], "-n", *words[1:]])
                else:
                    outputs[command] = shell.run(words)
        yield shell, outputs, skipped


def test_sections_1_to_5_run_in_order_up_to_the_gpu(walked):
    shell, outputs, skipped = walked
    ran = [command for command, _ in shell.log]
    assert ran[:3] == [f"git clone {REPO} chartrl", "make setup", "make rehearsal"], ran[:3]
    assert (shell.cwd / "build/rehearsal/results/report/index.html").exists()  # section 1: the rehearsal's report
    # every command either ran or is named with why it cannot run here
    assert {start for _, line, _ in skipped for start in NOT_HERE if _bare(line).startswith(start)} == set(NOT_HERE)
    assert len(ran) >= 12, ran


def test_the_data_stage_ran_on_the_real_sample_before_any_gpu(walked):
    shell, outputs, _ = walked
    card = json.loads((shell.cwd / "results/data/chartqa/card.json").read_text())
    coverage = card["splits"]["train"]["bbox_coverage"]
    assert coverage["bar_charts_with_boxes"] > 0 and coverage["question_fraction"] > 0
    assert not (shell.cwd / "results/runs").exists()  # nothing trained: the data stage alone


def test_the_plans_are_the_sites_and_the_smoke_run_is_dry_run(walked):
    _, outputs, _ = walked
    plans = {command: out for command, out in outputs.items() if " plan " in f" {command} "}
    assert len(plans) >= 4, list(plans)
    for command, out in plans.items():
        if "site.yaml" in command:
            assert "of 141 GiB" in out, f"{command}: the site's H200s are not in the plan\n{out[-2000:]}"
        assert "total" in out, out[-2000:]
    [smoke] = [out for command, out in outputs.items() if GPU_RUN in command]
    for job in ("train", "generate"):
        assert re.search(rf"^{job}\b", smoke, re.MULTILINE), smoke[-3000:]
