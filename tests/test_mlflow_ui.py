"""The MLflow UI on a store the project's own tracking functions wrote, opened in headless Chromium: the runs table's
Dataset column names each split with its digest, and the train run's page lists its headline test figures."""

from __future__ import annotations

import subprocess

import pytest

from chartrl import tracking
from chartrl.config import MlflowSettings

from conftest import find_chromium, headless_chromium, mlflow_server

pytestmark = pytest.mark.slow


@pytest.fixture
def chromium() -> str:
    """Looked for before the server starts: without it the test skips at once."""
    return find_chromium()


@pytest.fixture
def store(tmp_path, default_config):
    """One train run of e1 (its splits, a validation curve, the headline figures the test jobs add) and its
    nested test run."""
    import pandas as pd

    settings = MlflowSettings(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", experiment="chartrl-ui")
    folder = tmp_path / "results" / "data" / "synthchart"
    folder.mkdir(parents=True)
    splits = {}
    for split, rows in (("train", 12), ("val", 4), ("test", 5)):
        splits[split] = folder / f"{split}.parquet"
        pd.DataFrame({"id": [f"{split}{i}" for i in range(rows)], "answer": ["3"] * rows}).to_parquet(splits[split])
    series = default_config.series["e1"]
    tags = tracking.train_run_tags(series, backend="local", seed=0)
    with tracking.stage_run(settings, "e1/train", tags, {"train": {"steps": 4}}) as train:
        train.log_splits({"train": splits["train"], "val": splits["val"]})
        for step in (0, 2, 4):
            train.log_metrics({"val/accuracy": 0.25 + step / 16}, step=step)
    tags = tracking.test_run_tags({"id": "e1", "generation": series.generation}, True, train.run_id, None)
    with tracking.stage_run(settings, "e1/test", tags, {}) as test:
        test.log_splits({"test": splits["test"]})
        test.log_metrics({"test/accuracy": 0.625}, step=4)
    headline = tracking.existing_run(settings, train.run_id)
    headline.log_splits({"test": splits["test"]})
    headline.log_metrics({"test/accuracy": 0.625, "test/tool_call_ratio": 0.8125, "test/drift": 0.1875}, step=4)
    client = tracking._client(settings)
    experiment = tracking.experiment_id(client, settings)
    digests = {split: tracking.file_sha256(path)[: tracking.DIGEST_LENGTH] for split, path in splits.items()}
    return settings, experiment, train.run_id, digests


@pytest.fixture
def server(chromium, store, tmp_path):
    """``mlflow server`` on the store, on a free port, in a process group of its own (its workers with it)."""
    with mlflow_server(store[0].tracking_uri, tmp_path) as address:
        yield address


def test_the_ui_shows_the_datasets_and_the_train_runs_test_figures(chromium, store, server, tmp_path):
    from PIL import Image

    _, experiment, train_id, digests = store
    # the page's own requests to the server finish within its 20 s of virtual time
    flags = headless_chromium(chromium, tmp_path / "profile", "1600,1000", 20000)

    def dom(page: str) -> str:
        return subprocess.run([*flags, "--dump-dom", page], capture_output=True, text=True, timeout=180).stdout

    runs_page = f"{server}/#/experiments/{experiment}/runs"
    table = dom(runs_page)
    for split in ("train", "val", "test"):  # the Dataset column: each split by name and digest
        assert f"data/synthchart/{split} ({digests[split]})" in table, split
    run_page = dom(f"{server}/#/experiments/{experiment}/runs/{train_id}")
    assert f"data/synthchart/train ({digests['train']})" in run_page
    for metric, value in (("test/accuracy", "0.625"), ("test/tool_call_ratio", "0.8125"), ("test/drift", "0.1875")):
        assert metric in run_page and value in run_page, metric
    shot = tmp_path / "runs.png"
    subprocess.run([*flags, f"--screenshot={shot}", runs_page], capture_output=True, timeout=180, check=True)
    assert Image.open(shot).convert("L").getextrema()[0] < 100  # text drawn, not a blank page
