"""GeoQA readers: EasyR1's r1v layout (parquet) and multiple-choice GeoQA (JSONL), into the same contract."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from chartrl.data.contract import check_row
from chartrl.data.stage import collect_split

from conftest import dataset_from


def _png(colour: str = "white") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), colour).save(buffer, format="PNG")
    return buffer.getvalue()


def test_r1v_parquet_layout(tmp_path):
    image_struct = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    table = pa.table(
        {
            "images": pa.array(
                [
                    [{"bytes": _png(), "path": "a.png"}],
                    [{"bytes": _png("black"), "path": "b.png"}],
                    [{"bytes": _png(), "path": "c.png"}, {"bytes": _png(), "path": "d.png"}],  # two images
                    [{"bytes": b"not a png", "path": "e.png"}],
                ],
                type=pa.list_(image_struct),
            ),
            "problem": ["<image>Find the angle ABC.", "What is the length of AB?", "Two figures", "Broken image"],
            "answer": ["60", "5", "1", "2"],
        }
    )
    pq.write_table(table, tmp_path / "train.parquet")
    dataset = dataset_from({"source": "geoqa_r1v", "files": {"train": str(tmp_path / "train.parquet")}}, name="geo")
    rows, rejects = collect_split(dataset, "train", root=Path("."))
    assert [(r.problem, r.answer, r.chart_type, r.data_source) for r in rows] == [
        ("<image>Find the angle ABC.", "60", "geometry", "geoqa_r1v"),
        ("<image>\nWhat is the length of AB?", "5", "geometry", "geoqa_r1v"),  # placeholder added
    ]
    assert {r.id: r.reason.split(":")[0] for r in rejects} == {
        "train-000002": "2 images; the contract holds one image per row",
        "train-000003": "unreadable image",
    }
    for row in rows:
        check_row(row)


def test_multiple_choice_jsonl_layout(tmp_path):
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "1.png").write_bytes(_png())
    records = [
        {
            "id": "q1",
            "problem": "Angle ABC equals?",
            "choices": ["30°", "45°", "60°", "90°"],
            "label": 2,
            "image": "img/1.png",
        },
        {"id": "q2", "question": "Which is longer?", "choices": ["AB", "CD"], "label": "B", "image": "img/1.png"},
        {"id": "q3", "problem": "Out of range", "choices": ["a", "b"], "label": 5, "image": "img/1.png"},
        {"id": "q4", "problem": "No image", "choices": ["a", "b"], "label": 0},
        {"id": "q5", "problem": "Missing file", "choices": ["a", "b"], "label": 0, "image": "img/nope.png"},
    ]
    (tmp_path / "test.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    dataset = dataset_from({"source": "geoqa_mc", "files": {"test": str(tmp_path / "test.jsonl")}}, name="mc")
    rows, rejects = collect_split(dataset, "test", root=Path("."))
    assert [(r.id, r.answer) for r in rows] == [("q1", "C"), ("q2", "B")]
    assert rows[0].problem == "<image>\nAngle ABC equals?\nChoices:\nA. 30°\nB. 45°\nC. 60°\nD. 90°"
    assert rows[0].extra["choices"] == ["30°", "45°", "60°", "90°"]
    reasons = {r.id: r.reason for r in rejects}
    assert "outside the 2 choices" in reasons["q3"]
    assert "missing field(s) image" in reasons["q4"]
    assert "image file not found" in reasons["q5"]


def test_a_missing_file_stops_the_job_naming_it(tmp_path):
    from chartrl.data.errors import DataSourceError

    dataset = dataset_from({"source": "geoqa_mc", "files": {"test": str(tmp_path / "absent.jsonl")}}, name="mc")
    with pytest.raises(DataSourceError, match="absent.jsonl"):
        collect_split(dataset, "test", root=Path("."))


def test_one_placeholder_per_problem_shared_by_the_recipe_readers():
    """GeoQA's and DeepEyes' readers put one placeholder in front of a question that has none, keep one that has
    one, and reject two, naming the field the text came from."""
    from chartrl.data.contract import RowRejected, with_one_placeholder

    assert with_one_placeholder("  How long is AB? ", "problem") == "<image>\nHow long is AB?"
    assert with_one_placeholder("<image>How long is AB?", "problem") == "<image>How long is AB?"
    with pytest.raises(RowRejected, match="prompt holds 2 <image> placeholders"):
        with_one_placeholder("<image><image>Zoom in.", "prompt")
