"""ChartQA readers on the real sample (original layout + ReFocus boxes), on annotation files written in the
documented schema, and on a local folder in the Hugging Face parquet layout."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

from chartrl.data.chartqa import bands_from_annotation
from chartrl.data.contract import check_box
from chartrl.data.images import png_bytes
from chartrl.data.stage import collect_split

from conftest import CHARTQA_REAL, copy_chartqa_layout, dataset_from

REFOCUS = CHARTQA_REAL / "test" / "refocus_chartqa_vcot_test.jsonl"


def original_dataset(path: Path, refocus: bool = True):
    section = {"source": "chartqa_original", "path": str(path), "splits": ["test"]}
    if refocus:
        section["refocus_boxes"] = {"test": "test/refocus_chartqa_vcot_test.jsonl"}
    return dataset_from(section, name="cqa")


@pytest.fixture(scope="module")
def real_rows():
    rows, rejects = collect_split(original_dataset(CHARTQA_REAL), "test", root=Path("."))
    assert rejects == []
    return rows


def refocus_records() -> dict[str, dict]:
    records = {}
    for line in REFOCUS.read_text().splitlines():
        record = json.loads(line)
        records.setdefault(Path(record["image"]).name, record)
    return records


def test_all_124_records_with_the_right_subset(real_rows):
    human = json.loads((CHARTQA_REAL / "test/test_human.json").read_text())
    augmented = json.loads((CHARTQA_REAL / "test/test_augmented.json").read_text())
    assert len(real_rows) == len(human) + len(augmented) == 124
    assert Counter(r.extra["subset"] for r in real_rows) == {"human": 90, "augmented": 34}
    assert Counter(r.data_source for r in real_rows) == {"chartqa_human": 90, "chartqa_augmented": 34}
    # row by row, in file order: the question, answer and subset of the source record
    expected = [("human", rec) for rec in human] + [("augmented", rec) for rec in augmented]
    for row, (subset, record) in zip(real_rows, expected, strict=True):
        assert row.extra["subset"] == subset
        assert row.extra["imgname"] == record["imgname"]
        assert row.problem == "<image>\n" + record["query"]
        assert row.answer == record["label"].strip()
    assert len({r.id for r in real_rows}) == 124


def test_images_are_the_source_pixels(real_rows):
    row = real_rows[0]
    source = Image.open(CHARTQA_REAL / "test/png" / row.extra["imgname"])
    stored = Image.open(io.BytesIO(row.images[0]))
    assert stored.mode == "RGB" and stored.size == source.size
    assert png_bytes(source) == row.images[0]  # RGBA charts composited on white, nothing else changed


def test_all_30_bar_charts_get_bands_from_the_refocus_boxes(real_rows, tmp_path):
    records = refocus_records()
    charts = {r.extra["imgname"]: r for r in real_rows}
    bar_charts = {name: row for name, row in charts.items() if row.chart_type in ("v_bar", "h_bar")}
    assert len(bar_charts) == 30 and set(bar_charts) == set(records)
    assert Counter(r.chart_type for r in bar_charts.values()) == {"v_bar": 18, "h_bar": 12}
    for name, row in bar_charts.items():
        record = records[name]
        axis = "x_values" if row.chart_type == "v_bar" else "y_values"
        other = "y_values" if axis == "x_values" else "x_values"
        assert row.extra["boxes_from"] == "refocus"
        assert list(row.bboxes[axis]) == [str(v) for v in dict.fromkeys(record[axis])]
        assert row.bboxes[other] == {}
        width, height = row.extra["image_size"]
        for label, raw in zip(record[axis], record[f"{axis}_bbox"], strict=True):
            box = row.bboxes[axis][str(label)]
            assert check_box(box) is None, (name, label, box)  # inside the image
            # the normalised box is the published pixel box (clipped to the image)
            assert box[0] * width == pytest.approx(min(max(raw["x1"], 0), width), abs=0.01)
            assert box[3] * height == pytest.approx(min(max(raw["y2"], 0), height), abs=0.01)
    # the 15 line and pie charts have no boxes and are counted as such
    assert sum(1 for r in charts.values() if r.chart_type == "unknown" and r.extra["boxes_from"] is None) == 15


def _ink(image: np.ndarray) -> np.ndarray:
    return image.min(axis=-1) < 160


def test_bands_lie_over_their_labels_rows_and_columns(real_rows, tmp_path):
    """Draw every band on its chart, and check it sits where its label is: bands follow the labels' order
    along the axis without overlapping, and the label end of each band (bottom of a column, left of a row)
    holds ink: the label text or the start of the bar."""
    charts = {r.extra["imgname"]: r for r in real_rows if r.chart_type in ("v_bar", "h_bar")}
    for name, row in charts.items():
        image = Image.open(io.BytesIO(row.images[0])).convert("RGB")
        pixels = np.asarray(image).astype(int)
        height, width, _ = pixels.shape
        ink = _ink(pixels)
        axis = "x_values" if row.chart_type == "v_bar" else "y_values"
        bands = list(row.bboxes[axis].values())
        starts = [b[0] if axis == "x_values" else b[1] for b in bands]
        ends = [b[2] if axis == "x_values" else b[3] for b in bands]
        assert starts == sorted(starts), name
        for end, next_start in zip(ends[:-1], starts[1:], strict=True):
            assert next_start >= end - 2 / (width if axis == "x_values" else height), f"{name}: overlapping bands"
        draw = ImageDraw.Draw(image)
        for label, (x1, y1, x2, y2) in row.bboxes[axis].items():
            px1, py1, px2, py2 = int(x1 * width), int(y1 * height), int(x2 * width), int(y2 * height)
            if axis == "x_values":
                label_end = ink[py2 - (py2 - py1) // 4 : py2, px1:px2]
            else:
                label_end = ink[py1:py2, px1 : px1 + (px2 - px1) * 35 // 100]
            assert label_end.any(), f"{name}: nothing drawn at the label end of the band of {label!r}"
            draw.rectangle([px1, py1, px2, py2], outline=(255, 0, 0), width=2)
        image.save(tmp_path / f"{Path(name).stem}_bands.png")


# ---------------------------------------------------------------------------------------------------------------
# Annotation files in the documented schema
# ---------------------------------------------------------------------------------------------------------------


def _annotation_from_refocus(record: dict, chart_type: str, categories_under: str) -> dict:
    """Write a ChartQA annotation for a real chart: label boxes at the centres of its ReFocus bands (where the
    labels are drawn), the plot area from ReFocus' figure box."""
    figure = record["figure_bbox"]
    axis = "x_values" if chart_type == "v_bar" else "y_values"
    boxes = []
    for raw in record[f"{axis}_bbox"]:
        if chart_type == "v_bar":
            cx = (raw["x1"] + raw["x2"]) / 2
            boxes.append({"x": cx - 15, "y": raw["y2"] - 14, "w": 30, "h": 12})
        else:
            cy = (raw["y1"] + raw["y2"]) / 2
            boxes.append({"x": raw["x1"] + 2, "y": cy - 6, "w": 40, "h": 12})
    info = {
        "figure_info": {
            "bbox": {
                "x": figure["x1"],
                "y": figure["y1"],
                "w": figure["x2"] - figure["x1"],
                "h": figure["y2"] - figure["y1"],
            }
        },
        categories_under: {"major_labels": {"values": record[axis], "bboxes": boxes}},
    }
    other = "y_axis" if categories_under == "x_axis" else "x_axis"
    # the value axis: ticks spread along the other direction (e.g. 0, 20, 40 on a v_bar's y axis)
    if chart_type == "v_bar":
        ticks = [{"x": figure["x1"] - 30, "y": figure["y2"] - k * 40, "w": 20, "h": 10} for k in range(3)]
    else:
        ticks = [{"x": figure["x1"] + k * 80, "y": figure["y2"] + 4, "w": 20, "h": 10} for k in range(3)]
    info[other] = {"major_labels": {"values": ["0", "20", "40"], "bboxes": ticks}}
    return {"type": chart_type, "general_figure_info": info, "models": []}


def _covered(a: tuple[float, float], by: tuple[float, float]) -> float:
    """The fraction of interval ``a`` inside interval ``by``."""
    return max(0.0, min(a[1], by[1]) - max(a[0], by[0])) / (a[1] - a[0])


def _interval_iou(a: tuple[float, float], b: tuple[float, float]) -> float:
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    return inter / (max(a[1], b[1]) - min(a[0], b[0]))


@pytest.mark.parametrize(
    "imgname,chart_type,categories_under",
    [
        ("two_col_258.png", "v_bar", "x_axis"),
        ("multi_col_20505.png", "v_bar", "x_axis"),
        ("41699051005347.png", "h_bar", "x_axis"),  # ChartQA's own convention for h_bar ("x and y are reversed")
        ("41699051005347.png", "h_bar", "y_axis"),
        ("two_col_2120.png", "h_bar", "x_axis"),
    ],
)
def test_bands_from_annotation_files_match_the_published_bands(tmp_path, imgname, chart_type, categories_under):
    record = refocus_records()[imgname]
    root = copy_chartqa_layout(tmp_path / "cqa", charts=[imgname])
    (root / "test/annotations").mkdir()
    annotation = _annotation_from_refocus(record, chart_type, categories_under)
    (root / "test/annotations" / f"{Path(imgname).stem}.json").write_text(json.dumps(annotation))
    rows, rejects = collect_split(original_dataset(root), "test", root=Path("."))
    assert rejects == [] and rows
    row = rows[0]
    assert row.extra["boxes_from"] == "annotation" and row.chart_type == chart_type  # annotations win over ReFocus
    axis = "x_values" if chart_type == "v_bar" else "y_values"
    width, height = row.extra["image_size"]
    assert list(row.bboxes[axis]) == record[axis]
    n = len(record[axis])
    for i, (label, raw) in enumerate(zip(record[axis], record[f"{axis}_bbox"], strict=True)):
        x1, y1, x2, y2 = row.bboxes[axis][label]
        ours = (x1 * width, x2 * width) if axis == "x_values" else (y1 * height, y2 * height)
        published = (raw["x1"], raw["x2"]) if axis == "x_values" else (raw["y1"], raw["y2"])
        # Ours reach half-way to the neighbours, the published ones may leave gaps between bars: an inner band
        # of ours covers the published one and not much more. The outer published bands run on to the plot's
        # edge (ReFocus' heuristic), ours are symmetric: they must overlap and hold the published centre.
        centre = sum(published) / 2
        assert ours[0] <= centre <= ours[1] and _interval_iou(ours, published) > 0.6, (label, ours, published)
        if 0 < i < n - 1:
            assert _covered(published, by=ours) > 0.9, (label, ours, published)
        # the band spans the plot area across
        figure = record["figure_bbox"]
        if axis == "x_values":
            assert y1 * height <= figure["y1"] + 1 and y2 * height >= figure["y2"] - 1
        else:
            assert x1 * width <= figure["x1"] + 1 and x2 * width >= figure["x2"] - 1


@pytest.mark.parametrize("chart_type", ["line", "pie"])
def test_annotated_line_and_pie_charts_get_their_type_and_no_bands(chart_type):
    annotation = {
        "type": chart_type,
        "general_figure_info": {
            "figure_info": {"bbox": {"x": 50, "y": 40, "w": 500, "h": 300}},
            "x_axis": {
                "major_labels": {
                    "values": ["2019", "2020"],
                    "bboxes": [{"x": 100, "y": 350, "w": 30, "h": 12}, {"x": 400, "y": 350, "w": 30, "h": 12}],
                }
            },
        },
    }
    kind, bboxes, plot_area = bands_from_annotation(annotation, 600, 400)
    assert kind == chart_type and bboxes == {"x_values": {}, "y_values": {}}
    assert plot_area == pytest.approx([50 / 600, 0.1, 550 / 600, 0.85], abs=1e-6)


def test_half_way_bands_on_a_hand_computed_annotation():
    # three labels centred at x = 100, 200, 400 in a 500x300 image; plot area x 50..450, y 20..250
    boxes = [{"x": c - 10, "y": 260, "w": 20, "h": 10} for c in (100, 200, 400)]
    annotation = {
        "type": "v_bar",
        "general_figure_info": {
            "figure_info": {"bbox": {"x": 50, "y": 20, "w": 400, "h": 230}},
            "x_axis": {"major_labels": {"values": ["a", "b", "c"], "bboxes": boxes}},
        },
    }
    _, bboxes, _ = bands_from_annotation(annotation, 500, 300)
    # a: 50 (half the gap to b on the left too) .. 150; b: 150 .. 300; c: 300 .. 450 (clipped to the plot area)
    expected = {"a": (50, 150), "b": (150, 300), "c": (300, 450)}
    for label, (left, right) in expected.items():
        x1, y1, x2, y2 = bboxes["x_values"][label]
        assert (x1 * 500, x2 * 500) == pytest.approx((left, right), abs=0.01)
        assert (y1 * 300, y2 * 300) == pytest.approx((20, 270), abs=0.01)  # plot top .. bottom of the labels


# ---------------------------------------------------------------------------------------------------------------
# Hugging Face parquet layout
# ---------------------------------------------------------------------------------------------------------------


def _write_hub_layout(folder: Path, records: list[dict]) -> None:
    """A local folder laid out like the HuggingFaceM4/ChartQA hub repository, written by `datasets`."""
    import datasets

    features = datasets.Features(
        {
            "image": datasets.Image(),
            "query": datasets.Value("string"),
            "label": datasets.Sequence(datasets.Value("string")),
            "human_or_machine": datasets.ClassLabel(names=["human", "machine"]),
        }
    )
    table = {key: [r[key] for r in records] for key in features}
    ds = datasets.Dataset.from_dict(table, features=features)
    (folder / "data").mkdir(parents=True)
    ds.to_parquet(str(folder / "data" / "test-00000-of-00001.parquet"))


def test_hub_layout_reader_on_a_local_folder(tmp_path):
    pngs = sorted((CHARTQA_REAL / "test/png").iterdir())[:3]
    records = [
        {
            "image": {"bytes": pngs[0].read_bytes(), "path": pngs[0].name},
            "query": "How many bars?",
            "label": ["14"],
            "human_or_machine": 0,
        },
        {
            "image": {"bytes": pngs[1].read_bytes(), "path": pngs[1].name},
            "query": "Largest value?",
            "label": ["Lamb"],
            "human_or_machine": 1,
        },
        {
            "image": {"bytes": pngs[2].read_bytes(), "path": pngs[2].name},
            "query": "Empty label",
            "label": [],
            "human_or_machine": 0,
        },
    ]
    _write_hub_layout(tmp_path / "ChartQA", records)
    dataset = dataset_from(
        {"source": "chartqa_hf", "path": str(tmp_path / "ChartQA"), "splits": {"test": "test"}}, name="hf"
    )
    rows, rejects = collect_split(dataset, "test", root=Path("."))
    assert [r.id for r in rejects] == ["test-000002"] and "empty answer" in rejects[0].reason
    assert [(r.answer, r.extra["subset"], r.data_source) for r in rows] == [
        ("14", "human", "chartqa_human"),
        ("Lamb", "augmented", "chartqa_augmented"),
    ]
    assert rows[0].problem == "<image>\nHow many bars?" and rows[0].chart_type == "unknown"
    assert rows[0].images[0] == png_bytes(Image.open(pngs[0]))


def test_hub_reader_names_the_dataset_when_it_cannot_load(tmp_path):
    from chartrl.data.errors import DataSourceError

    dataset = dataset_from(
        {"source": "chartqa_hf", "path": "nobody/NoSuchChartQA", "splits": {"test": "test"}}, name="hf"
    )
    with pytest.raises(DataSourceError, match="nobody/NoSuchChartQA"):
        collect_split(dataset, "test", root=tmp_path)


def test_each_reader_imports_on_its_own_in_a_fresh_interpreter():
    """A reader module imported first (a user's script, a test file run alone) must not meet the source registry
    half-initialised: the registry imports every reader, and a reader importing another reader's module would
    cycle back."""
    import subprocess
    import sys

    from conftest import REPO

    for module in ("chartrl.data.chartqa", "chartrl.data.geoqa", "chartrl.data.deepeyes", "chartrl.data.synthchart"):
        done = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, cwd=REPO)
        assert done.returncode == 0, f"import {module} alone: {done.stderr[-600:]}"
