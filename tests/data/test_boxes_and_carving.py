"""What the GPU study needs from its data: splits carved chart by chart out of a one-split sample, questions on
charts without label boxes left out where asked (and counted), and a tool series' train split refused when too
few of its questions have boxes. On the real ChartQA sample (30 of its 45 charts are bar charts with ReFocus
boxes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chartrl.data.contract import has_boxes, read_split
from chartrl.data.errors import DataSourceError
from chartrl.data.stage import build_card, build_split, collect_split

from conftest import CHARTQA_REAL, copy_chartqa_layout, dataset_from

CARVE = {"from": "test", "shares": {"train": 3, "val": 1, "test": 2}, "seed": 0}


def carved(**extra):
    section = {
        "source": "chartqa_original",
        "path": str(CHARTQA_REAL),
        "splits": ["train", "val", "test"],
        "refocus_boxes": {"test": "test/refocus_chartqa_vcot_test.jsonl"},
        "carve": CARVE,
        **extra,
    }
    return dataset_from(section, name="cqa")


@pytest.fixture(scope="module")
def carved_rows():
    rows = {}
    for split in ("train", "val", "test"):
        rows[split], rejects = collect_split(carved(), split, root=Path("."))
        assert rejects == []
    return rows


def _charts(rows):
    return {row.id.rsplit("-", 1)[0] for row in rows}


def test_carving_partitions_the_charts_by_the_shares(carved_rows):
    charts = {split: _charts(rows) for split, rows in carved_rows.items()}
    assert (
        not charts["train"] & charts["val"]
        and not charts["train"] & charts["test"]
        and not charts["val"] & charts["test"]
    )
    assert sum(len(c) for c in charts.values()) == 45  # every chart of the sample, once
    assert [len(charts[s]) for s in ("train", "val", "test")] == [22, 8, 15]  # 45 x 3/6, 4/6, 6/6, rounded
    assert sum(len(rows) for rows in carved_rows.values()) == 124  # every question, in its chart's split
    assert all(row.split == split for split, rows in carved_rows.items() for row in rows)


def test_carving_depends_on_the_seed_only():
    other = dataset_from({**carved().to_dict()["options"], "source": "chartqa_original", "carve": {**CARVE, "seed": 1}})
    again, _ = collect_split(carved(), "val", root=Path("."))
    reseeded, _ = collect_split(other, "val", root=Path("."))
    first, _ = collect_split(carved(), "val", root=Path("."))
    assert [r.id for r in again] == [r.id for r in first]
    assert _charts(reseeded) != _charts(first)


def test_require_boxes_leaves_out_charts_without_boxes_and_the_card_counts_them(tmp_path):
    dataset = carved(require_boxes=["train"])
    out, rejects = tmp_path / "train.parquet", tmp_path / "train.rejects.json"
    summary = build_split(dataset, "train", Path("."), out, rejects, min_box_coverage=1.0)
    rows = read_split(out)
    assert rows and all(has_boxes(row.bboxes) for row in rows)
    # the sample's line and pie charts: no ReFocus record, so no boxes and no known type
    assert {item["chart_type"] for item in summary["left_out"]} == {"unknown"}
    card, _ = build_card(dataset, {"train": out}, {"train": rejects})
    assert card["left_out"]["train"]["count"] == len(summary["left_out"]) > 0
    assert card["splits"]["train"]["bbox_coverage"]["question_fraction"] == 1.0
    assert card["rejected"]["train"]["count"] == 0  # left out is not rejected: the data is fine, the study skips it


def test_a_tool_series_train_split_with_too_few_boxes_fails_naming_the_fix(tmp_path):
    out, rejects = tmp_path / "test.parquet", tmp_path / "test.rejects.json"
    no_boxes = dataset_from({"source": "chartqa_original", "path": str(CHARTQA_REAL), "splits": ["test"]}, name="cqa")
    with pytest.raises(DataSourceError, match=r"only 0\.0% of 124 questions have label boxes.*require_boxes"):
        build_split(no_boxes, "test", Path("."), out, rejects, min_box_coverage=0.5)
    assert not out.exists() and not rejects.exists()  # nothing half-written
    with_boxes = dataset_from(
        {
            **no_boxes.to_dict()["options"],
            "source": "chartqa_original",
            "refocus_boxes": {"test": "test/refocus_chartqa_vcot_test.jsonl"},
        },
        name="cqa",
    )
    summary = build_split(with_boxes, "test", Path("."), out, rejects, min_box_coverage=0.5)
    assert summary["rows"] == 124  # 90 of 124 questions are on the 30 bar charts: 73% >= 50%
    assert json.loads(rejects.read_text())["left_out"] == []


def test_declared_annotations_must_exist(tmp_path):
    dataset = dataset_from(
        {"source": "chartqa_original", "path": str(CHARTQA_REAL), "splits": ["test"], "annotations": True}, name="cqa"
    )
    with pytest.raises(DataSourceError, match="annotations is true but .*annotations does not exist"):
        collect_split(dataset, "test", root=Path("."))


@pytest.mark.parametrize(
    ("question", "bboxes", "named"),
    [
        (
            "What is the difference in value between Lamb and Corn?",
            {"x_values": {"Lamb": 0, "Corn": 0, "Rye": 0}},
            ["Lamb", "Corn"],
        ),
        ("How many bars are shown in the chart?", {"x_values": {"Lamb": 0}}, []),  # names none
        ("is the value of lamb above 3?", {"x_values": {"Lamb": 0}}, ["Lamb"]),  # case does not matter
        ("Is East Asia more than Asia?", {"y_values": {"East Asia": 0, "Asia": 0}}, ["East Asia", "Asia"]),
        ("Is East Asia the largest?", {"y_values": {"Asia": 0, "East Asia": 0}}, ["East Asia"]),  # not Asia inside it
        ("What was the share in 2019?", {"x_values": {"2019": 0, "201": 0, "2019*": 0}}, ["2019"]),  # whole words
    ],
)
def test_the_labels_a_chartqa_question_names(question, bboxes, named):
    from chartrl.data.chartqa import labels_named

    assert labels_named(question, bboxes) == named


def test_chartqa_rows_record_the_labels_their_question_names(carved_rows):
    row = next(
        r
        for rows in carved_rows.values()
        for r in rows
        if r.extra["question"].startswith("What is the difference in value between Lamb and Corn")
    )
    assert row.extra["about"] == ["Lamb", "Corn"]


def test_annotation_files_the_reader_does_not_understand_fail_the_data_stage(tmp_path):
    """The release's annotation files were never in reach (tests/fixtures/chartqa_real/README.md): the reader reads
    the schema ReFocus' code reads. Files in another layout (here PlotQA's: the type as ``vbar_categorical``, the
    values under ``models``, no ``major_labels``) beside the real sample's question files and charts give charts
    without label boxes, which the coverage check turns into a failed data stage, naming the coverage, on the
    user's CPU before any GPU is booked (docs/cluster.md, section 3)."""
    root = copy_chartqa_layout(tmp_path / "cqa")
    (root / "test" / "annotations").mkdir()
    for png in (root / "test" / "png").iterdir():
        other_layout = {
            "type": "vbar_categorical",
            "models": [{"name": "Share", "x": ["2019", "2020"], "y": [1.0, 2.0], "bboxes": []}],
            "general_figure_info": {"title": {"text": "A chart"}},
        }
        (root / "test" / "annotations" / f"{png.stem}.json").write_text(json.dumps(other_layout))
    dataset = dataset_from(
        {"source": "chartqa_original", "path": str(root), "splits": ["test"], "annotations": True}, name="cqa"
    )
    rows, rejects = collect_split(dataset, "test", root=Path("."))
    assert len(rows) == 124 and rejects == []  # every real question is read ...
    assert not any(has_boxes(row.bboxes) for row in rows)  # ... and no chart has label boxes
    out, rejected = tmp_path / "test.parquet", tmp_path / "test.rejects.json"
    with pytest.raises(DataSourceError, match=r"only 0\.0% of 124 questions have label boxes"):
        build_split(dataset, "test", Path("."), out, rejected, min_box_coverage=0.5)
