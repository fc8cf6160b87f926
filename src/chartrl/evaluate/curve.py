"""The test curve of a train series: greedy test accuracy of every checkpoint its run kept, so the checkpoint an
eval series picks (``last``, ``best_val`` or a step) is seen next to the others.

Each point is read on the same questions, the first ``evaluate.curve_rows`` of the test split (after
``evaluate.limit``). Points that exist already are not rerun: the last checkpoint's greedy records come from the
series' ``test_accuracy.json`` and the step-0 policy's (the warm-started start, when the run trained from it) from
the warm start's, each restricted to the curve's questions; only the checkpoints in between are rolled out here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from chartrl.data.contract import Row
from chartrl.errors import ChartrlError
from chartrl.evaluate.accuracy import summarise

log = logging.getLogger(__name__)


class CurveInputError(ChartrlError):
    """A file the curve reuses does not hold what the curve needs (its questions, its answer rule)."""


def kept_checkpoints(run_json: Path) -> dict[int, Path]:
    """Step -> checkpoint folder of every checkpoint the run kept (its run.json's ``checkpoints.steps``)."""
    run = json.loads(Path(run_json).read_text())
    return {
        int(step): Path(path) for step, path in sorted(run["checkpoints"]["steps"].items(), key=lambda s: int(s[0]))
    }


def chosen_steps(run_json: Path, checkpoints: Mapping[str, str | int]) -> dict[str, int]:
    """Eval series -> the step of the checkpoint it names (``last``, ``best_val``, a step, or ``start``: step 0),
    read from run.json."""
    run = json.loads(Path(run_json).read_text())
    out = {}
    for series, checkpoint in checkpoints.items():
        if checkpoint == "start":
            out[series] = 0
        elif checkpoint == "last":
            out[series] = int(run["last_step"])
        elif checkpoint == "best_val":
            best = run.get("best_val") or {}
            out[series] = int(best["step"]) if best.get("step") is not None else int(run["last_step"])
        else:
            out[series] = int(checkpoint)
    return out


def reused_records(path: Path, ids: Sequence[str], year_rule: str) -> list[dict[str, Any]]:
    """The greedy ``test`` records of ``ids`` from a test_accuracy.json, in the order of ``ids``."""
    data = json.loads(Path(path).read_text())
    used = data.get("year_rule", "strict")  # files written before the option existed used the strict year rule
    if used != year_rule:
        raise CurveInputError(
            f"{path} scored answers with year_rule {used!r}, the curve with {year_rule!r}: rerun its test_accuracy "
            "rule (snakemake --forcerun test_accuracy)"
        )
    by_id = {item["id"]: item for item in data["test"]["items"]}
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise CurveInputError(
            f"{path} has no test record of {len(missing)} curve question(s) ({', '.join(missing[:5])}); it was "
            "written for other test rows: rerun its test_accuracy rule"
        )
    return [by_id[i] for i in ids]


def test_curve(
    run_json: Path,
    rows: Sequence[Row],
    *,
    reuse: Mapping[int, Path],
    chosen: Mapping[str, int],
    year_rule: str,
    evaluate_checkpoint,
) -> dict[str, Any]:
    """One point per kept checkpoint (and per step in ``reuse``, e.g. step 0), in step order.

    ``reuse``: step -> a test_accuracy.json whose greedy records stand for that step (not rerun).
    ``evaluate_checkpoint(folder, rows) -> records``: the greedy test records of a checkpoint (the command passes
    ``chartrl.evaluate.accuracy.test_accuracy`` on the loaded policy, ``conditions=("test",)``).
    """
    ids = [row.id for row in rows]
    steps = {**kept_checkpoints(run_json), **{int(s): None for s in reuse}}
    points = []
    for step in sorted(steps):
        if step in reuse:
            records, source = reused_records(reuse[step], ids, year_rule), str(reuse[step])
        else:
            records, source = evaluate_checkpoint(steps[step], rows), "evaluated"
        summary = summarise(records)
        log.info("step %d: accuracy %.3f (%s)", step, summary["accuracy"], source)
        points.append({"step": step, "source": source, **summary, "items": records})
    return {"rows": len(rows), "year_rule": year_rule, "chosen": dict(chosen), "points": points}
