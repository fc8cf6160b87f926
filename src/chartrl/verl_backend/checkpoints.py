"""verl's checkpoints: find one, and merge it into a Hugging Face folder with verl's own model merger.

verl 0.9.1 (``FSDPCheckpointManager``, ``find_latest_ckpt_path``) writes, under ``trainer.default_local_dir``::

    latest_checkpointed_iteration.txt        the last step saved
    global_step_{N}/actor/
        model_world_size_{W}_rank_{r}.pt      the FSDP shards of the policy (one per rank)
        fsdp_config.json                      {"FSDP_version": .., "world_size": W}
        huggingface/                          config, tokenizer and processor of the model
        lora_train_meta.json                  (LoRA runs) rank and alpha

verl keeps only the newest ``trainer.max_actor_ckpt_to_keep`` checkpoints and deletes older ones with
``shutil.rmtree`` (``verl/utils/checkpoint/checkpoint_manager.py``); it cannot spare a step. The steps an eval
series names are kept by :class:`CheckpointKeeper`: while verl trains, each such step is hard-linked, file by
file, into ``kept/global_step_{N}/actor/`` as soon as verl's tracker file says it is saved. Hard links cost no
disk; when verl deletes its folder the files live on under ``kept/``.

verl's list of what to delete lives in its process: after a resume it never deletes a checkpoint an earlier
process saved, so each resume would leave ``max_actor_ckpt_to_keep`` checkpoints behind for good (about 45 GB each
for the 3B study). Given ``keep_last``, the keeper deletes those itself once they fall out of the newest
``keep_last`` (:func:`prune_earlier_saves`): verl never touches them, so the two never delete the same folder.

An evaluation needs a Hugging Face folder: ``python -m verl.model_merger merge --backend fsdp --local_dir
<actor> --target_dir <out>`` gathers the shards (bf16 weights; under LoRA the base weights plus ``lora_adapter/``).
:func:`merge_checkpoint` runs that command line's own ``main`` in a fork of the job: a process of its own, as the
command is (verl's imports and the merger's memory end with it), without a new interpreter importing torch and
transformers again (for the tiny model, about 8 core-s a merge as a command, under 0.5 forked).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path

from chartrl.errors import ChartrlError
from chartrl.files import atomic_dir

log = logging.getLogger(__name__)
STEP_DIR = re.compile(r"^global_step_(\d+)$")
TRACKER = "latest_checkpointed_iteration.txt"
KEPT = "kept"
"""Under ``trainer.default_local_dir``: the checkpoints an eval series names, hard-linked out of verl's reach."""


class CheckpointError(ChartrlError):
    """A checkpoint asked for does not exist or cannot be merged."""


def is_complete(actor_dir: Path) -> bool:
    config = actor_dir / "fsdp_config.json"
    if not config.is_file() or not (actor_dir / "huggingface").is_dir():
        return False
    world_size = json.loads(config.read_text()).get("world_size")
    return isinstance(world_size, int) and all(
        (actor_dir / f"model_world_size_{world_size}_rank_{rank}.pt").is_file() for rank in range(world_size)
    )


def _complete_in(folder: Path) -> dict[int, Path]:
    if not folder.is_dir():
        return {}
    found = {}
    for path in folder.iterdir():
        match = STEP_DIR.match(path.name)
        if match and is_complete(path / "actor"):
            found[int(match.group(1))] = path / "actor"
    return found


def verl_checkpoints(root: str | Path) -> dict[int, Path]:
    """step -> ``global_step_{N}/actor`` for every complete checkpoint under ``root`` (verl's own, else the
    kept copy), by step."""
    found = {**_complete_in(Path(root) / KEPT), **_complete_in(Path(root))}
    return dict(sorted(found.items()))


def keep_checkpoint(root: str | Path, step: int) -> Path | None:
    """Hard-link the complete checkpoint of ``step`` into ``kept/`` (once); the kept actor folder, or None while
    verl has not finished writing it.

    Finished means that verl's tracker file names ``step`` or a later one: the trainer writes it after the whole
    save ("for atomic usage", ``ray_trainer._save_checkpoint``). The files alone do not say so: verl writes
    ``fsdp_config.json`` before the full model it may add to ``huggingface/`` (``checkpoint.save_contents``), and a
    file created after the links were made would be missing from ``kept/`` for good."""
    root = Path(root)
    kept = root / KEPT / f"global_step_{step}"
    if is_complete(kept / "actor"):
        return kept / "actor"
    source = root / f"global_step_{step}"
    try:
        saved = last_step(root)
    except ValueError:  # verl is writing its tracker file right now
        return None
    if saved is None or saved < step or not is_complete(source / "actor"):
        return None
    with atomic_dir(kept) as tmp:
        for folder, _dirs, files in os.walk(source):
            target = tmp / Path(folder).relative_to(source)
            target.mkdir(parents=True, exist_ok=True)
            for name in files:
                os.link(Path(folder) / name, target / name)
    log.info("checkpoint global_step_%d kept (hard links in %s): an eval series names it", step, kept)
    return kept / "actor"


def prune_earlier_saves(
    root: str | Path, earlier: Iterable[int], keep_last: int, spare: Iterable[int] = ()
) -> list[int]:
    """Delete the checkpoints of ``earlier`` (steps saved before this verl process started, which verl never
    prunes) that are not among the newest ``keep_last`` complete checkpoints under ``root``; ``spare``: steps not
    to delete yet (a named step not hard-linked aside). Returns the steps deleted."""
    root = Path(root)
    newest = set(sorted(_complete_in(root))[-keep_last:])
    spared = set(spare)
    deleted = []
    for step in sorted(set(earlier) - newest - spared):
        folder = root / f"global_step_{step}"
        if folder.is_dir():
            shutil.rmtree(folder)
            deleted.append(step)
    if deleted:
        log.info("deleted checkpoints %s saved before a resume (verl prunes only its own saves)", deleted)
    return deleted


class CheckpointKeeper:
    """Keeps the named steps of a running verl job (:func:`keep_checkpoint`), polling every ``interval_s``
    seconds in a thread, and once more when stopped. verl deletes a checkpoint only after saving
    ``max_actor_ckpt_to_keep`` newer ones, so a poll every few seconds never misses one. Given ``keep_last`` (the
    job's ``max_actor_ckpt_to_keep``), it also deletes what an earlier run of the job saved once newer checkpoints
    replace it (:func:`prune_earlier_saves`)."""

    def __init__(self, root: str | Path, steps: Iterable[int], interval_s: float = 10.0, keep_last: int | None = None):
        self.root, self.steps, self.interval_s = Path(root), sorted(set(steps)), interval_s
        self.keep_last = keep_last
        self.kept: dict[int, Path] = {}
        self.earlier: set[int] = set()
        """Steps saved under ``root`` before this job's verl started: the ones verl will not prune."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="checkpoint-keeper", daemon=True)

    def __enter__(self) -> CheckpointKeeper:
        self.earlier = set(_complete_in(self.root)) if self.keep_last else set()
        if self.steps or self.earlier:
            self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join()
        self.poll()

    def poll(self) -> None:
        for step in self.steps:
            if step not in self.kept:
                path = keep_checkpoint(self.root, step)
                if path is not None:
                    self.kept[step] = path
        if self.earlier and self.keep_last:
            unkept = [step for step in self.steps if step not in self.kept]
            self.earlier -= set(prune_earlier_saves(self.root, self.earlier, self.keep_last, spare=unkept))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.poll()


def last_step(root: str | Path) -> int | None:
    """The step verl's tracker file names (what ``resume_mode=auto`` resumes from), or None."""
    tracker = Path(root) / TRACKER
    return int(tracker.read_text().strip()) if tracker.is_file() else None


def select_checkpoint(root: str | Path, which: str | int, val_history: dict[int, float] | None = None) -> Path:
    """The actor folder of checkpoint ``which``: ``last``, ``best_val`` (the saved step with the best validation
    accuracy in ``val_history``, else the last) or a step number."""
    found = verl_checkpoints(root)
    if not found:
        raise CheckpointError(f"no complete verl checkpoint under {root}; did the train job save any (save_freq)?")
    if which == "last":
        step = last_step(root)
        return found[step] if step in found else found[max(found)]
    if which == "best_val":
        scored = [(accuracy, step) for step, accuracy in (val_history or {}).items() if step in found]
        return found[max(scored)[1]] if scored else found[max(found)]
    step = int(which)
    if step not in found:
        raise CheckpointError(f"no checkpoint of step {step} under {root}; saved steps: {', '.join(map(str, found))}")
    return found[step]


def merge_arguments(actor_dir: str | Path, target_dir: str | Path) -> list[str]:
    """The arguments of verl's model merger for one FSDP checkpoint (as its docs give them)."""
    return ["merge", "--backend", "fsdp", "--local_dir", str(actor_dir), "--target_dir", str(target_dir)]


def merge_command(actor_dir: str | Path, target_dir: str | Path, python: str = sys.executable) -> list[str]:
    """verl's model merger on one FSDP checkpoint (the command its docs give)."""
    return [python, "-m", "verl.model_merger", *merge_arguments(actor_dir, target_dir)]


def _run_merger(argv: list[str], output: int) -> None:
    """In the forked process: verl's ``python -m verl.model_merger`` with ``argv``, its output to the file
    descriptor ``output``. One intra-op thread: GNU OpenMP's threads do not survive a fork, and a parallel region in
    the child of a process that ran one waits for them for ever; the merger gathers and casts tensors, where one
    thread costs little."""
    os.dup2(output, 1)
    os.dup2(output, 2)
    sys.stdout = sys.stderr = open(output, "w", buffering=1, closefd=False)  # noqa: SIM115 (the fork's own end)
    import torch

    torch.set_num_threads(1)
    from verl.model_merger.__main__ import main

    sys.argv = argv
    main()


def merge_checkpoint(actor_dir: str | Path, target_dir: str | Path) -> Path:
    """Merge ``actor_dir`` into the Hugging Face folder ``target_dir`` (written whole or not at all) with verl's
    model merger, with :func:`merge_command`'s arguments, in a fork of this process."""
    import multiprocessing

    actor_dir = Path(actor_dir)
    if not is_complete(actor_dir):
        raise CheckpointError(
            f"{actor_dir} is not a complete verl FSDP checkpoint (fsdp_config.json, huggingface/, one "
            "model_world_size_W_rank_r.pt per rank)"
        )
    with atomic_dir(target_dir) as tmp, tempfile.TemporaryFile() as output:
        shutil.rmtree(tmp)  # the merger creates its target itself
        argv = ["verl.model_merger", *merge_arguments(actor_dir, tmp)]
        sys.stdout.flush()
        sys.stderr.flush()
        merger = multiprocessing.get_context("fork").Process(
            target=_run_merger, args=(argv, output.fileno()), name="verl.model_merger"
        )
        merger.start()
        merger.join()
        if merger.exitcode != 0:
            output.seek(0)
            text = output.read().decode(errors="replace")
            raise CheckpointError(
                f"verl's model merger failed on {actor_dir} (exit {merger.exitcode}):\n{text[-3000:]}"
            )
    return Path(target_dir)
