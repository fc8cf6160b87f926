"""A train job's key (chartrl.train.resume.job_key) follows what trains: the starting model's files, not the warm
start's run records written beside them."""

from __future__ import annotations

import json

from chartrl.train.resume import job_key
from chartrl.warmstart import METRICS_FILE, RUN_FILE

SPEC = {"series": {"id": "e1"}, "train": {"steps": 4}}


def _model(folder, weights: bytes, run_id: str, seconds: float):
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "config.json").write_text('{"hidden_size": 64}')
    (folder / METRICS_FILE).write_text(json.dumps({"step": 0, "timing/update": seconds}) + "\n")
    (folder / RUN_FILE).write_text(json.dumps({"mlflow_run_id": run_id, "steps": 1}))
    return folder


def test_two_warm_starts_of_the_same_weights_give_one_key_and_other_weights_another(tmp_path):
    split = tmp_path / "train.parquet"
    split.write_bytes(b"rows")
    first = _model(tmp_path / "a", b"weights", "run-a", 1.5)
    rerun = _model(tmp_path / "b", b"weights", "run-b", 2.25)  # same weights, other timings and run id
    other = _model(tmp_path / "c", b"other weights", "run-a", 1.5)
    key = job_key(SPEC, {"model": first, "train": split})
    assert job_key(SPEC, {"model": rerun, "train": split}) == key
    assert job_key(SPEC, {"model": other, "train": split}) != key
    (rerun / "config.json").write_text('{"hidden_size": 32}')  # any file of the model itself counts
    assert job_key(SPEC, {"model": rerun, "train": split}) != key
