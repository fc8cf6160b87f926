"""The DeepEyes reader on a small parquet written here in the layout verl's DeepEyes recipe writes
(recipe/deepeyes/deepeyes47k_preprocess.py): it reads the extra_info tool fields, checks them, and rejects rows whose
tool fields cannot serve the zoom tool, naming the field. And the zoomchart source: questions whose answer sits in
a region only the zoom makes readable."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from chartrl.data.contract import check_row
from chartrl.data.stage import collect_split
from chartrl.tools.zoom import zoom_in

from conftest import dataset_from


def _jpeg(colour: str) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (96, 64), colour).save(buffer, format="JPEG")
    return buffer.getvalue()


def _record(index: int, image: bytes | None, *, tools: bool = True, need: bool = True, truth: str = "red") -> dict:
    """One row as the recipe's preprocessing writes it."""
    question = f"<image>\nWhat colour is the sign {index}?"
    uri = "data:image/jpeg;base64," + base64.b64encode(image or _jpeg("white")).decode()
    return {
        "data_source": "hiyouga/DeepEyes-Datasets-47k",
        "prompt": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": question},
        ],
        "images": [{"bytes": image, "path": f"{index}.jpg"}] if image is not None else [],
        "ability": "vqa",
        "reward_model": {"ground_truth": truth, "style": "model"},
        "extra_info": {
            "split": "train",
            "index": index,
            "answer": truth,
            "question": question,
            "need_tools_kwargs": need,
            "tools_kwargs": {"image_zoom_in_tool": {"create_kwargs": {"image": uri if tools else None}}},
        },
    }


def test_the_reader_reads_the_recipe_layout_and_its_extra_info_tool_fields(tmp_path):
    records = [
        _record(0, _jpeg("red")),
        _record(1, None),  # no images column value: the image comes from the zoom tool's data URI
        _record(2, _jpeg("blue"), tools=False),  # needs tool kwargs, has none: rejected, naming the field
        _record(3, _jpeg("green"), tools=False, need=False),  # needs none: kept, no zoom image recorded
        _record(4, _jpeg("red"), truth=""),  # no answer
    ]
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "train.parquet")
    dataset = dataset_from({"source": "deepeyes", "files": {"train": str(tmp_path / "train.parquet")}}, name="de")
    rows, rejects = collect_split(dataset, "train", root=Path("."))

    assert [r.id for r in rows] == ["train-000000", "train-000001", "train-000003"]
    first = rows[0]
    assert first.problem == "<image>\nWhat colour is the sign 0?"
    assert (first.answer, first.data_source, first.chart_type) == ("red", "deepeyes", "unknown")
    assert first.extra["tools"] == ["image_zoom_in_tool"] and first.extra["zoom_image"] is True
    assert first.extra["index"] == 0 and first.extra["question"] == "What colour is the sign 0?"
    assert first.extra["ability"] == "vqa" and first.extra["source_data"] == "hiyouga/DeepEyes-Datasets-47k"
    assert Image.open(io.BytesIO(first.images[0])).getpixel((10, 10))[0] > 200  # the red JPEG, as a PNG
    assert Image.open(io.BytesIO(rows[1].images[0])).size == (96, 64)  # decoded from the data URI
    assert rows[2].extra["zoom_image"] is False
    reasons = {r.id: r.reason for r in rejects}
    assert "need_tools_kwargs is true" in reasons["train-000002"]
    assert "image_zoom_in_tool.create_kwargs.image" in reasons["train-000002"]
    assert "no answer" in reasons["train-000004"]
    assert {r.source for r in rejects} == {"train.parquet[2]", "train.parquet[4]"}
    for row in rows:
        check_row(row)


def test_a_bad_data_uri_is_a_rejected_row_not_a_crash(tmp_path):
    record = _record(0, None)
    record["extra_info"]["tools_kwargs"]["image_zoom_in_tool"]["create_kwargs"]["image"] = "data:image/jpeg;base64,@@@"
    pq.write_table(pa.Table.from_pylist([record, _record(1, _jpeg("red"))]), tmp_path / "val.parquet")
    dataset = dataset_from({"source": "deepeyes", "files": {"val": str(tmp_path / "val.parquet")}}, name="de")
    rows, rejects = collect_split(dataset, "val", root=Path("."))
    assert [r.id for r in rows] == ["val-000001"]
    assert "bad base64" in rejects[0].reason


MODEL_VIEW = 224  # model.max_pixels 50176 of the CPU variant: a 448 x 448 chart is seen at 224 x 224


def _ink(image: Image.Image, box: list[float]) -> int:
    """The ink (summed darkness, 0 for white) inside ``box`` (normalised) of ``image`` as the model sees it, shrunk
    to 224 x 224."""
    small = image.convert("L").resize((MODEL_VIEW, MODEL_VIEW), Image.Resampling.BICUBIC)
    left, top, right, bottom = (round(v * MODEL_VIEW) for v in box)
    return sum(255 - p for p in small.crop((left, top, right, bottom)).tobytes())


def _centre(box: list[float], share: float = 0.2) -> list[float]:
    """The middle ``share`` of ``box`` (where the number sits, inside its frame)."""
    cx, cy, half = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2, share * (box[2] - box[0]) / 2
    return [cx - half, cy - half, cx + half, cy + half]


def test_zoomchart_numbers_are_unreadable_until_the_zoom_enlarges_their_box():
    """The asked number covers almost none of the model's pixels on the full chart and many after zoom_in on
    the row's region (the number's ink at the model's resolution grows about 16-fold: 4x in each direction)."""
    dataset = dataset_from(
        {"source": "zoomchart", "splits": {"train": 4, "test": 3}, "image_size": [448, 448], "text_px": 4}, name="z"
    )
    rows, rejects = collect_split(dataset, "test", root=Path("."))
    assert len(rows) == 3 and not rejects
    train, _ = collect_split(dataset, "train", root=Path("."))
    assert not {r.images[0] for r in train} & {r.images[0] for r in rows}  # splits draw different charts
    for row in rows:
        check_row(row)
        assert row.answer.isdigit() and len(row.answer) == 2
        image = Image.open(io.BytesIO(row.images[0]))
        box = row.extra["zoom_box"]
        zoomed = zoom_in(image, box)
        assert zoomed.ok, zoomed.error
        before, after = _ink(image, _centre(box)), _ink(zoomed.image, _centre([0.0, 0.0, 1.0, 1.0]))
        assert before > 0 and after >= 8 * before, (row.id, before, after)
