"""verl checkpoints in ``FSDPCheckpointManager``'s layout: found, chosen (last, best on validation, a step) and
merged into a Hugging Face folder by verl's own model merger, on the CPU."""

from __future__ import annotations

import json

import pytest

from chartrl.verl_backend.checkpoints import CheckpointError, merge_checkpoint, select_checkpoint, verl_checkpoints


def save_verl_checkpoint(root, step, model, processor):
    """What verl writes for one step of a one-GPU run (world size 1: the shard is the whole state dict)."""
    import torch

    actor = root / f"global_step_{step}" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    model.config.save_pretrained(actor / "huggingface")
    processor.save_pretrained(actor / "huggingface")
    torch.save(model.state_dict(), actor / "model_world_size_1_rank_0.pt")
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": 1}))
    (root / "latest_checkpointed_iteration.txt").write_text(str(step))
    return actor


@pytest.fixture(scope="module")
def checkpoints(tiny_policy, tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpt") / "checkpoints"
    for step in (2, 4):
        save_verl_checkpoint(root, step, tiny_policy.model, tiny_policy.processor)
    (root / "global_step_6" / "actor").mkdir(parents=True)  # a step being written: no fsdp_config.json yet
    return root


def test_checkpoints_are_found_and_chosen(checkpoints):
    assert list(verl_checkpoints(checkpoints)) == [2, 4]  # the incomplete step 6 is not one
    assert select_checkpoint(checkpoints, "last").parent.name == "global_step_4"
    assert select_checkpoint(checkpoints, "best_val", {2: 0.6, 4: 0.5, 6: 0.9}).parent.name == "global_step_2"
    assert select_checkpoint(checkpoints, 2).parent.name == "global_step_2"
    with pytest.raises(CheckpointError, match="saved steps: 2, 4"):
        select_checkpoint(checkpoints, 3)


@pytest.mark.slow
def test_verls_merger_gives_a_hugging_face_folder_with_the_weights(checkpoints, tiny_policy, tmp_path):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    merged = merge_checkpoint(select_checkpoint(checkpoints, "last"), tmp_path / "merged")
    model = AutoModelForImageTextToText.from_pretrained(merged)
    AutoProcessor.from_pretrained(merged)  # the processor travels with it
    ours, theirs = tiny_policy.model.state_dict(), model.state_dict()
    assert set(ours) == set(theirs)
    for key, value in ours.items():  # verl's merger writes bf16
        assert (value.float() - theirs[key].float()).abs().max() <= 2e-2 * max(1.0, value.abs().max().item()), key


@pytest.mark.slow
def test_the_merger_runs_after_this_process_ran_parallel_torch_work(checkpoints, tmp_path):
    """The merger runs in a fork: after OpenMP's threads have run here, a parallel region in the fork would wait
    for them for ever."""
    import multiprocessing
    import signal

    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    for _ in range(3):
        (torch.randn(600, 600) @ torch.randn(600, 600)).exp().sum()

    def hung(*_):
        for child in multiprocessing.active_children():
            child.kill()
        raise TimeoutError("verl's model merger still running after 60 s in a fork of a process that ran OpenMP")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        merge_checkpoint(select_checkpoint(checkpoints, 2), tmp_path / "merged")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        torch.set_num_threads(threads)
    assert (tmp_path / "merged" / "model.safetensors").is_file()


def test_a_failing_merge_raises_with_the_mergers_output_and_leaves_no_folder(checkpoints, tmp_path):
    import shutil

    actor = tmp_path / "global_step_2" / "actor"
    shutil.copytree(checkpoints / "global_step_2" / "actor", actor)
    (actor / "model_world_size_1_rank_0.pt").write_bytes(b"not a torch file")
    with pytest.raises(
        CheckpointError, match=r"(?s)model merger failed on .*global_step_2/actor \(exit 1\).*Traceback"
    ):
        merge_checkpoint(actor, tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_an_incomplete_checkpoint_is_not_merged(checkpoints, tmp_path):
    with pytest.raises(CheckpointError, match="not a complete verl FSDP checkpoint"):
        merge_checkpoint(checkpoints / "global_step_6" / "actor", tmp_path / "m")
    assert not (tmp_path / "m").exists()


def _fake_checkpoint(root, step, tracker=True):
    """A complete checkpoint as far as the layout goes (one rank): enough for keeping and finding; ``tracker``:
    the trainer has also written its tracker file, as it does after the whole save."""
    actor = root / f"global_step_{step}" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    (actor / "huggingface" / "config.json").write_text("{}")
    (actor / "model_world_size_1_rank_0.pt").write_bytes(b"weights of step %d" % step)
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": 1}))
    if tracker:
        (root / "latest_checkpointed_iteration.txt").write_text(str(step))
    return actor


def test_a_kept_step_survives_verls_pruning_without_a_copy(tmp_path):
    import shutil

    from chartrl.verl_backend.checkpoints import keep_checkpoint

    root = tmp_path / "checkpoints"
    shard = _fake_checkpoint(root, 65) / "model_world_size_1_rank_0.pt"
    kept = keep_checkpoint(root, 65)
    assert (kept / "model_world_size_1_rank_0.pt").stat().st_ino == shard.stat().st_ino  # a hard link, no copy
    assert keep_checkpoint(root, 65) == kept  # once
    shutil.rmtree(root / "global_step_65")  # what verl's max_actor_ckpt_to_keep does three saves later
    assert (kept / "model_world_size_1_rank_0.pt").read_bytes() == b"weights of step 65"
    assert verl_checkpoints(root) == {65: kept}
    assert select_checkpoint(root, 65) == kept


def test_a_step_still_being_written_is_not_kept_yet(tmp_path):
    from chartrl.verl_backend.checkpoints import keep_checkpoint

    root = tmp_path / "checkpoints"
    (root / "global_step_80" / "actor").mkdir(parents=True)  # no fsdp_config.json yet
    assert keep_checkpoint(root, 80) is None and not (root / "kept").exists()


def test_a_step_is_kept_only_once_verls_tracker_names_it(tmp_path):
    """verl writes fsdp_config.json before the full model it may add to huggingface/ (save_contents hf_model), and
    the trainer writes its tracker file after the whole save: a step linked before that would miss files for good."""
    from chartrl.verl_backend.checkpoints import keep_checkpoint

    root = tmp_path / "checkpoints"
    _fake_checkpoint(root, 1)
    actor = _fake_checkpoint(root, 2, tracker=False)  # every file a finished save has, but verl is still saving
    assert keep_checkpoint(root, 2) is None and not (root / "kept" / "global_step_2").exists()
    (actor / "huggingface" / "model.safetensors").write_bytes(b"the full model, written last")
    (root / "latest_checkpointed_iteration.txt").write_text("")  # the trainer opening its tracker to write it
    assert keep_checkpoint(root, 2) is None
    (root / "latest_checkpointed_iteration.txt").write_text("2")
    kept = keep_checkpoint(root, 2)
    assert (kept / "huggingface" / "model.safetensors").read_bytes() == b"the full model, written last"


def test_the_keeper_keeps_named_steps_while_verl_runs(tmp_path):
    import shutil
    import time

    from chartrl.verl_backend.checkpoints import CheckpointKeeper

    root = tmp_path / "checkpoints"
    with CheckpointKeeper(root, [2, 4], interval_s=0.05) as keeper:
        for step in (1, 2, 3, 4, 5):  # verl saving every step, keeping the newest 2
            _fake_checkpoint(root, step)
            time.sleep(0.3)
            for old in range(1, step - 1):
                shutil.rmtree(root / f"global_step_{old}", ignore_errors=True)
    assert sorted(keeper.kept) == [2, 4]
    assert sorted(verl_checkpoints(root)) == [2, 4, 5]  # 3 was pruned and not named


def test_checkpoints_saved_before_a_resume_are_pruned_once_newer_ones_replace_them(tmp_path):
    """verl's prune list lives in its process: after a resume it never deletes what an earlier process saved. The
    keeper of a resumed job (keep_last 2) deletes those once the newest two are newer, and a named step only once
    it is hard-linked aside."""
    from chartrl.verl_backend.checkpoints import CheckpointKeeper

    root = tmp_path / "checkpoints"
    for step in (1, 2, 3):  # left by earlier runs of the job: 2 and 3 by the last, 1 by the one before it
        _fake_checkpoint(root, step)
    with CheckpointKeeper(root, [2], interval_s=3600, keep_last=2) as keeper:  # polled by hand below
        keeper.poll()
        assert sorted(verl_checkpoints(root)) == [2, 3] and not (root / "global_step_1").exists()
        _fake_checkpoint(root, 4)  # the resumed verl saves; it would prune only its own saves
        keeper.poll()
        assert sorted(p.name for p in root.glob("global_step_*")) == ["global_step_3", "global_step_4"]
        assert (root / "kept" / "global_step_2" / "actor" / "model_world_size_1_rank_0.pt").read_bytes() == (
            b"weights of step 2"  # the named step lives on under kept/
        )
        _fake_checkpoint(root, 5)
    assert sorted(verl_checkpoints(root)) == [2, 4, 5] and keeper.earlier == set()
