"""Checkpoints of the local trainer: ``{run_dir}/checkpoints/step_{N}/``, each complete or absent.

A checkpoint holds the policy (a Hugging Face folder, or a PEFT adapter under LoRA, plus the processor), the
optimizer state, ``trainer_state.json`` (step, the job key of ``chartrl.train.resume``, MLflow run id, validation
history), the metrics written up to that step and the per-question validation scores up to it. Sampling is
seeded per step, so a resumed run redoes the lost steps exactly.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chartrl.files import atomic_dir

STEP_DIR = re.compile(r"^step_(\d+)$")


def checkpoint_dirs(run_dir: Path) -> dict[int, Path]:
    folder = Path(run_dir) / "checkpoints"
    if not folder.is_dir():
        return {}
    found = {}
    for path in folder.iterdir():
        match = STEP_DIR.match(path.name)
        if match and (path / "trainer_state.json").is_file():
            found[int(match.group(1))] = path
    return dict(sorted(found.items()))


def save_checkpoint(
    run_dir: Path,
    step: int,
    policy,
    optimizer,
    state: dict[str, Any],
    metrics_lines: list[str],
    run_files: Mapping[str, list[str]] | None = None,
) -> Path:
    """Write checkpoint ``step``: the policy, the optimizer, ``state``, the metrics lines so far and, for each
    ``run_files`` name, its lines so far (``val_items.jsonl``), so a resumed run restores them."""
    import torch

    target = Path(run_dir) / "checkpoints" / f"step_{step}"
    with atomic_dir(target) as tmp:
        policy.model.save_pretrained(tmp)
        policy.processor.save_pretrained(tmp)
        torch.save({"optimizer": optimizer.state_dict()}, tmp / "optimizer.pt")
        (tmp / "metrics.jsonl").write_text("".join(metrics_lines))
        for name, lines in (run_files or {}).items():
            (tmp / name).write_text("".join(lines))
        (tmp / "trainer_state.json").write_text(json.dumps({**state, "step": step}, indent=2) + "\n")
    return target


def load_state(path: Path) -> dict[str, Any]:
    return json.loads((Path(path) / "trainer_state.json").read_text())


def prune(run_dir: Path, keep_last: int, keep: set[int]) -> None:
    """Delete all checkpoints but the newest ``keep_last`` and the steps in ``keep`` (the best on validation)."""
    steps = list(checkpoint_dirs(run_dir))
    for step in steps[: max(0, len(steps) - keep_last)]:
        if step not in keep:
            shutil.rmtree(checkpoint_dirs(run_dir)[step], ignore_errors=True)
