"""The shortcut filter on the verl backend (``chartrl verl shortcut-answers``): the control questions written as
verl's dataset, verl run with ``trainer.val_only`` (the stand-in: verl's config, dataset loader and dump writer;
canned responses: the first sample of each question right, the others "0"), the dump converted to the answers
file, which ``chartrl shortcut filter`` reads as on the local backend."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from chartrl.errors import UsageError
from chartrl.verl_backend.shortcut import ShortcutAnswersJob, run_shortcut_answers_job, shortcut_overrides

STANDIN = (sys.executable, str(Path(__file__).with_name("verl_standin.py")))
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def verl_filter(synth_rows, tiny_model_dir, tmp_path, monkeypatch):
    from chartrl.config import load_config
    from chartrl.data.contract import write_split

    monkeypatch.chdir(tmp_path)
    overlay = tmp_path / "filter.yaml"
    overlay.write_text(
        f"model: {{path: {tiny_model_dir}}}\n"
        "datasets:\n  chartqa:\n    shortcut_filter: {k: 2, threshold: 0.5, max_questions: 6}\n"
        "series:\n  e1: {shortcut_filter: true}\n"
    )
    config = load_config([REPO / "config" / "gpu.yaml", overlay], root=REPO)
    write_split(synth_rows["train"], tmp_path / "train.parquet")
    return config, tmp_path


def answers_job(config, workdir, overrides=None):
    return ShortcutAnswersJob(
        dataset="chartqa",
        settings=config.datasets["chartqa"].shortcut_filter,
        prompts=config.prompts,
        tools=config.tools,
        model=config.model,
        overrides=overrides if overrides is not None else shortcut_overrides(config, "chartqa", workdir),
        data=workdir / "train.parquet",
        out=workdir / "results" / "filter" / "chartqa" / "answers.parquet",
    )


@pytest.mark.slow
def test_answers_on_verl_then_the_same_filter(verl_filter):
    from chartrl.cli import main
    from chartrl.config import to_plain

    config, workdir = verl_filter
    overrides = shortcut_overrides(config, "chartqa", workdir)
    values = dict(o.split("=", 1) for o in overrides)
    assert values["actor_rollout_ref.rollout.agent.default_agent_loop"] == "single_turn_agent"  # no tools
    assert values["actor_rollout_ref.rollout.val_kwargs.n"] == "2" and values["trainer.val_only"] == "True"
    assert values["actor_rollout_ref.rollout.val_kwargs.do_sample"] == "True"
    job = answers_job(config, workdir)
    assert run_shortcut_answers_job(job, entry=STANDIN) == 6 * 2 * 2  # questions x controls x k
    answers = pq.read_table(job.out).to_pylist()
    assert {a["id"].rsplit("@", 1)[1] for a in answers} == {"blank", "shuffled"}
    assert all(a["sample"] in (0, 1) and not a["tool_called"] for a in answers)

    settings = to_plain(config.resolved["datasets"]["chartqa"]["shortcut_filter"])
    for threshold, found in ((0.5, 6), (0.75, 0)):  # the stand-in answers right 1 of 2 times under each control
        filter_settings = {"id": "chartqa", **settings, "threshold": threshold}
        spec = json.dumps({"filter": filter_settings, "evaluate": to_plain(config.resolved["evaluate"])})
        card_path = workdir / f"card_{threshold}.json"
        code = main(["shortcut", "filter", "--spec", spec, "--data", str(job.data), "--answers", str(job.out),
                     "--out", str(workdir / f"train_{threshold}.parquet"), "--card", str(card_path),
                     "--backend", "verl", "--tracking-uri", f"sqlite:///{workdir}/mlflow.db"])  # fmt: skip
        card = json.loads(card_path.read_text())
        assert code == 0 and card["backend"] == "verl" and card["examined"] == 6 and card["shortcut"] == found
        assert card["overall"]["accuracy_without_chart"]["blank"]["mean"] == 0.5


def test_overrides_of_another_job_are_refused(verl_filter):
    config, workdir = verl_filter
    overrides = [o for o in shortcut_overrides(config, "chartqa", workdir) if "val_kwargs.n=" not in o]
    with pytest.raises(UsageError, match=r"val_kwargs.n=None \(expected '2'\)"):
        run_shortcut_answers_job(answers_job(config, workdir, overrides + ["x.y=1"]), entry=STANDIN)
