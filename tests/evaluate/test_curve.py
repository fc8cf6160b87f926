"""The test curve: one point per kept checkpoint, the ones that exist already reused rather than rerun."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from chartrl.evaluate import curve as curves
from chartrl.evaluate.accuracy import summarise


def _record(row_id, score):
    return {"id": row_id, "question_type": "value", "score": score, "well_formed": True, "tool_call": True,
            "correct_label": True}  # fmt: skip


def _test_file(path, scores, year_rule="standard"):
    items = [_record(f"r{k}", s) for k, s in enumerate(scores)]
    path.write_text(json.dumps({"year_rule": year_rule, "test": {**summarise(items), "items": items}}))
    return path


@pytest.fixture
def run_json(tmp_path):
    steps = {str(s): str(tmp_path / f"step_{s}") for s in (10, 20, 30, 40)}
    run = {"last_step": 40, "checkpoints": {"last": steps["40"], "best_val": steps["20"], "steps": steps},
           "best_val": {"step": 20, "accuracy": 0.9}}  # fmt: skip
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    return path


def test_every_kept_checkpoint_is_a_point_and_existing_ones_are_reused(run_json, tmp_path):
    rows = [SimpleNamespace(id=f"r{k}") for k in range(3)]  # the curve's questions: the first three
    last = _test_file(tmp_path / "last.json", [1, 1, 0, 0, 0])  # the full test: five questions
    start = _test_file(tmp_path / "start.json", [0, 0, 1, 1, 1])
    rolled = []

    def evaluate_checkpoint(folder, subset):
        rolled.append(folder.name)
        return [_record(row.id, 1.0) for row in subset]

    curve = curves.test_curve(
        run_json,
        rows,
        reuse={40: last, 0: start},
        chosen=curves.chosen_steps(run_json, {"e4": "last", "e5": "best_val", "e6": 30}),
        year_rule="standard",
        evaluate_checkpoint=evaluate_checkpoint,
    )
    assert rolled == ["step_10", "step_20", "step_30"]  # step 0 and the last are read, not rerun
    assert [p["step"] for p in curve["points"]] == [0, 10, 20, 30, 40]
    assert [p["source"] for p in curve["points"]] == [str(start), "evaluated", "evaluated", "evaluated", str(last)]
    first, final = curve["points"][0], curve["points"][-1]
    assert [i["id"] for i in final["items"]] == ["r0", "r1", "r2"]  # restricted to the curve's questions
    assert final["accuracy"] == pytest.approx(2 / 3) and first["accuracy"] == pytest.approx(1 / 3)
    assert curve["chosen"] == {"e4": 40, "e5": 20, "e6": 30} and curve["rows"] == 3
