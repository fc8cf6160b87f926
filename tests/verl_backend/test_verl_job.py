"""``chartrl verl train`` end to end on the CPU, with a stand-in for verl's trainer (``verl_standin.py``: verl's
own config composition, validation and MLflow logger; no GPU work): data converted, tool YAML written, the series'
MLflow run created and handed to verl, metrics exported, run.json written; a verl failure fails the job."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from chartrl.config import MlflowSettings
from chartrl.tracking import file_sha256
from chartrl.verl_backend.job import VerlJobError, VerlTrainJob, run_train_job
from chartrl.verl_backend.overrides import train_overrides

STANDIN = (sys.executable, str(Path(__file__).with_name("verl_standin.py")))
pytestmark = pytest.mark.usefixtures("standin_served")


@pytest.fixture
def job(gpu_config, synth_rows, tiny_model_dir, tmp_path, monkeypatch):
    from chartrl.config import to_plain
    from chartrl.data.contract import write_split

    monkeypatch.chdir(tmp_path)
    config = dataclasses.replace(
        gpu_config,
        model=dataclasses.replace(gpu_config.model, path=str(tiny_model_dir)),
        train=dataclasses.replace(gpu_config.train, prompts_per_step=8, steps=2, checkpoint_every=2),  # 2 of 220
        verl=dataclasses.replace(gpu_config.verl, ppo_mini_batch_size=8),
    )
    write_split(synth_rows["train"], tmp_path / "train.parquet")
    write_split(synth_rows["val"], tmp_path / "val.parquet")
    series = config.series["e10"]
    spec = {
        "series": {"id": "e10", **to_plain(config.resolved["series"]["e10"])},
        "model": {**to_plain(config.resolved["model"]), "path": config.model.path},  # as the train rule passes it
    }
    return VerlTrainJob(
        series=series,
        train=config.train,
        prompts=config.prompts,
        tools=config.tools,
        model=config.model,
        spec=spec,
        overrides=train_overrides(config, "e10", tmp_path),
        run_dir=Path("results/runs/e10"),
        train_split=tmp_path / "train.parquet",
        val_split=tmp_path / "val.parquet",
        mlflow=MlflowSettings("sqlite:///results/mlflow.db", "chartrl-test"),
    )


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_verl_job_trains_logs_and_summarises(job, tmp_path):
    from mlflow.tracking import MlflowClient

    summary = run_train_job(job, entry=STANDIN)

    run_dir = tmp_path / "results/runs/e10"
    assert (run_dir / "verl/train.parquet").is_file() and (run_dir / "verl/tools.yaml").is_file()
    assert json.loads((run_dir / "run.json").read_text()) == summary
    assert summary["backend"] == "verl" and summary["last_step"] == 2
    assert summary["checkpoints"]["last"].endswith("global_step_2/actor")
    assert summary["model"] == {"path": job.model.path, "revision": None}  # the commit that trained, with the model
    assert 0 < summary["measured"]["fill"] <= 1  # from verl's prompt_length/mean and response_length/mean
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [0, 1, 2]
    # the stand-in's canned validation answers question i right when i % 4 <= step: 1/4 before training, 3/4 at 2
    accuracy = [line.get("val/accuracy") for line in lines]
    assert accuracy[0] == pytest.approx(0.25, abs=0.1) and accuracy[1] is None and accuracy[2] > accuracy[0]
    assert summary["best_val"] == {"step": 2, "accuracy": accuracy[2]}
    assert lines[0]["val-aux/synthchart/accuracy/mean_at_1"] == accuracy[0]  # verl's own name, kept
    for line in lines[1:]:  # the local trainer's names, beside verl's
        assert line["reward/overall"] == line["critic/score/mean"]
        assert line["rollout/response_length"] == line["response_length/mean"] > 0
    assert lines[2]["reward/overall"] > lines[1]["reward/overall"]  # more samples answer right at step 2
    # validation: our reward's protocol indicators, translated (e10 is a tool series; right answers call a tool)
    # (only right answers call, and only on charts with x labels; every call keeps labels the chart has)
    assert 0 < lines[2]["val/tool_call_ratio"] <= accuracy[2] and lines[2]["val/tool_success"] == 1.0
    assert lines[2]["val/format_rate"] == 1.0 and lines[2]["val/correct_label_ratio"] > 0
    assert {"val_reward/accuracy", "val_reward/format"} <= set(lines[2])  # e10's v3_gra parts, at validation
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/results/mlflow.db")
    run = client.get_run(summary["mlflow_run_id"])
    assert run.info.run_name == "e10/train" and run.info.status == "FINISHED"
    assert run.data.tags["backend"] == "verl" and run.data.params["series.algorithm"] == "drgrpo"
    assert run.data.params["model.path"] == job.model.path and run.data.params["model.revision"] == "None"
    assert run.data.params["algorithm/norm_adv_by_std_in_grpo"] == "False"  # verl logged its config there too
    # the local trainer's names are logged into the run as well, at their steps, so MLflow says what the report says
    assert run.data.metrics["reward/overall"] == lines[2]["reward/overall"]
    history = client.get_metric_history(run.info.run_id, "val/tool_call_ratio")
    assert sorted((m.step, m.value) for m in history) == [(s, lines[s]["val/tool_call_ratio"]) for s in (0, 2)]
    assert [a.path for a in client.list_artifacts(run.info.run_id)] == ["overrides.txt"]
    inputs = {i.dataset.name: i.dataset.digest for i in run.inputs.dataset_inputs}  # the splits, by their content
    assert inputs == {f"{tmp_path.name}/{s}": file_sha256(tmp_path / f"{s}.parquet")[:12] for s in ("train", "val")}


@pytest.mark.slow
def test_a_failing_verl_fails_the_job_and_its_run(job, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("STANDIN_EXIT", "3")
    with pytest.raises(VerlJobError, match="verl exited with code 3"):
        run_train_job(job, entry=STANDIN)
    state = json.loads((tmp_path / "results/runs/e10/verl/job.json").read_text())
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/results/mlflow.db")
    assert client.get_run(state["mlflow_run_id"]).info.status == "FAILED"
    assert not (tmp_path / "results/runs/e10/run.json").exists()


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_verl_training_without_mlflow_fails_the_job_naming_the_store_and_run(job, tmp_path, monkeypatch):
    """verl's logger cannot open the store, warns, trains on without MLflow and exits 0 (the stand-in runs verl's
    own Tracking against a store it cannot open): the job fails instead of succeeding with no metrics."""
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("STANDIN_MLFLOW_URI", f"sqlite:///{tmp_path}/no-such-folder/mlflow.db")
    with pytest.raises(VerlJobError) as raised:
        run_train_job(job, entry=STANDIN)
    run_id = json.loads((tmp_path / "results/runs/e10/verl/job.json").read_text())["mlflow_run_id"]
    message = str(raised.value)
    assert f"no training step reached MLflow run {run_id} at sqlite:///{tmp_path}/results/mlflow.db" in message
    assert (tmp_path / "results/runs/e10/checkpoints/global_step_2").is_dir()  # verl itself had succeeded
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/results/mlflow.db")
    assert client.get_run(run_id).info.status == "FAILED"
    assert not (tmp_path / "results/runs/e10/run.json").exists()


def test_a_job_whose_mlflow_server_is_down_fails_before_verl_starts(job, tmp_path, monkeypatch):
    """An unreachable MLflow server fails the job at once, naming the address and the node, before any data is
    converted or verl started (which would train on without tracking once its logger gave up)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # MLflow's own client would retry for minutes
    job.mlflow = MlflowSettings(f"http://127.0.0.1:{closed}", "chartrl-test")
    with pytest.raises(VerlJobError, match=rf"e10: cannot reach the MLflow server at .*'http://127.0.0.1:{closed}'"):
        run_train_job(job, entry=STANDIN)
    assert not (tmp_path / "results/runs/e10/verl").exists()  # nothing prepared, verl never started


def test_a_tracking_uri_is_shown_without_its_credentials():
    from chartrl.tracking import shown_uri

    assert shown_uri("https://user:s3cret@mlflow.example.org/") == "https://***@mlflow.example.org/"
    assert shown_uri("sqlite:////abs/results/mlflow.db") == "sqlite:////abs/results/mlflow.db"


def test_overrides_that_do_not_read_the_jobs_files_are_refused(job):
    from chartrl.errors import UsageError

    other = dataclasses.replace(job, overrides=[o.replace("/e10/", "/e11/") for o in job.overrides])
    with pytest.raises(UsageError, match="do not point at this job's files"):
        run_train_job(other, entry=STANDIN)


def test_the_test_seam_replaces_verls_entry_only_when_set(monkeypatch, caplog):
    from chartrl.verl_backend.job import ENTRY_VARIABLE, VERL_MAIN, verl_entry

    monkeypatch.delenv(ENTRY_VARIABLE, raising=False)
    assert verl_entry() == VERL_MAIN
    monkeypatch.setenv(ENTRY_VARIABLE, "/usr/bin/python3 '/tmp/a stand-in.py'")
    assert verl_entry() == ("/usr/bin/python3", "/tmp/a stand-in.py")
    assert "instead of verl.trainer.main_ppo" in caplog.text


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_rerun_continues_its_own_checkpoints_and_sets_aside_those_of_other_inputs(job, synth_rows, tmp_path):
    """verl's ``resume_mode=auto`` continues whatever checkpoint its folder holds (the stand-in finds it with verl's
    own ``find_latest_ckpt_path``): the job leaves it only its own. The same job rerun resumes at step 2 in the same
    MLflow run; a changed train split, or a changed spec, starts verl from step 0 in a new run, the old checkpoints
    moved under ``superseded/<their key>/``; so would a changed spec."""
    from mlflow.tracking import MlflowClient

    from chartrl.data.contract import write_split

    run_dir, log = tmp_path / "results/runs/e10", tmp_path / "verl.log"
    standin = ("sh", "-c", f'exec "$0" "$@" > {log} 2>&1', *STANDIN)  # verl's output, to read here

    first = run_train_job(job, entry=standin)
    again = run_train_job(job, entry=standin)
    assert "stand-in: resuming from " in log.read_text()
    assert again["mlflow_run_id"] == first["mlflow_run_id"] and again["job_key"] == first["job_key"]

    write_split(list(reversed(synth_rows["train"])), job.train_split)  # the same rows, another file
    changed = dataclasses.replace(job)  # a fresh object: the key is computed once per job
    second = run_train_job(changed, entry=standin)
    out = log.read_text()
    assert "stand-in: training from scratch" in out and "resuming" not in out
    assert second["job_key"] != first["job_key"] and second["mlflow_run_id"] != first["mlflow_run_id"]
    aside = run_dir / "superseded" / first["job_key"] / "checkpoints"
    assert (aside / "global_step_2/actor/fsdp_config.json").is_file()
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [0, 1, 2]  # trained again, from step 0
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/results/mlflow.db")
    assert client.get_run(first["mlflow_run_id"]).data.tags["chartrl.superseded"] == "true"

    # a changed spec (or override) is another key too, and so another job: its checkpoints would be set aside alike
    assert dataclasses.replace(changed, spec={**job.spec, "keep_steps": [2]}).key != second["job_key"]
    assert dataclasses.replace(changed, overrides=[*job.overrides, "trainer.seed=1"]).key != second["job_key"]
