"""``chartrl verl generate`` end to end on the CPU: a verl run's checkpoint merged with verl's model merger, the test
split converted, verl run with ``trainer.val_only`` (the stand-in: verl's config, dataset loader and dump writer,
canned responses), the dump converted into the generations contract and scored by our rule scorer."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from chartrl.config import MlflowSettings
from chartrl.errors import UsageError
from chartrl.rollout.generations import SCHEMA
from chartrl.verl_backend.evaluation import MERGED_FROM, VerlGenerationJob, run_generation_job
from chartrl.verl_backend.job import VerlTrainJob, run_train_job
from chartrl.verl_backend.overrides import eval_overrides, train_overrides

STANDIN = (sys.executable, str(Path(__file__).with_name("verl_standin.py")))
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def trained(standin_served, synth_rows, tiny_model_dir, tmp_path_factory):
    """e10 (tools, Dr.GRPO) trained on the stand-in, in a working directory of its own: gpu.yaml, scaled to 4 steps
    with a checkpoint every 2, e13 evaluating step 2 (verl keeps 3, so all are there)."""
    import os

    from chartrl.config import load_config, to_plain
    from chartrl.data.contract import write_split

    workdir = tmp_path_factory.mktemp("verl-eval")
    scaled = workdir / "scaled.yaml"
    steps = ", ".join(f"{s}: {{checkpoint: 2}}" for s in ("e4", "e5", "e8", "e9", "e13", "e14"))
    scaled.write_text(f"train: {{steps: 4, checkpoint_every: 2}}\nseries: {{{steps}}}\n")
    gpu_config = load_config([REPO / "config" / "gpu.yaml", scaled], root=REPO)
    previous = os.getcwd()
    os.chdir(workdir)
    config = dataclasses.replace(
        gpu_config,
        model=dataclasses.replace(gpu_config.model, path=str(tiny_model_dir)),
        train=dataclasses.replace(gpu_config.train, prompts_per_step=8),
        verl=dataclasses.replace(gpu_config.verl, ppo_mini_batch_size=8),
        evaluate=dataclasses.replace(gpu_config.evaluate, n=2, greedy=False),
    )
    for split in ("train", "val", "test"):
        write_split(synth_rows[split if split != "test" else "val"], workdir / f"{split}.parquet")
    spec = {"series": {"id": "e10", **to_plain(config.resolved["series"]["e10"])}}
    job = VerlTrainJob(
        series=config.series["e10"],
        train=config.train,
        prompts=config.prompts,
        tools=config.tools,
        model=config.model,
        spec=spec,
        overrides=train_overrides(config, "e10", workdir),
        run_dir=Path("results/runs/e10"),
        train_split=workdir / "train.parquet",
        val_split=workdir / "val.parquet",
        mlflow=MlflowSettings("sqlite:///results/mlflow.db", "chartrl-test"),
    )
    run_train_job(job, entry=STANDIN)
    yield config, workdir
    os.chdir(previous)


def generation_job(config, workdir, series_id="e13", overrides=None):
    from chartrl.config import to_plain

    series = config.series[series_id]
    return VerlGenerationJob(
        series={"id": series_id, **to_plain(config.resolved["series"][series_id])},
        of={"id": series.of, **to_plain(config.resolved["series"][series.of])},
        prompts=config.prompts,
        tools=config.tools,
        model=config.model,
        overrides=overrides if overrides is not None else eval_overrides(config, series_id, workdir),
        run_json=workdir / f"results/runs/{series.of}/run.json",
        data=workdir / "test.parquet",
        out=workdir / f"results/eval/{series_id}/generations.parquet",
        gallery=workdir / f"results/eval/{series_id}/gallery.png",
        gallery_size=4,
        response_length=None,
        mlflow=MlflowSettings("sqlite:///results/mlflow.db", "chartrl-test"),
    )


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_verl_checkpoint_is_merged_generated_converted_and_scored(trained, synth_rows):
    from mlflow.tracking import MlflowClient
    from PIL import Image

    from chartrl.evaluate.score import score_generations

    config, workdir = trained
    job = generation_job(config, workdir)
    summary = run_generation_job(job, entry=STANDIN)

    merged = workdir / "results/eval/e13/verl/model"
    assert json.loads((merged / MERGED_FROM).read_text())["actor"].endswith("global_step_2/actor")  # e13's step
    table = pq.read_table(job.out)
    assert table.schema.equals(SCHEMA) and table.num_rows == 2 * len(synth_rows["val"])  # evaluate.n = 2
    records = table.to_pylist()
    asked = [r for r in records if r["sample"] == 0 and r["tool_called"]]
    assert asked and all(r["tool_outcome"] == "executed" and json.loads(r["edited_images"]) for r in asked)
    assert summary["generations"] == table.num_rows and 0 < summary["tool_call_rate"] <= 0.5
    assert Image.open(job.gallery).size[0] > 0
    result, _ = score_generations(job.out, "rule", config.judge)
    assert result["aggregate"]["accuracy"] == pytest.approx(0.5, abs=0.05)  # the stand-in is right on sample 0 only

    client = MlflowClient(tracking_uri=f"sqlite:///{workdir}/results/mlflow.db")
    train_run = json.loads((workdir / "results/runs/e10/run.json").read_text())["mlflow_run_id"]
    runs = client.search_runs(client.get_experiment_by_name("chartrl-test").experiment_id, "tags.stage = 'generate'")
    assert [r.data.tags["mlflow.parentRunId"] for r in runs] == [train_run]
    assert runs[0].data.tags["backend"] == "verl" and runs[0].data.metrics["generate/generations"] == table.num_rows

    before = (merged / MERGED_FROM).stat().st_mtime_ns
    run_generation_job(job, entry=STANDIN)  # a rerun reuses the merged checkpoint
    assert (merged / MERGED_FROM).stat().st_mtime_ns == before


@pytest.mark.slow
def test_generation_overrides_of_another_series_are_refused(trained):
    config, workdir = trained
    job = generation_job(config, workdir, overrides=eval_overrides(config, "e4", workdir))
    with pytest.raises(UsageError, match="not this generation job's"):
        run_generation_job(job, entry=STANDIN)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_generation_that_lacks_questions_fails_and_writes_nothing_to_score(trained, synth_rows, monkeypatch):
    """verl leaves a failed agent loop out of its dump without a word (the stand-in: the last question's): the job
    fails naming the question, instead of scoring the test split on what came back."""
    from chartrl.verl_backend.generations import DumpError

    config, workdir = trained
    job = generation_job(config, workdir, series_id="e14")
    monkeypatch.setenv("STANDIN_FAILED_LOOPS", "1")
    last = synth_rows["val"][-1].id
    with pytest.raises(DumpError, match=rf"covers {len(synth_rows['val']) - 1} of the .* have fewer: {last}\. "):
        run_generation_job(job, entry=STANDIN)
    assert not job.out.exists()


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_evaluate_limit_generates_on_the_first_questions_of_the_split(trained, synth_rows):
    """``evaluate.limit`` N: the first N test questions, as the schema says (verl's own draw of val_max_samples
    rows is a seeded shuffle, so only those N are written for it), each with its evaluate.n samples."""
    config, workdir = trained
    limited = dataclasses.replace(config, evaluate=dataclasses.replace(config.evaluate, limit=3))
    job = generation_job(limited, workdir, overrides=eval_overrides(limited, "e13", workdir))
    run_generation_job(job, entry=STANDIN)
    ids = [r["id"] for r in pq.read_table(job.out).to_pylist()]
    assert sorted(set(ids)) == sorted(r.id for r in synth_rows["val"][:3]) and len(ids) == 3 * config.evaluate.n
