"""The shortcut filter (chartrl.evaluate.shortcut): the decision (k, threshold, controls, relaxed accuracy), the
filtered split (remove, down-weight, unexamined rows kept), the card's counting per question and chart type, the
controls, and the two commands on the miniature with a real tiny model."""

from __future__ import annotations

import io
import json
import random

import pytest
from PIL import Image

from chartrl.config import ShortcutFilterConfig, validate_fragment
from chartrl.data.contract import Row
from chartrl.evaluate.shortcut import (
    SAMPLE_WEIGHT,
    answers_by_question,
    control_rows,
    decide,
    examined_rows,
    filtered_split,
    shortcut_card,
    split_control_id,
)

from conftest import dataset_from


def settings(**values) -> ShortcutFilterConfig:
    return ShortcutFilterConfig.from_dict(validate_fragment(values, "shortcut_filter", "shortcut_filter"))


def png(size=(168, 56), colour="navy") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


def row(i: int, qtype: str = "count", answer: str = "4", chart_type: str = "v_bar") -> Row:
    return Row(
        id=f"q{i}",
        images=[png(colour=(i * 40 % 256, 0, 0))],
        problem=f"<image>Question {i}?",
        answer=answer,
        data_source="synthchart",
        chart_type=chart_type,
        bboxes={"x_values": {}, "y_values": {}},
        split="train",
        extra={"question_type": qtype},
    )


def answered(rows, right: dict[str, dict[str, int]], k: int, controls=("blank", "shuffled")):
    """Answers with ``right[row id][control]`` of ``k`` answers right (the gold) and the rest wrong."""
    out = {}
    for r in rows:
        out[r.id] = {
            c: [f"<answer>{r.answer}</answer>"] * right[r.id][c] + ["<answer>wrong</answer>"] * (k - right[r.id][c])
            for c in controls
        }
    return out


DECISIONS = [
    # (case, settings, right answers per control, shortcut?)
    ("6 of 8 at threshold 0.75", dict(k=4, threshold=0.75), {"blank": 3, "shuffled": 3}, True),
    ("5 of 8 at threshold 0.75", dict(k=4, threshold=0.75), {"blank": 4, "shuffled": 1}, False),
    ("the share pools the controls", dict(k=4, threshold=0.5), {"blank": 4, "shuffled": 0}, True),
    ("threshold 1: every answer right", dict(k=2, threshold=1.0), {"blank": 2, "shuffled": 1}, False),
    ("threshold 1, all right", dict(k=2, threshold=1.0), {"blank": 2, "shuffled": 2}, True),
    ("k 1, blank only", dict(k=1, threshold=1.0, controls=["blank"]), {"blank": 1}, True),
    ("k 1, blank only, wrong", dict(k=1, threshold=0.5, controls=["blank"]), {"blank": 0}, False),
]


@pytest.mark.parametrize("case,values,right,expected", DECISIONS, ids=[c[0] for c in DECISIONS])
def test_decision(case, values, right, expected):
    s = settings(**values)
    rows = [row(0)]
    [decision] = decide(rows, answered(rows, {"q0": right}, s.k, s.controls), s)
    assert decision.shortcut is expected, case
    assert decision.share == pytest.approx(sum(right.values()) / (s.k * len(s.controls)))


def test_right_means_relaxed_accuracy_as_everywhere():
    s = settings(k=2, threshold=1.0, controls=["blank"])
    rows = [row(0, answer="40"), row(1, answer="Yes")]
    answers = {
        "q0": {"blank": ["<answer>41</answer>", "<answer>40.0</answer>"]},  # within 5%
        "q1": {"blank": ["<answer>yes</answer>", "yes"]},  # no answer tag: wrong
    }
    first, second = decide(rows, answers, s)
    assert first.shortcut and first.right == {"blank": 2}
    assert not second.shortcut and second.right == {"blank": 1}


def test_missing_answers_fail_naming_the_question():
    s = settings(k=2)
    rows = [row(0), row(1)]
    answers = answered(rows, {"q0": {"blank": 1, "shuffled": 1}, "q1": {"blank": 1, "shuffled": 1}}, 2)
    answers["q1"]["shuffled"].pop()
    with pytest.raises(ValueError, match=r"q1 \(shuffled: 1\)"):
        decide(rows, answers, s)


def test_remove_and_downweight_keep_unexamined_rows():
    rows = [row(i) for i in range(5)]
    examined = rows[:3]
    right = {"q0": {"blank": 4, "shuffled": 4}, "q1": {"blank": 0, "shuffled": 0}, "q2": {"blank": 4, "shuffled": 3}}
    removed = settings(k=4, threshold=0.75)
    decisions = decide(examined, answered(examined, right, 4), removed)
    assert [r.id for r in filtered_split(rows, decisions, removed)] == ["q1", "q3", "q4"]
    weighted = settings(k=4, threshold=0.75, mode="downweight", weight=0.1)
    out = filtered_split(rows, decide(examined, answered(examined, right, 4), weighted), weighted)
    assert [r.id for r in out] == [r.id for r in rows]
    assert [r.extra.get(SAMPLE_WEIGHT) for r in out] == [0.1, None, 0.1, None, None]
    assert rows[0].extra == {"question_type": "count"}  # the input rows are not changed


def test_examined_rows_are_a_seeded_sample_in_split_order():
    rows = [row(i) for i in range(50)]
    assert examined_rows(rows, settings()) == rows
    assert examined_rows(rows, settings(max_questions=60)) == rows
    first = examined_rows(rows, settings(max_questions=10, seed=3))
    assert len(first) == 10 and first == examined_rows(rows, settings(max_questions=10, seed=3))
    assert [r.id for r in first] == sorted((r.id for r in first), key=lambda i: int(i[1:]))
    assert first != examined_rows(rows, settings(max_questions=10, seed=4))


def test_controls_take_the_chart_away():
    rows = [row(i, chart_type=t) for i, t in enumerate(["v_bar", "h_bar", "v_bar"])]
    out = control_rows(rows, settings(seed=1))
    assert [r.id for r in out] == [f"q{i}@{c}" for c in ("blank", "shuffled") for i in range(3)]
    for blank in out[:3]:
        image = Image.open(io.BytesIO(blank.images[0]))
        assert image.size == (168, 56) and image.convert("RGB").getcolors() == [(168 * 56, (255, 255, 255))]
    for original, shuffled in zip(rows, out[3:], strict=True):
        assert shuffled.images != original.images and shuffled.answer == original.answer  # another chart
    assert split_control_id("a@b@shuffled") == ("a@b", "shuffled")
    with pytest.raises(ValueError, match="not a shortcut-filter answer id"):
        split_control_id("q1@noise")


def test_answers_are_grouped_by_question_and_control_in_sample_order():
    records = [
        {"id": "q1@blank", "sample": 1, "final_response": "b"},
        {"id": "q1@shuffled", "sample": 0, "final_response": "c"},
        {"id": "q1@blank", "sample": 0, "final_response": "a"},
    ]
    assert answers_by_question(records) == {"q1": {"blank": ["a", "b"], "shuffled": ["c"]}}


def test_card_counts_per_question_and_chart_type():
    s = settings(k=2, threshold=0.75, examples=1)
    rows = [
        row(0, "count", chart_type="v_bar"),
        row(1, "count", chart_type="h_bar"),
        row(2, "value", chart_type="v_bar"),
        row(3, "value", chart_type="v_bar"),
        row(4, "value", chart_type="v_bar"),  # not examined
    ]
    examined = rows[:4]
    right = {
        "q0": {"blank": 2, "shuffled": 2},
        "q1": {"blank": 2, "shuffled": 1},
        "q2": {"blank": 0, "shuffled": 1},
        "q3": {"blank": 0, "shuffled": 0},
    }
    answers = answered(examined, right, 2)
    decisions = decide(examined, answers, s)
    card = shortcut_card(
        "d", rows, decisions, answers, s, kept=3, bootstrap_samples=200, confidence=0.9, seed=0, backend="local"
    )
    assert (card["rows"], card["examined"], card["not_examined"], card["shortcut"], card["removed"]) == (5, 4, 1, 2, 2)
    count, value = card["by_question_type"]["count"], card["by_question_type"]["value"]
    assert (count["examined"], count["shortcut"], count["shortcut_rate"]["mean"]) == (2, 2, 1.0)
    assert (value["examined"], value["shortcut"], value["shortcut_rate"]["mean"]) == (2, 0, 0.0)
    assert count["accuracy_without_chart"]["shuffled"]["mean"] == pytest.approx(0.75)
    assert value["accuracy_without_chart"]["blank"]["mean"] == 0.0
    assert card["by_chart_type"]["h_bar"]["shortcut"] == 1 and card["by_chart_type"]["v_bar"]["shortcut"] == 1
    overall = card["overall"]["shortcut_rate"]
    assert overall["mean"] == 0.5 and overall["low"] <= 0.5 <= overall["high"] and overall["n"] == 4
    [example] = card["examples"]
    assert example["id"] == "q0" and example["answers"]["blank"] == ["<answer>4</answer>"] * 2
    json.dumps(card)  # the card is JSON


def test_weighted_prompt_draws():
    from chartrl.train.trainer import draw_prompts

    rows = [row(i) for i in range(20)]
    # no weights: exactly the uniform draw the trainer always made
    assert draw_prompts(rows, 5, random.Random("s")) == random.Random("s").sample(rows, 5)
    light = [r.id for r in rows[:10]]
    weighted = [Row(**{**r.__dict__, "extra": {**r.extra, SAMPLE_WEIGHT: 0.05}}) if r.id in light else r for r in rows]
    drawn = [draw_prompts(weighted, 5, random.Random(i)) for i in range(200)]
    assert all(len({r.id for r in d}) == 5 for d in drawn)  # without replacement
    share = sum(r.id in light for d in drawn for r in d) / (200 * 5)
    assert share < 0.15  # half the rows at weight 0.05: far fewer than half of the draws


def test_the_commands_on_the_miniature_with_a_real_tiny_model(tiny_model_dir, default_config, tmp_path):
    """The stage's two jobs, as the rules run them, on miniature charts: k answers per question and control,
    then the decision, the filtered split, the card and its MLflow run."""
    import pyarrow.parquet as pq

    from chartrl.cli import main
    from chartrl.config import to_plain
    from chartrl.data.contract import read_split, write_split
    from chartrl.data.stage import collect_split
    from chartrl.workflow import job_spec

    dataset = dataset_from(
        {
            "source": "synthchart",
            "seed": 5,
            "splits": {"train": 4},
            "styles": {"mini": 1},
            "image_size": [168, 56],
            "question_types": {"value": 1, "count": 1},
        },
        name="mini",
    )
    rows = collect_split(dataset, "train", root=tmp_path)[0]
    write_split(rows, tmp_path / "train.parquet")
    settings = {"id": "mini", "k": 2, "threshold": 0.5, "max_questions": 6}
    rollout = {**to_plain(default_config.resolved["rollout"]), "max_new_tokens": 8}
    spec = job_spec("shortcut answers", default_config, {"rollout": rollout}, filter=settings)  # as the rules write it
    out = tmp_path / "filter"
    assert main(["shortcut", "answers", "--spec", spec, "--model", str(tiny_model_dir),
                 "--data", str(tmp_path / "train.parquet"), "--out", str(out / "answers.parquet")]) == 0  # fmt: skip
    answers = pq.read_table(out / "answers.parquet").to_pylist()
    assert len(answers) == 6 * 2 * 2  # questions x controls x k
    assert {a["id"].rsplit("@", 1)[1] for a in answers} == {"blank", "shuffled"}
    assert not any(a["tool_called"] for a in answers)  # the no-tool prompt: one pass
    spec = job_spec("shortcut filter", default_config, filter=settings)
    assert main(["shortcut", "filter", "--spec", spec, "--data", str(tmp_path / "train.parquet"),
                 "--answers", str(out / "answers.parquet"), "--out", str(out / "train.parquet"),
                 "--card", str(out / "card.json"),
                 "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db"]) == 0  # fmt: skip
    card = json.loads((out / "card.json").read_text())
    kept = read_split(out / "train.parquet")
    assert card["rows"] == len(rows) == 8 and card["examined"] == 6 and card["not_examined"] == 2
    assert len(kept) == card["rows_after"] == len(rows) - card["removed"]
    assert sum(t["examined"] for t in card["by_question_type"].values()) == 6
    assert set(card["by_question_type"]) <= {"value", "count"} and set(card["by_chart_type"]) == {"v_bar"}
