"""Bad input: every bad row is rejected with its id and reason, listed in the card, and the split fails (writing
nothing) when rejects exceed max_reject_fraction."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from PIL import Image

from chartrl.data.contract import read_split
from chartrl.data.errors import TooManyRejects
from chartrl.data.stage import build_card, build_split, card_metrics, collect_split, draw_sample_sheet

from conftest import CHARTQA_REAL, dataset_from

GOOD_CHART = "two_col_258.png"


def _layout(tmp_path: Path) -> Path:
    """A ChartQA original layout with one good chart and one bad thing per row."""
    root = tmp_path / "cqa"
    png = root / "test" / "png"
    png.mkdir(parents=True)
    shutil.copy(CHARTQA_REAL / "test/png" / GOOD_CHART, png / GOOD_CHART)
    (png / "garbage.png").write_bytes(b"\x89PNG\r\n\x1a\nthis is not a png")
    (png / "truncated.png").write_bytes((CHARTQA_REAL / "test/png" / GOOD_CHART).read_bytes()[:300])
    buffer = io.BytesIO()
    Image.new("L", (4000, 3000), 255).save(buffer, format="PNG")  # 12 Mpx, over the limit set below
    (png / "huge.png").write_bytes(buffer.getvalue())
    human = [
        {"imgname": GOOD_CHART, "query": "What is the value in 2019?", "label": "3.5"},  # good
        {"imgname": GOOD_CHART, "query": "How many bars?", "label": "10"},  # good
        {"imgname": "garbage.png", "query": "q", "label": "1"},  # unreadable image
        {"imgname": "truncated.png", "query": "q", "label": "1"},  # truncated image
        {"imgname": "huge.png", "query": "q", "label": "1"},  # oversized image
        {"imgname": "missing.png", "query": "q", "label": "1"},  # no such file
        {"imgname": GOOD_CHART, "query": "q"},  # missing field
        {"imgname": GOOD_CHART, "query": "Empty answer?", "label": "  "},  # empty answer
        {"imgname": GOOD_CHART, "query": "", "label": "4"},  # empty question
        "not an object",  # malformed record
    ]
    (root / "test/test_human.json").write_text(json.dumps(human))
    (root / "test/test_augmented.json").write_text(
        json.dumps([{"imgname": GOOD_CHART, "query": "Max?", "label": "2019"}])
    )
    return root


def _dataset(root: Path, fraction: float):
    return dataset_from(
        {
            "source": "chartqa_original",
            "path": str(root),
            "splits": ["test"],
            "max_reject_fraction": fraction,
            "max_image_pixels": 5_000_000,
        },
        name="bad",
    )


EXPECTED_REJECTS = {
    # id: start of the reason
    "garbage-h0": "unreadable image",
    "truncated-h0": "unreadable image",
    "huge-h0": "oversized image 4000x3000",
    "missing-h0": "image file not found",
    "test_human.json[6]": "missing field(s) label",
    f"{Path(GOOD_CHART).stem}-h2": "empty answer",
    f"{Path(GOOD_CHART).stem}-h3": "empty question",
    "test_human.json[9]": "record is a string",
}


def test_each_bad_row_is_rejected_with_its_reason(tmp_path):
    rows, rejects = collect_split(_dataset(_layout(tmp_path), 1.0), "test", root=Path("."))
    assert [r.id for r in rows] == [
        f"{Path(GOOD_CHART).stem}-h0",
        f"{Path(GOOD_CHART).stem}-h1",
        f"{Path(GOOD_CHART).stem}-a0",
    ]
    got = {r.id: r.reason for r in rejects}
    assert set(got) == set(EXPECTED_REJECTS)
    for row_id, reason in EXPECTED_REJECTS.items():
        assert got[row_id].startswith(reason), (row_id, got[row_id])


def test_too_many_rejects_fail_the_split_and_write_nothing(tmp_path):
    out, rejects_out = tmp_path / "out/test.parquet", tmp_path / "out/test.rejects.json"
    with pytest.raises(TooManyRejects) as err:
        build_split(_dataset(_layout(tmp_path), 0.01), "test", Path("."), out, rejects_out)
    message = str(err.value)
    assert "8 of 11 rows rejected" in message and "max_reject_fraction" in message and "datasets.bad" in message
    for row_id in EXPECTED_REJECTS:
        assert row_id in message
    assert not out.exists() and not rejects_out.exists()
    leftovers = list((tmp_path / "out").iterdir()) if (tmp_path / "out").exists() else []
    assert leftovers == []  # no temporary files either


def test_rejects_within_the_limit_are_listed_in_the_card(tmp_path):
    dataset = _dataset(_layout(tmp_path), 0.9)
    out, rejects_out = tmp_path / "out/test.parquet", tmp_path / "out/test.rejects.json"
    build_split(dataset, "test", Path("."), out, rejects_out)
    assert len(read_split(out)) == 3
    card, rows = build_card(dataset, {"test": out}, {"test": rejects_out})
    assert card["rejected"]["test"]["count"] == 8
    assert {r["id"] for r in card["rejected"]["test"]["rows"]} == set(EXPECTED_REJECTS)
    assert card["rejected"]["test"]["by_reason"]["unreadable image"] == 2
    assert card["splits"]["test"]["rows"] == 3 and card["splits"]["test"]["charts"] == 1
    assert card_metrics(card)["test/rejected"] == 8
    sheet = draw_sample_sheet(rows, 4, tmp_path / "samples.png")
    assert Image.open(sheet).size[0] > 0


def test_duplicate_ids_keep_the_first_row(tmp_path):
    buffer = io.BytesIO()
    Image.new("RGB", (32, 32), "white").save(buffer, format="PNG")
    (tmp_path / "1.png").write_bytes(buffer.getvalue())
    records = [
        {"id": "same", "problem": "first", "choices": ["a", "b"], "label": 0, "image": "1.png"},
        {"id": "same", "problem": "second", "choices": ["a", "b"], "label": 1, "image": "1.png"},
    ]
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    dataset = dataset_from({"source": "geoqa_mc", "files": {"test": str(tmp_path / "t.jsonl")}}, name="dup")
    rows, rejects = collect_split(dataset, "test", root=Path("."))
    assert [r.answer for r in rows] == ["A"]
    assert [(r.id, r.reason) for r in rejects] == [("same", "duplicate id (first seen at row 0)")]
