"""MLflow conventions: one run per (subject, stage), params once, reruns supersede (current runs tagged so),
extra seeds beside the main run, series described, splits logged as dataset inputs, test accuracy logged (and its
headline on the train run), secrets never logged."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from mlflow_workers import log_one_run

from chartrl import tracking
from chartrl.config import MlflowSettings

from conftest import REPO, snakemake


@pytest.fixture
def settings(tmp_path):
    return MlflowSettings(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", experiment="unit")


def test_a_rerun_supersedes_the_earlier_run(settings, tmp_path):
    tags = {"stage": "data", "dataset": "synthchart"}
    with tracking.stage_run(settings, "synthchart/data", tags, {"seed": 0, "splits": {"train": 3}}) as first:
        first.log_metrics({"train/rows": 6})
    (tmp_path / "card.json").write_text("{}")
    with tracking.stage_run(settings, "synthchart/data", tags, {"seed": 0, "splits": {"train": 3}}) as second:
        second.log_metrics({"train/rows": 6})
        second.log_artifact(tmp_path / "card.json")
    client = tracking._client(settings)
    experiment = tracking.experiment_id(client, settings)
    runs = {
        r.info.run_id: r for r in tracking.find_runs(client, experiment, "synthchart/data", include_superseded=True)
    }
    assert set(runs) == {first.run_id, second.run_id}
    old, new = runs[first.run_id], runs[second.run_id]
    assert (
        old.data.tags[tracking.SUPERSEDED_TAG] == "true" and old.data.tags[tracking.SUPERSEDED_BY_TAG] == second.run_id
    )
    assert new.data.tags[tracking.SUPERSEDED_TAG] == "false"  # current, and tagged so
    assert new.data.params == {"seed": "0", "splits.train": "3"}
    assert new.data.metrics == {"train/rows": 6.0} and new.info.status == "FINISHED"
    assert [a.path for a in client.list_artifacts(second.run_id)] == ["card.json"]
    assert [r.info.run_id for r in tracking.find_runs(client, experiment, "synthchart/data")] == [second.run_id]


def test_a_failing_stage_ends_its_run_failed(settings):
    with pytest.raises(ValueError):
        with tracking.stage_run(settings, "x/data", {"stage": "data"}, {}) as run:
            raise ValueError("boom")
    client = tracking._client(settings)
    assert client.get_run(run.run_id).info.status == "FAILED"


def test_secrets_from_the_environment_are_refused(settings, monkeypatch):
    monkeypatch.setenv("JUDGE_API_KEY", "sk-very-secret-value")
    with pytest.raises(tracking.SecretLeak, match="JUDGE_API_KEY") as err:
        with tracking.stage_run(settings, "e2/train", {"stage": "train"}, {"judge": {"key": "sk-very-secret-value"}}):
            pass
    assert "sk-very-secret-value" not in str(err.value)
    # naming the variable is fine
    with tracking.stage_run(settings, "e2/train", {"stage": "train"}, {"judge": {"api_key_env": "JUDGE_API_KEY"}}):
        pass


def test_flatten_params():
    assert tracking.flatten({"a": {"b": 1, "c": [1, 2]}, "d": {}, "e": (3,)}) == {
        "a.b": "1",
        "a.c": "[1, 2]",
        "d": "{}",
        "e": "[3]",
    }


@pytest.mark.slow  # four spawned interpreters, each importing MLflow
def test_jobs_starting_together_on_a_fresh_store_do_not_collide(tmp_path):
    """Two data cards finishing at once used to race on creating the SQLite schema ("duplicate column")."""
    import multiprocessing

    uri = f"sqlite:///{tmp_path}/fresh.db"
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        run_ids = pool.map(log_one_run, [(uri, f"d{i}") for i in range(4)])
    assert len(set(run_ids)) == 4


def _current(settings) -> set[str]:
    """The names of the runs MLflow's own search returns for the obvious filter on current runs."""
    client = tracking._client(settings)
    experiment = tracking.experiment_id(client, settings)
    return {r.info.run_name for r in client.search_runs([experiment], "tags.chartrl.superseded = 'false'")}


def test_the_obvious_filter_finds_exactly_the_current_runs(settings):
    for name in ("synthchart/data", "synthchart/data", "e1/train"):
        with tracking.stage_run(settings, name, {"stage": name.split("/")[1]}, {}):
            pass
    client = tracking._client(settings)
    experiment = tracking.experiment_id(client, settings)
    superseded = client.search_runs([experiment], "tags.chartrl.superseded = 'true'")
    assert len(superseded) == 1 and superseded[0].info.run_name == "synthchart/data"
    assert _current(settings) == {"synthchart/data", "e1/train"}
    assert len(client.search_runs([experiment], "tags.chartrl.superseded = 'false'")) == 2


def test_extra_seeds_run_beside_the_main_run(settings, default_config):
    """The seed runs get names of their own, so the main run stays current; the trainer names them so."""
    import dataclasses

    from chartrl.train.trainer import TrainJob

    series = default_config.series["e1"]
    names = []
    for seed in (None, 1, 2):
        name = tracking.train_run_name("e1", seed)
        names.append(name)
        tags = tracking.train_run_tags(series, backend="local", seed=0 if seed is None else seed)
        with tracking.stage_run(settings, name, tags, {}):
            pass
        with tracking.stage_run(settings, tracking.test_run_name("e1", seed), {"stage": "test"}, {}):
            pass
    assert names == ["e1/train", "e1/train/seed1", "e1/train/seed2"]
    assert _current(settings) == {*names, "e1/test", "e1/test/seed1", "e1/test/seed2"}

    def job(seed, extra):
        train = dataclasses.replace(default_config.train, seed=seed)
        return TrainJob(series, train, default_config.rollout, default_config.prompts, default_config.tools, {},
                        None, settings, "m", extra_seed=extra)  # fmt: skip

    assert job(0, False).run_name == "e1/train" and job(2, True).run_name == "e1/train/seed2"


@pytest.mark.slow
def test_the_seeds_rules_name_their_runs_as_extra_seeds(tmp_path):
    printed = snakemake(tmp_path, "-n", "-p", f"--configfile={REPO / 'config/seeds.yaml'}").stdout
    lines = [line for line in printed.splitlines() if "results/seeds/e1/seed2" in line and "chartrl " in line]
    assert len(lines) == 2  # train_seed and seed_test_accuracy of e1, seed 2
    assert all(line.split("--extra-seed ", 1)[1].startswith("2 ") for line in lines)
    main = [line for line in printed.splitlines() if "--out results/runs/e1 " in line]
    assert main and "--extra-seed" not in main[0]


def test_the_trainer_refuses_an_extra_seed_that_is_not_the_specs(capsys, default_config):
    import json

    from chartrl.cli import main
    from chartrl.config import to_plain

    names = ("train", "rollout", "prompts", "tools", "judge")
    spec = {"series": {"id": "e1", **to_plain(default_config.resolved["series"]["e1"])}}
    spec |= {name: to_plain(default_config.resolved[name]) for name in names}
    spec["train"]["seed"] = 1  # as the seeds rule writes it for seed 1
    code = main(["train", "--spec", json.dumps(spec), "--model", str(REPO), "--train", "x", "--val", "y", "--out",
                 "z", "--extra-seed", "2"])  # fmt: skip
    assert code != 0 and "--extra-seed 2 is not the spec's train.seed (1)" in capsys.readouterr().err


def test_series_runs_carry_their_description(settings, default_config):
    series = default_config.series["e1"]
    assert series.description == "tool-use policy, rule reward (relaxed accuracy of the final answer)"
    with tracking.stage_run(settings, "e1/train", tracking.train_run_tags(series, backend="local", seed=0), {}) as t:
        pass
    eval_series = {"id": "e4", **dict(default_config.resolved["series"]["e4"])}
    with tracking.stage_run(settings, "e4/generate", tracking.eval_run_tags(eval_series, "generate", t.run_id, "local"),
                            {}) as e:  # fmt: skip
        pass
    client = tracking._client(settings)
    assert client.get_run(t.run_id).data.tags[tracking.DESCRIPTION_TAG] == series.description
    tags = client.get_run(e.run_id).data.tags
    assert (
        tags[tracking.DESCRIPTION_TAG] == "e1 checkpoint on test, rule scorer"
        and tags["mlflow.parentRunId"] == t.run_id
    )


def test_test_accuracy_is_logged_on_its_own_run_under_the_train_run(settings, tmp_path, tiny_model_dir, synth_rows,
                                                                    default_config):  # fmt: skip
    """`chartrl test-accuracy` on a train series' run.json: the per-type accuracies of each condition become
    metrics of the run e1/test, nested under e1's train run and described as e1."""
    import json

    from chartrl.cli import main
    from chartrl.config import to_plain
    from chartrl.data.contract import write_split

    with tracking.stage_run(settings, "e1/train", {"stage": "train"}, {}) as train_run:
        pass
    run_json = tmp_path / "run.json"
    run_json.write_text(json.dumps({"mlflow_run_id": train_run.run_id, "checkpoints": {"last": str(tiny_model_dir)},
                                    "last_step": 7}))  # fmt: skip
    rows = synth_rows["val"][:3]
    test_file = tmp_path / "e1_test" / "test.parquet"
    test_file.parent.mkdir()
    write_split(rows, test_file)
    sections = {name: to_plain(default_config.resolved[name]) for name in ("evaluate", "rollout", "prompts", "tools")}
    sections["rollout"]["max_new_tokens"] = 8  # random weights: the answers do not matter, the logging does
    spec = {"series": {"id": "e1", **to_plain(default_config.resolved["series"]["e1"])}, **sections}
    out = tmp_path / "test_accuracy.json"
    code = main(["test-accuracy", "--spec", json.dumps(spec), "--run", str(run_json), "--data",
                 str(test_file), "--out", str(out), "--tracking-uri", settings.tracking_uri,
                 "--experiment", settings.experiment])  # fmt: skip
    assert code == 0
    result = json.loads(out.read_text())
    client = tracking._client(settings)
    experiment = tracking.experiment_id(client, settings)
    (run,) = tracking.find_runs(client, experiment, "e1/test")
    metrics, tags = run.data.metrics, run.data.tags
    assert tags["mlflow.parentRunId"] == train_run.run_id and tags["stage"] == "test" and tags["tools"] == "true"
    assert tags[tracking.DESCRIPTION_TAG] == default_config.series["e1"].description
    for condition in ("test", "test_shuffled_images", "test_sampled", "test_placebo"):  # e1 calls tools: a placebo
        assert metrics[f"{condition}/accuracy"] == pytest.approx(result[condition]["accuracy"])
        assert metrics[f"{condition}/n"] == 3
        by_type = result[condition]["accuracy_by_question_type"]
        assert by_type and all(metrics[f"{condition}/accuracy_{t}"] == pytest.approx(v) for t, v in by_type.items())
    assert [a.path for a in client.list_artifacts(run.info.run_id)] == ["test_accuracy.json"]
    assert _inputs(client, run.info.run_id) == {"test": ("e1_test/test", tracking.file_sha256(test_file)[:12], 3)}
    # the headline figures on the train run itself, at its last step, its status untouched
    train = client.get_run(train_run.run_id)
    assert train.info.status == "FINISHED"
    headline = train.data.metrics
    assert headline["test/accuracy"] == pytest.approx(result["test"]["accuracy"]) and headline["test/n"] == 3
    assert headline["test/tool_call_ratio"] == pytest.approx(result["test"]["tool_call_rate"])
    assert headline["test_shuffled_images/accuracy"] == pytest.approx(result["test_shuffled_images"]["accuracy"])
    by_type = result["test"]["accuracy_by_question_type"]
    assert all(headline[f"test/accuracy_{t}"] == pytest.approx(v) for t, v in by_type.items())
    assert not any(key.startswith(("test_sampled/", "test_placebo/")) for key in headline)
    assert {m.step for m in client.get_metric_history(train_run.run_id, "test/accuracy")} == {7}
    assert {m.step for m in client.get_metric_history(run.info.run_id, "test/accuracy")} == {7}  # the same step
    assert "test" in _inputs(client, train_run.run_id)


def _inputs(client, run_id) -> dict[str, tuple[str, str, int]]:
    """A run's dataset inputs: context -> (name, digest, rows in its profile)."""
    import json

    found = {}
    for dataset_input in client.get_run(run_id).inputs.dataset_inputs:
        context = {t.key: t.value for t in dataset_input.tags}["mlflow.data.context"]
        dataset = dataset_input.dataset
        found[context] = (dataset.name, dataset.digest, json.loads(dataset.profile)["num_rows"])
    return found


def test_a_runs_splits_are_its_dataset_inputs_with_their_digests(settings, tmp_path, synth_rows):
    """The splits a run read are its inputs (the UI's Dataset column): named by their path under results/, the
    digest from the file's bytes, so another file content is another dataset; logging them again adds nothing."""
    import json

    from chartrl.data.contract import write_split

    folder = tmp_path / "results" / "data" / "synth"
    train = write_split(synth_rows["train"][:5], folder / "train.parquet")
    val = write_split(synth_rows["val"][:2], folder / "val.parquet")
    with tracking.stage_run(settings, "e1/train", {"stage": "train"}, {}) as run:
        run.log_splits({"train": train, "val": val})
        run.log_splits({"train": train})
    client = tracking._client(settings)
    assert _inputs(client, run.run_id) == {
        "train": ("data/synth/train", tracking.file_sha256(train)[:12], 5),
        "validation": ("data/synth/val", tracking.file_sha256(val)[:12], 2),
    }
    (stored,) = [i.dataset for i in client.get_run(run.run_id).inputs.dataset_inputs if i.dataset.name.endswith("n")]
    assert json.loads(stored.source) == {"uri": str(train.resolve())} and stored.source_type == "local"
    assert json.loads(stored.profile)["sha256"] == tracking.file_sha256(train)
    write_split(synth_rows["train"][:4], train)  # new content, same path: a new dataset
    with tracking.stage_run(settings, "e1/train", {"stage": "train"}, {}) as rerun:
        rerun.log_splits({"train": train})
    assert _inputs(client, rerun.run_id)["train"] == ("data/synth/train", tracking.file_sha256(train)[:12], 4)


def test_the_diagonal_puts_the_last_checkpoints_drift_on_the_train_run(settings, tmp_path, default_config):
    """`chartrl diagonal` of an eval series on the last checkpoint adds test/drift to the train run it reads (at
    its last step); one on another checkpoint leaves the train run alone."""
    import json

    from chartrl.cli import main
    from chartrl.config import to_plain

    with tracking.stage_run(settings, "e10/train", {"stage": "train"}, {}) as train_run:
        pass
    run_json = tmp_path / "run.json"
    run_json.write_text(json.dumps({"mlflow_run_id": train_run.run_id, "last_step": 5}))
    verdicts = {"rule": [1, 0, 1, 0], "panel": [1, 1, 1, 0]}
    for scorer, marks in verdicts.items():
        items = [{"id": f"q{i}", "accuracy": float(m), "verdict": ("incorrect", "correct")[m], "answer": str(i)}
                 for i, m in enumerate(marks)]  # fmt: skip
        scores = {"aggregate": {"scorer": scorer, "generations": "g.parquet"}, "items": items}
        (tmp_path / f"{scorer}.json").write_text(json.dumps(scores))
    evaluate = to_plain(default_config.resolved["evaluate"])

    def diagonal(series_id, checkpoint):
        series = {"id": series_id, "of": "e10", "checkpoint": checkpoint, "scorers": ["rule", "panel"]}
        spec = json.dumps({"series": series, "of": {"id": "e10"}, "evaluate": evaluate})
        return main(["diagonal", "--spec", spec, "--run", str(run_json), "--first", str(tmp_path / "rule.json"),
                     "--second", str(tmp_path / "panel.json"), "--out", str(tmp_path / f"{series_id}.json"),
                     "--tracking-uri", settings.tracking_uri, "--experiment", settings.experiment])  # fmt: skip

    assert diagonal("e12", 3) == 0
    client = tracking._client(settings)
    assert "test/drift" not in client.get_run(train_run.run_id).data.metrics
    assert diagonal("e11", "last") == 0
    (drift,) = client.get_metric_history(train_run.run_id, "test/drift")
    assert drift.value == pytest.approx(0.25) and drift.step == 5
    assert client.get_run(train_run.run_id).info.status == "FINISHED"


def test_the_experiment_opens_on_its_training_runs(settings):
    # MLflow 3 opens an experiment without a kind in its GenAI view; ours is a model-training experiment
    with tracking.stage_run(settings, "synthchart/data", {"stage": "data"}, {}):
        pass
    client = tracking._client(settings)
    experiment = client.get_experiment_by_name(settings.experiment)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    # an experiment made without the tag (by hand, or by an older chartrl) gets it on the next run
    other = MlflowSettings(tracking_uri=settings.tracking_uri, experiment="made-by-hand")
    client.create_experiment("made-by-hand")
    with tracking.stage_run(other, "synthchart/data", {"stage": "data"}, {}):
        pass
    assert client.get_experiment_by_name("made-by-hand").tags["mlflow.experimentKind"] == "custom_model_development"


def gpu_raw_config(**sections) -> dict:
    """config/gpu.yaml as read, with ``sections`` merged into it."""
    from chartrl.config import DEFAULT_CONFIG_FILES, read_config_files

    raw = read_config_files([REPO / f for f in DEFAULT_CONFIG_FILES] + [REPO / "config/gpu.yaml"])
    for name, values in sections.items():
        raw[name] = {**raw.get(name, {}), **values}
    return raw


def test_verl_on_several_nodes_is_refused_a_sqlite_store():
    """verl's processes on several nodes (and the job's driver) would all write one SQLite file on the shared
    filesystem, whose locks do not hold across machines: refused when the config is checked, naming the fix."""
    from chartrl.config import ConfigError, parse_config

    with pytest.raises(ConfigError) as raised:
        parse_config(gpu_raw_config(verl={"nnodes": 2}))
    message = str(raised.value)
    assert "mlflow.tracking_uri 'sqlite:///results/mlflow.db' is a SQLite file, and verl.nnodes 2" in message
    assert "mlflow server" in message and "http://<that host>:5000" in message
    parse_config(gpu_raw_config(verl={"nnodes": 2}, mlflow={"tracking_uri": "http://mlflow-host:5000"}))
    parse_config(gpu_raw_config())  # one node: the SQLite file is fine


class AnswerEverything(BaseHTTPRequestHandler):
    """A server that answers 404 to everything (an MLflow server behind a proxy that hides /health)."""

    def do_GET(self):
        self.send_error(404)

    def log_message(self, *args):
        pass


def test_an_mlflow_server_is_reachable_when_it_answers_at_all(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    problem = tracking.unreachable_store_problem(f"http://127.0.0.1:{closed}", timeout_s=5)
    assert f"cannot reach the MLflow server at mlflow.tracking_uri 'http://127.0.0.1:{closed}'" in problem
    assert tracking.unreachable_store_problem(f"sqlite:///{tmp_path}/mlflow.db") is None
    server = ThreadingHTTPServer(("127.0.0.1", 0), AnswerEverything)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert tracking.unreachable_store_problem(f"http://127.0.0.1:{server.server_port}") is None
    finally:
        server.shutdown()


@pytest.mark.slow
def test_a_run_whose_mlflow_server_does_not_answer_stops_before_its_first_job(tmp_path):
    """Each job's MLflow client would retry a dead server for minutes before failing: the run stops at its start
    instead, naming the address and the key."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    overlay = tmp_path / "server.yaml"
    overlay.write_text(f"mlflow:\n  tracking_uri: http://127.0.0.1:{closed}\n")
    result = snakemake(
        tmp_path, "--cores", "1", "--configfile", str(REPO / "config" / "smoke.yaml"), str(overlay), check=False
    )
    assert result.returncode != 0
    expected = f"cannot reach the MLflow server at mlflow.tracking_uri 'http://127.0.0.1:{closed}'"
    assert expected in result.stderr + result.stdout
    assert not (tmp_path / "results").exists()  # no job ran


def test_a_dataset_another_job_inserted_meanwhile_is_linked_on_the_next_try(settings, tmp_path, synth_rows):
    """Two jobs starting together log the same split: the store refuses the second insert of the dataset row (a
    unique constraint), and the job tries again, which finds the row and links it; any other error is raised."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from chartrl.data.contract import write_split

    split = tmp_path / "results/data/synthchart/train.parquet"
    split.parent.mkdir(parents=True)
    write_split(synth_rows["train"][:4], split)
    client = MlflowClient(tracking_uri=settings.tracking_uri)
    experiment = client.create_experiment("race")
    first, second = (client.create_run(experiment).info.run_id for _ in range(2))
    inputs = [tracking.split_input(split, "train")]

    class Racing:
        """The real client, whose first call meets the other job's row inserted between look-up and insert."""

        calls = 0

        def log_inputs(self, run_id, datasets):
            Racing.calls += 1
            if Racing.calls == 1:
                client.log_inputs(first, datasets=datasets)  # the other job wins the insert
                raise MlflowException("(sqlite3.IntegrityError) UNIQUE constraint failed: datasets.experiment_id, ...")
            client.log_inputs(run_id, datasets=datasets)

    tracking.log_inputs(Racing(), second, inputs)
    assert Racing.calls == 2
    for run_id in (first, second):
        assert [d.dataset.name for d in client.get_run(run_id).inputs.dataset_inputs] == ["data/synthchart/train"]

    class Broken:
        def log_inputs(self, run_id, datasets):
            raise MlflowException("the store is down")

    with pytest.raises(MlflowException, match="down"):
        tracking.log_inputs(Broken(), second, inputs)


def _git(folder, *args):
    import subprocess

    subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True)


def test_a_run_names_the_commit_of_the_code_that_made_it(settings, tmp_path, monkeypatch):
    checkout = tmp_path / "checkout"
    (checkout / "src").mkdir(parents=True)
    (checkout / "src" / "code.py").write_text("x = 1\n")
    _git(checkout, "init", "-q")
    _git(checkout, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "empty")
    _git(checkout, "add", "src/code.py")
    _git(checkout, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", "code")
    import subprocess

    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    monkeypatch.setenv("CHARTRL_SOURCE", str(checkout))
    tracking.source_commit.cache_clear()
    assert tracking.source_commit() == head.strip()
    with tracking.stage_run(settings, "synthchart/data", {"stage": "data"}, {"seed": 0}) as run:
        pass
    tags = tracking._client(settings).get_run(run.run_id).data.tags
    assert tags[tracking.GIT_COMMIT_TAG] == head.strip()

    (checkout / "results.txt").write_text("not code\n")  # untracked, outside the code: still the commit
    tracking.source_commit.cache_clear()
    assert tracking.source_commit() == head.strip()
    (checkout / "src" / "code.py").write_text("x = 2\n")  # the code differs from the commit
    tracking.source_commit.cache_clear()
    assert tracking.source_commit() == f"{head.strip()}-dirty"

    monkeypatch.setenv("CHARTRL_SOURCE", str(tmp_path / "elsewhere"))
    tracking.source_commit.cache_clear()
    assert tracking.source_commit() is None  # not a checkout: no tag rather than a wrong one
    with tracking.stage_run(settings, "synthchart/card", {"stage": "card"}, {"seed": 0}) as run:
        pass
    assert tracking.GIT_COMMIT_TAG not in tracking._client(settings).get_run(run.run_id).data.tags
    tracking.source_commit.cache_clear()
