"""Adding a reward is two files and reruns nothing. The worked example of docs/rewards.md ("Add a reward": a module
in src/chartrl/rewards/definitions/ and a branch of the schema's ``$defs/reward``) is added to a copy of the repository,
and Snakemake's DAG (tests/planned_jobs.py: every job's params, where its spec lives, and its input files) is
compared with the copy's before: without a series using the reward every job is the same, and with the docs' overlay
(a train series using it and an eval series of that one) the only jobs that differ are the new series' own, the
report and ``all``. The copy imports its own chartrl (PYTHONPATH), so the new module is registered there only."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from planned_jobs import REPO

pytestmark = pytest.mark.slow

DOCS = REPO / "docs" / "rewards.md"
GPU = REPO / "config" / "gpu.yaml"
COPIED = ("Snakefile", "rules", "workflow", "config", "envs", "src", "tests/planned_jobs.py")


def docs_blocks() -> dict[str, str]:
    """The fenced blocks of docs/rewards.md whose first line is a comment naming their file: name -> the rest."""
    blocks = {}
    for body in re.findall(r"^```(?:python|yaml)\n(.*?)^```", DOCS.read_text(), re.MULTILINE | re.DOTALL):
        first, _, rest = body.partition("\n")
        if first.startswith("# "):
            blocks[first[2:].split(":")[0].strip()] = rest
    return blocks


def add_reward(copy: Path, name: str, module: str, branch: str) -> None:
    """What a person adding a reward does: the module, and in the schema the name and the branch."""
    (copy / "src" / "chartrl" / "rewards" / "definitions" / f"{name}.py").write_text(module)
    schema_path = copy / "workflow" / "schemas" / "config.schema.yaml"
    schema = schema_path.read_text()
    start = schema.index("\n  reward:\n")
    end = schema.index("\n\n  ", start)  # the blank line before the next definition: the end of reward's allOf
    enum = re.compile(r"(        enum: \[)([^\]]*)(\])")
    match = enum.search(schema, start, end)
    names = sorted([*match.group(2).split(", "), name])
    schema = schema[: match.start()] + f"{match.group(1)}{', '.join(names)}{match.group(3)}" + schema[match.end() :]
    end = schema.index("\n\n  ", start)
    schema_path.write_text(schema[:end] + "\n" + branch.rstrip("\n") + schema[end:])


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """A copy of the repository, the jobs it plans for the default and config/gpu.yaml, then the docs' reward added
    to it; and the docs' overlay."""
    blocks = docs_blocks()
    module_path = next(path for path in blocks if path.startswith("src/chartrl/rewards/definitions/"))
    name = Path(module_path).stem
    copy = tmp_path_factory.mktemp("repository")
    for item in COPIED:
        source, target = REPO / item, copy / item
        if source.is_dir():
            shutil.copytree(source, target, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    (copy / "tests" / "fixtures").symlink_to(REPO / "tests" / "fixtures")  # data the embedded default reads
    before = plans_in(copy, [[], [GPU]], copy / "work")
    add_reward(copy, name, blocks[module_path], blocks["workflow/schemas/config.schema.yaml"])
    overlay = copy / "overlay.yaml"
    overlay.write_text(next(text for path, text in blocks.items() if path.endswith(".yaml") and "schema" not in path))
    return name, copy, overlay, before


def plans_in(copy: Path, configs: list[list[Path]], workdir: Path) -> list[dict]:
    """tests/planned_jobs.py run on the copy, with the copy's chartrl."""
    request = json.dumps([[str(path) for path in files] for files in configs])
    env = {**os.environ, "PYTHONPATH": str(copy / "src"), "CHARTRL_SOURCE": str(copy)}
    result = subprocess.run(
        [sys.executable, str(copy / "tests" / "planned_jobs.py"), str(workdir)],
        input=request,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-6000:]
    return json.loads(result.stdout.splitlines()[-1])


def test_the_docs_reward_is_two_files_and_scores_its_example(example):
    name, copy, _, _ = example
    script = (
        "import json, sys; from chartrl.rewards import REWARDS, RewardInput, get_reward, reward_module\n"
        f"d = REWARDS[{name!r}]; e = d.example\n"
        "[r] = get_reward(d.name, e.params)([RewardInput(e.response, e.truth, **e.metadata)])\n"
        "print(json.dumps({'overall': r['overall'], 'expected': e.overall, 'module': reward_module(d.name),"
        " 'parts': list(r) == list(d.parts)}))"
    )
    env = {**os.environ, "PYTHONPATH": str(copy / "src")}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout)
    assert out["overall"] == pytest.approx(out["expected"]) and out["parts"]
    assert out["module"] == f"chartrl.rewards.definitions.{name}"


def test_adding_a_reward_reruns_nothing_and_its_series_only_adds_its_own_jobs(example, tmp_path):
    name, copy, overlay, repository = example
    run_series = tmp_path / "run_series.yaml"
    series = yaml.safe_load(overlay.read_text())["series"]
    [trained] = [key for key, entry in series.items() if entry["kind"] == "train"]
    run_series.write_text(yaml.safe_dump({"run_series": [*yaml.safe_load(GPU.read_text())["run_series"], *series]}))
    default, on_gpu, default_new, gpu_new = plans_in(
        copy, [[], [GPU], [overlay], [GPU, overlay, run_series]], copy / "work"
    )
    assert default == repository[0] and on_gpu == repository[1]  # the reward alone changes no job
    for base, new in ((repository[0], default_new), (repository[1], gpu_new)):
        assert set(base) <= set(new)
        changed = {job.split("|")[0] for job in base if new[job] != base[job]}
        assert changed == {"report", "all"}  # the report shows every series
        added = set(new) - set(base)
        assert added and all(re.search(rf"series=({'|'.join(series)})\b", job) for job in added), sorted(added)
        train = new[f"train|series={trained}"]
        assert f"rewards/definitions/{name}.py" in json.loads(train["params"]["code"])["code"]
        assert json.loads(train["params"]["spec"])["series"]["reward"]["name"] == name
