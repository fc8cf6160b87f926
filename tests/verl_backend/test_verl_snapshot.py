"""``model.revision`` pins the starting model for every verl worker: verl has no revision setting and loads
``model.path`` as it is in the FSDP actor and reference, in vLLM and in the reward's tokenizer, so a pinned hub id
becomes that commit's snapshot folder in the Hugging Face cache, and a job does not start before it is there."""

from __future__ import annotations

import dataclasses

import pytest
from composed import compose_verl

from chartrl.config import ConfigError, load_config
from chartrl.verl_backend.overrides import train_overrides
from chartrl.verl_backend.snapshot import missing_snapshot_problem

from conftest import REPO

REVISION = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def pinned(gpu_config, tmp_path, monkeypatch):
    """gpu.yaml with model.revision set, and a Hugging Face cache of its own."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    folder = tmp_path / "hub" / "models--Qwen--Qwen2.5-VL-3B-Instruct" / "snapshots" / REVISION
    return dataclasses.replace(gpu_config, model=dataclasses.replace(gpu_config.model, revision=REVISION)), folder


def test_every_verl_worker_loads_the_pinned_commit(pinned, tmp_path):
    config, folder = pinned
    composed = compose_verl(train_overrides(config, "e6", tmp_path))  # e6: its length term counts with the tokenizer
    assert composed.actor_rollout_ref.model.path == str(folder)  # the FSDP actor and reference, and vLLM
    assert composed.reward.custom_reward_function.reward_kwargs.tokenizer == str(folder)
    unpinned = dataclasses.replace(config, model=dataclasses.replace(config.model, revision=None))
    assert compose_verl(train_overrides(unpinned, "e6", tmp_path)).actor_rollout_ref.model.path == config.model.path


def test_a_pinned_job_does_not_start_before_the_commit_is_downloaded(pinned, tmp_path):
    config, folder = pinned
    problem = missing_snapshot_problem(config.model, tmp_path)
    assert f"`hf download Qwen/Qwen2.5-VL-3B-Instruct --revision {REVISION}`" in problem and str(folder) in problem
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    assert missing_snapshot_problem(config.model, tmp_path) is None


@pytest.mark.parametrize(
    "overlay, error",
    [
        ("model: {revision: main}", "must match .* 40-character commit"),  # a branch can move: a commit only
        (f"backend: local\nmodel: {{revision: {REVISION}}}", "read by the verl backend only"),
    ],
)
def test_the_revision_is_a_commit_read_by_verl(tmp_path, overlay, error):
    path = tmp_path / "overlay.yaml"
    path.write_text(overlay + "\n")
    with pytest.raises(ConfigError, match=error):
        load_config([REPO / "config" / "gpu.yaml", path], root=REPO)


def test_a_revision_beside_a_local_folder_is_refused(tmp_path):
    # the folder is loaded as it is, whatever commit it holds: a revision there would be recorded, not pinned
    folder = tmp_path / "qwen2.5-vl-3b"
    folder.mkdir()
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(f"model: {{path: {folder}, revision: {REVISION}}}\n")
    with pytest.raises(ConfigError, match="a local folder: verl loads the folder as it is") as refused:
        load_config([REPO / "config" / "gpu.yaml", overlay], root=REPO)
    assert f"`hf download <hub id> --revision {REVISION}`" in str(refused.value)
    overlay.write_text(f"model: {{path: {folder}}}\n")  # the folder alone: what it holds is what trains
    assert load_config([REPO / "config" / "gpu.yaml", overlay], root=REPO).model.path == str(folder)
