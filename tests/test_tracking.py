"""MLflow conventions: one run per (subject, stage), params once, reruns supersede, secrets never logged."""

from __future__ import annotations

import pytest

from chartrl import tracking
from chartrl.config import MlflowSettings


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
    assert tracking.SUPERSEDED_TAG not in new.data.tags
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


def _log_one_run(args):
    uri, name = args
    settings = MlflowSettings(tracking_uri=uri, experiment="concurrent")
    with tracking.stage_run(settings, f"{name}/data", {"stage": "data"}, {"n": 1}) as run:
        run.log_metrics({"rows": 1})
    return run.run_id


def test_jobs_starting_together_on_a_fresh_store_do_not_collide(tmp_path):
    """Two data cards finishing at once used to race on creating the SQLite schema ("duplicate column")."""
    import multiprocessing

    uri = f"sqlite:///{tmp_path}/fresh.db"
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        run_ids = pool.map(_log_one_run, [(uri, f"d{i}") for i in range(4)])
    assert len(set(run_ids)) == 4
