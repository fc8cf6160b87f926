"""Which checkpoint an eval series means: ``last``, ``best_val``, a step, or ``start`` (the model the train series
started from), read from the train series' run.json."""

from __future__ import annotations

import json
from pathlib import Path

from chartrl.errors import ChartrlError


class CheckpointNotFound(ChartrlError):
    """The eval series names a checkpoint its train series does not have."""


def resolve_checkpoint(run_json: Path, checkpoint: str | int) -> Path:
    run = json.loads(Path(run_json).read_text())
    found = run["checkpoints"]
    if checkpoint == "start":
        return Path(run["base_model"])
    if checkpoint in ("last", "best_val"):
        path = Path(found[checkpoint])
    else:
        steps = found["steps"]
        if str(checkpoint) not in steps:
            raise CheckpointNotFound(
                f"{run_json}: no checkpoint at step {checkpoint}; kept steps: {', '.join(sorted(steps, key=int))} "
                "(raise train.keep_last or pick one of these, or 'last' / 'best_val')"
            )
        path = Path(steps[str(checkpoint)])
    if not path.is_dir():
        raise CheckpointNotFound(f"{run_json} names checkpoint {path}, which does not exist; rerun the train rule")
    return path
