"""The local trainer on the tiny model: it updates every parameter, logs every step once, and a run killed
mid-way (SIGKILL) and rerun ends with the same metrics and MLflow history as an uninterrupted run, and a run
stopped by SIGTERM ends its MLflow run KILLED."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import BIN, job_environment, raw_default_config, stop_forkservers

# A shaped reward whose length term varies with the response length, so the briefly warm-started policy's groups
# are rarely degenerate and the steps really update.
SERIES = {
    "id": "e6",
    "generation": "v2",
    "kind": "train",
    "tools": True,
    "algorithm": "grpo",
    "reward": {
        "name": "v2_shaped",
        "d_format": 0.1,
        "d_length": 0.5,
        "d_tool": 0.1,
        "length_budget": 2,
        "length_ramp": 12,
    },
}
TRAIN = {
    "dataset": "synth",
    "steps": 4,
    "prompts_per_step": 2,
    "val_every": 2,
    "val_rows": 3,
    "checkpoint_every": 1,
    "micro_batch_size": 3,
    "lr": 0.001,
}
ROLLOUT = {"n": 3, "max_new_tokens": 16, "batch_size": 8}


def _write_splits(synth_rows, folder: Path) -> tuple[Path, Path]:
    from chartrl.data.contract import write_split

    return write_split(synth_rows["train"], folder / "train.parquet"), write_split(
        synth_rows["val"], folder / "val.parquet"
    )


def _spec(series=SERIES, train=TRAIN) -> str:
    raw = raw_default_config()
    return json.dumps(
        {
            "series": series,
            "train": train,
            "rollout": ROLLOUT,
            "prompts": {},
            "tools": {},
            "judge": raw.get("judge", {}),
        }
    )


def _train_command(model, train, val, out, db, series=SERIES, train_cfg=TRAIN):
    return [
        sys.executable,
        "-m",
        "chartrl",
        "train",
        "--spec",
        _spec(series, train_cfg),
        "--model",
        str(model),
        "--train",
        str(train),
        "--val",
        str(val),
        "--out",
        str(out),
        "--tracking-uri",
        f"sqlite:///{db}",
        "--experiment",
        "t",
    ]


def _metrics(path: Path) -> list[dict]:
    """metrics.jsonl without the wall-clock figures (timing, throughput), which differ run to run."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [{k: v for k, v in m.items() if not k.startswith(("timing/", "perf/"))} for m in lines]


@pytest.fixture(scope="module")
def splits(synth_rows, tmp_path_factory):
    return _write_splits(synth_rows, tmp_path_factory.mktemp("splits"))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The environment of the module's runs that neither kill nor stop a process: chartrl's forkserver on, as the
    workflow runs its jobs, so that they fork from one server that imported torch and transformers once. The runs
    that are killed or stopped run in processes of their own, and the tests of a served run killed start their own
    server."""
    folder = tmp_path_factory.mktemp("served")
    yield _served_environment(folder)
    stop_forkservers(folder)


@pytest.fixture(scope="module")
def uninterrupted(warm_model_dir, splits, served, tmp_path_factory):
    folder = tmp_path_factory.mktemp("run")
    result = subprocess.run(
        _train_command(warm_model_dir, *splits, folder / "e6", folder / "mlflow.db"),
        capture_output=True,
        text=True,
        env=served,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return folder


@pytest.mark.slow
def test_training_logs_the_loss_and_changes_every_trainable_parameter(uninterrupted, warm_model_dir):
    import torch
    from safetensors.torch import load_file

    metrics = _metrics(uninterrupted / "e6/metrics.jsonl")
    assert [m["step"] for m in metrics] == [0, 1, 2, 3, 4]
    steps = metrics[1:]
    assert all("reward/overall" in m for m in steps)
    assert sum("actor/loss" in m and "actor/grad_norm" in m for m in steps) >= 3  # a fully degenerate step is skipped
    steps = [m for m in steps if "actor/loss" in m]
    for val_step in (0, 2, 4):
        assert {"val/accuracy", "val_shuffled_images/accuracy", "val/tool_call_ratio"} <= set(metrics[val_step])
    # each validation step's per-question scores, whose mean is the logged val/accuracy
    items = [json.loads(line) for line in (uninterrupted / "e6/val_items.jsonl").read_text().splitlines()]
    assert [line["step"] for line in items] == [0, 2, 4]
    for line in items:
        assert len(line["scores"]) == TRAIN["val_rows"] and set(line["scores"].values()) <= {0.0, 1.0}
        mean = sum(line["scores"].values()) / len(line["scores"])
        assert mean == pytest.approx(metrics[line["step"]]["val/accuracy"])
    assert not (uninterrupted / "e6/val_items.partial.jsonl").exists()
    for key in (
        "rollout/tool_call_ratio",
        "rollout/tool_success",
        "rollout/format_rate",
        "rollout/response_length",
        "train/degenerate_fraction",
        "actor/kl",
        "actor/clipfrac",
        "reward/length",
        "reward/format",
        "reward/tool",
    ):
        assert key in steps[0], key
    run = json.loads((uninterrupted / "e6/run.json").read_text())
    start = load_file(warm_model_dir / "model.safetensors")
    end = load_file(Path(run["checkpoints"]["last"]) / "model.safetensors")
    unchanged = [k for k in start if torch.equal(start[k], end[k])]
    assert unchanged == []
    assert set(run["checkpoints"]["steps"]) <= {"3", "4", str(run["best_val"]["step"])}  # keep_last 2 + best


@pytest.mark.slow
def test_the_train_run_carries_its_splits_as_dataset_inputs(uninterrupted, splits):
    from mlflow.tracking import MlflowClient

    from chartrl.tracking import file_sha256

    client = MlflowClient(tracking_uri=f"sqlite:///{uninterrupted}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("t").experiment_id], "attributes.run_name = 'e6/train'")
    inputs = {
        {t.key: t.value for t in i.tags}["mlflow.data.context"]: (i.dataset.source, i.dataset.digest)
        for i in run.inputs.dataset_inputs
    }
    train, val = splits
    assert inputs == {
        "train": (json.dumps({"uri": str(train.resolve())}), file_sha256(train)[:12]),
        "validation": (json.dumps({"uri": str(val.resolve())}), file_sha256(val)[:12]),
    }


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_metrics_and_logs_each_step_once(
    uninterrupted, warm_model_dir, splits, served, tmp_path
):
    from mlflow.tracking import MlflowClient

    out, db = tmp_path / "e6", tmp_path / "mlflow.db"
    command = _train_command(warm_model_dir, *splits, out, db)
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 300
    while not (out / "checkpoints/step_2").exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    assert process.poll() is None, "the run ended before it could be killed"
    os.killpg(process.pid, signal.SIGKILL)  # mid-run: after checkpoint 2, somewhere in step 3
    process.wait()
    assert not (out / "run.json").exists()
    resumed = subprocess.run(command, capture_output=True, text=True, env=served)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming e6 from checkpoint step_" in resumed.stderr

    assert _metrics(out / "metrics.jsonl") == _metrics(uninterrupted / "e6/metrics.jsonl")
    assert (out / "val_items.jsonl").read_text() == (uninterrupted / "e6/val_items.jsonl").read_text()
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    reference = MlflowClient(tracking_uri=f"sqlite:///{uninterrupted / 'mlflow.db'}")
    run_id = json.loads((out / "run.json").read_text())["mlflow_run_id"]
    ref_id = json.loads((uninterrupted / "e6/run.json").read_text())["mlflow_run_id"]
    for key in ("reward/overall", "actor/loss", "val/accuracy"):
        history = [(m.step, m.value) for m in client.get_metric_history(run_id, key)]
        assert len({step for step, _ in history}) == len(history), f"{key} logged a step twice"
        expected = [(m.step, m.value) for m in reference.get_metric_history(ref_id, key)]
        assert [step for step, _ in sorted(history)] == [step for step, _ in sorted(expected)]
        assert [value for _, value in sorted(history)] == pytest.approx([value for _, value in sorted(expected)])
    assert client.get_run(run_id).info.status == "FINISHED"


@pytest.mark.slow
def test_an_extra_seeds_run_validates_at_its_last_step_only_and_trains_the_same(
    uninterrupted, warm_model_dir, splits, served, tmp_path
):
    """An extra seed's run (extra_seeds) skips the validations before its last step: the same seed's steps, as
    an extra seed, are the main run's to the bit, and its one validation is the main run's last."""
    out, db = tmp_path / "e6", tmp_path / "mlflow.db"
    command = [*_train_command(warm_model_dir, *splits, out, db), "--extra-seed", "0"]
    result = subprocess.run(command, capture_output=True, text=True, env=served)
    assert result.returncode == 0, result.stderr[-3000:]
    main, extra = _metrics(uninterrupted / "e6/metrics.jsonl"), _metrics(out / "metrics.jsonl")
    assert [m["step"] for m in main if "val/accuracy" in m] == [0, 2, 4]
    assert [m["step"] for m in extra if "val/accuracy" in m] == [4]
    assert [m["step"] for m in extra] == [1, 2, 3, 4]

    def training(m):
        return {k: v for k, v in m.items() if not k.startswith(("val/", "val_"))}

    for a, b in zip([training(m) for m in extra], [training(m) for m in main if m["step"] > 0], strict=True):
        assert a == b, {k: (a.get(k), b.get(k)) for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
    assert {k: v for k, v in extra[-1].items() if k.startswith("val")} == {
        k: v for k, v in main[-1].items() if k.startswith("val")
    }
    last = [json.loads(line) for line in (uninterrupted / "e6/val_items.jsonl").read_text().splitlines()][-1]
    assert [json.loads(line) for line in (out / "val_items.jsonl").read_text().splitlines()] == [last]
    assert json.loads((out / "run.json").read_text())["last_step"] == 4


def _running(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan's zombie may wait for a parent that never reaps it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(folder.rglob("*")) if p.is_file()}


def _served_environment(folder: Path) -> dict[str, str]:
    """An environment with chartrl's forkserver on, its servers' sockets and logs in ``folder``."""
    from chartrl import forkserver

    return job_environment(**{forkserver.ENV: "on", forkserver.DIR_ENV: str(folder)})


def _forkserver(tmp_path: Path) -> tuple[dict[str, str], Path, int]:
    """An environment with the forkserver on, its socket folder, and the pid of its server (started and ready)."""
    folder = tmp_path / "fs"
    env = _served_environment(folder)
    reward = ["reward", "--name", "v1_rule", "--response", "<answer>1</answer>", "--truth", "1"]
    subprocess.run([BIN / "chartrl", *reward], env=env, check=True, capture_output=True)  # starts the server
    deadline = time.monotonic() + 180
    while True:
        ready = [m for log in folder.glob("*.log") for m in re.finditer(r"forkserver (\d+): .* ready", log.read_text())]
        if ready:
            return env, folder, int(ready[0].group(1))
        assert time.monotonic() < deadline, "the forkserver never became ready"
        time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.parametrize("killed", ["server", "client"])
def test_a_served_training_ends_with_its_server_or_its_client_and_the_rerun_resumes(
    killed, uninterrupted, warm_model_dir, splits, tmp_path
):
    """A train job forked by the forkserver, as the workflow runs it, and SIGKILL to the server (the OOM killer, a
    torn-down cgroup) or to the client (the process Snakemake waits on): the job ends within a second, it writes
    nothing to its run folder after that (and, when the server died, nothing after the client reported the
    failure), and the rerun resumes from its last checkpoint to the metrics of a run never interrupted."""
    env, folder, server = _forkserver(tmp_path)
    out, db = tmp_path / "e6", tmp_path / "mlflow.db"
    command = [str(BIN / "chartrl"), *_train_command(warm_model_dir, *splits, out, db)[3:]]
    try:
        client = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 300
        while not (out / "checkpoints/step_2").exists() and client.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        assert client.poll() is None, "the run ended before it could be killed"
        jobs = re.findall(r"job (\d+) in .*: chartrl train", "".join(p.read_text() for p in folder.glob("*.log")))
        job = int(jobs[-1])
        assert _running(job)
        killed_at = time.monotonic()
        os.kill(server if killed == "server" else client.pid, signal.SIGKILL)
        stderr = client.communicate(timeout=120)[1]
        if killed == "server":
            assert client.returncode == 1 and "the forkserver ended while it ran this job" in stderr
            assert not _running(job), "the client reported the failure while its job still ran"
        while _running(job) and time.monotonic() - killed_at < 30:
            time.sleep(0.01)
        ended_s = time.monotonic() - killed_at
        assert not _running(job)
        assert ended_s < 1.0, f"the job ended {ended_s:.2f} s after its {killed} was killed"
        written = _snapshot(out)
        time.sleep(1.5)
        assert _snapshot(out) == written, "the run folder changed after its job ended"
    finally:
        stop_forkservers(folder)

    rerun = subprocess.run(command, capture_output=True, text=True)  # the workflow's rerun, here unserved
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "resuming e6 from checkpoint step_2" in rerun.stderr
    assert _metrics(out / "metrics.jsonl") == _metrics(uninterrupted / "e6/metrics.jsonl")
    assert (out / "val_items.jsonl").read_text() == (uninterrupted / "e6/val_items.jsonl").read_text()


@pytest.mark.slow
def test_a_stopped_run_exits_143_and_ends_its_mlflow_run_killed(warm_model_dir, splits, tmp_path):
    """A SIGTERM (Snakemake cancelling the job, `ray job stop`, a local head shutting down) unwinds the job: its
    MLflow run ends KILLED, never left RUNNING, and it exits as a shell reports a SIGTERM."""
    from mlflow.tracking import MlflowClient

    out, db = tmp_path / "e6", tmp_path / "mlflow.db"
    with open(tmp_path / "train.log", "w") as log:
        process = subprocess.Popen(_train_command(warm_model_dir, *splits, out, db), stdout=log, stderr=log)
        deadline = time.time() + 300
        while not (out / "checkpoints/step_1").exists() and process.poll() is None and time.time() < deadline:
            time.sleep(0.2)
        assert process.poll() is None, "the run ended before it could be stopped"
        process.send_signal(signal.SIGTERM)  # mid-run: in step 2
        process.wait(timeout=60)
    assert process.returncode == 143, (tmp_path / "train.log").read_text()[-3000:]
    assert "chartrl: stopped by signal 15" in (tmp_path / "train.log").read_text()
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    runs = client.search_runs([client.get_experiment_by_name("t").experiment_id])
    assert [r.info.status for r in runs] == ["KILLED"]


@pytest.mark.slow
def test_a_rerun_on_a_changed_starting_model_trains_from_step_0_beside_the_old_checkpoints(
    warm_model_dir, tiny_model_dir, splits, served, tmp_path
):
    """The warm start changed and Snakemake reruns the train job: the model folder is at the same path with other
    weights, so the finished run's checkpoints were not trained from it. The rerun sets them aside
    (``superseded/<their key>/``), trains from step 0 on the new model in a new MLflow run, and tags the old run
    superseded."""
    import shutil

    from mlflow.tracking import MlflowClient

    model, out, db = tmp_path / "base", tmp_path / "e6", tmp_path / "mlflow.db"
    shutil.copytree(warm_model_dir, model)
    short = {**TRAIN, "steps": 2}
    command = _train_command(model, *splits, out, db, train_cfg=short)
    first = subprocess.run(command, capture_output=True, text=True, env=served)
    assert first.returncode == 0, first.stderr[-3000:]
    before = json.loads((out / "run.json").read_text())

    shutil.rmtree(model)
    shutil.copytree(tiny_model_dir, model)  # another starting model at the same path
    rerun = subprocess.run(command, capture_output=True, text=True, env=served)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "resuming" not in rerun.stderr and "were trained from other inputs" in rerun.stderr
    after = json.loads((out / "run.json").read_text())
    assert after["job_key"] != before["job_key"] and after["mlflow_run_id"] != before["mlflow_run_id"]
    assert [m["step"] for m in _metrics(out / "metrics.jsonl")] == [0, 1, 2]
    assert (out / "superseded" / before["job_key"] / "checkpoints/step_2/trainer_state.json").is_file()
    assert set(after["checkpoints"]["steps"]) == {"1", "2"}  # the new run's own
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    assert client.get_run(before["mlflow_run_id"]).data.tags["chartrl.superseded"] == "true"
    assert client.get_run(after["mlflow_run_id"]).info.status == "FINISHED"


@pytest.mark.slow
def test_bad_settings_stop_before_the_first_rollout(tiny_model_dir, splits, served, tmp_path):
    cases = [
        ({**ROLLOUT, "n": 1}, TRAIN, "rollout.n = 1"),
        ({**ROLLOUT, "max_new_tokens": 2}, TRAIN, "rollout.max_new_tokens = 2"),
        (ROLLOUT, {**TRAIN, "prompts_per_step": 10_000}, "train.prompts_per_step = 10000"),
    ]
    processes = []  # side by side
    for rollout, train, fragment in cases:
        spec = json.loads(_spec(train=train))
        spec["rollout"] = rollout
        command = _train_command(tiny_model_dir, *splits, tmp_path / "x", tmp_path / "db.db")
        command[command.index("--spec") + 1] = json.dumps(spec)
        processes.append((subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=served), fragment))
    for process, fragment in processes:
        stderr = process.communicate()[1]
        assert process.returncode == 2 and fragment in stderr, stderr[-2000:]
    assert not (tmp_path / "x/checkpoints").exists()


@pytest.mark.slow
def test_kl_and_lora_options_update_and_checkpoint(warm_model_dir, synth_rows, default_config, tmp_path):
    """One in-process step with a KL term to the start policy, and one with LoRA: both update, log actor/kl,
    and a LoRA checkpoint loads back as base model + adapter."""
    import dataclasses

    import torch
    from peft import LoraConfig, get_peft_model

    from chartrl.commands.train import series_from
    from chartrl.config import MlflowSettings
    from chartrl.model.policy import load_policy
    from chartrl.rewards import get_reward
    from chartrl.train.trainer import Trainer, TrainJob

    series = series_from(SERIES, "synth")
    for name, kl_coef, lora in (("kl", 0.5, False), ("lora", 0.0, True)):
        train = dataclasses.replace(
            default_config.train,
            steps=1,
            prompts_per_step=2,
            val_every=1,
            val_rows=2,
            checkpoint_every=1,
            micro_batch_size=3,
            lr=1e-3,
            lr_warmup_steps=0,  # one step: a warm-up would run it at lr 0
            kl_coef=kl_coef,
        )
        job = TrainJob(
            series=series,
            train=train,
            rollout=dataclasses.replace(default_config.rollout, **ROLLOUT),
            prompts=default_config.prompts,
            tools=default_config.tools,
            spec={"case": name},
            run_dir=tmp_path / name,
            mlflow=MlflowSettings(f"sqlite:///{tmp_path}/m.db", "options"),
            base_model=str(warm_model_dir),
        )
        policy = load_policy(warm_model_dir, train=True)
        if lora:
            policy.model = get_peft_model(
                policy.model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
            )
        trainable = {n: p.detach().clone() for n, p in policy.model.named_parameters() if p.requires_grad}
        reward = get_reward("v2_shaped", {k: v for k, v in SERIES["reward"].items() if k != "name"})
        summary = Trainer(job, policy, reward, synth_rows["train"], synth_rows["val"]).fit()
        metrics = json.loads((tmp_path / name / "metrics.jsonl").read_text().splitlines()[1])
        if "actor/loss" in metrics:  # not a fully degenerate step
            changed = [
                n for n, p in policy.model.named_parameters() if p.requires_grad and not torch.equal(p, trainable[n])
            ]
            assert changed, name
        if kl_coef:
            assert "actor/kl" in metrics or "actor/skipped" in metrics
        if lora:
            assert all("lora_" in n for n in trainable)  # only the adapter trains
            reloaded = load_policy(summary["checkpoints"]["last"])
            assert "Peft" in type(reloaded.model).__name__
