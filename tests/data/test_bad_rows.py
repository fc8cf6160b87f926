"""A ChartQA folder of bad rows goes through the data stage with every source record accounted for (kept, or
rejected with a readable reason and its place in the source), and two identical runs write the same card."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from PIL import Image

from chartrl.data.contract import read_split
from chartrl.data.errors import DataSourceError
from chartrl.data.stage import build_card, build_split
from chartrl.files import write_json

from conftest import CHARTQA_REAL, dataset_from

GOOD = "two_col_258.png"
STEM = Path(GOOD).stem

HUMAN = [
    {"imgname": GOOD, "query": "What is the value in 2019?", "label": "3.5"},  # 0 kept
    {"imgname": GOOD, "query": "How many bars?", "label": 10},  # 1 kept: a number label, as its text
    {"imgname": "garbage.png", "query": "q", "label": "1"},  # 2 not an image (PIL's message names a BytesIO)
    {"imgname": "truncated.png", "query": "q", "label": "1"},  # 3 truncated image
    {"imgname": "huge.png", "query": "q", "label": "1"},  # 4 over max_image_pixels
    {"imgname": "missing.png", "query": "q", "label": "1"},  # 5 no such file
    {"imgname": GOOD, "query": "q"},  # 6 no label
    {"imgname": GOOD, "query": "Empty answer?", "label": "  "},  # 7 blank answer
    {"imgname": GOOD, "query": "", "label": "4"},  # 8 blank question
    "not an object",  # 9
    {"imgname": GOOD, "query": "What is \ud800?", "label": "1"},  # 10 lone surrogate in the question
    {"imgname": GOOD, "query": "Which half?", "label": "\udfff"},  # 11 lone surrogate in the answer
    {"imgname": GOOD, "query": "What is the value in 2019?", "label": "3.5"},  # 12 duplicate of 0
    {"imgname": GOOD, "query": "Which years?", "label": ["2019", "2020"]},  # 13 kept as "[2019, 2020]" (id h7)
    {"imgname": GOOD, "query": "Which one?", "label": ["7"]},  # 14 kept as "7"
    {"imgname": GOOD, "query": "Which pair?", "label": ["a, b", "c"]},  # 15 a list item holding a separator
    {"imgname": GOOD, "query": "Which map?", "label": {"a": 1}},  # 16 an object label
    {"imgname": GOOD, "query": "Is it?", "label": True},  # 17 a boolean label
    {"imgname": GOOD, "query": 5, "label": "5"},  # 18 a query that is not text
    {"imgname": "../" + GOOD, "query": "q", "label": "1"},  # 19 a path, not a file name
    {"imgname": "other.png", "query": "Other?", "label": "1"},  # 20 kept as other.png-h0
    {"imgname": "other.jpg", "query": "Other?", "label": "1"},  # 21 same stem, no such file: other.jpg-h0
    {"imgname": 42, "query": "q", "label": "1"},  # 22 an image name that is not text
    {"imgname": GOOD, "query": " ", "label": "4"},  # 23 blank question again: its own reason, not "duplicate of 8"
    {"imgname": GOOD, "query": "Empty answer?", "label": ""},  # 24 blank answer again: not "duplicate of 7"
]
AUGMENTED = [
    {"imgname": GOOD, "query": "Max?", "label": "2019"},  # 0 kept
    {"imgname": GOOD, "query": "What is the value in 2019?", "label": "3.5"},  # 1 duplicate of human 0
]
KEPT = {
    f"{STEM}-h0": "3.5",
    f"{STEM}-h1": "10",
    f"{STEM}-h7": "[2019, 2020]",
    f"{STEM}-h8": "7",
    "other.png-h0": "1",
    f"{STEM}-a0": "2019",
}
REJECTED = {
    # source position: start of the reason
    "test_human.json[2]": "unreadable image: UnidentifiedImageError: cannot identify image file <_io.BytesIO>",
    "test_human.json[3]": "unreadable image",
    "test_human.json[4]": "oversized image 4000x3000",
    "test_human.json[5]": "image file not found",
    "test_human.json[6]": "missing field(s) label",
    "test_human.json[7]": "empty answer",
    "test_human.json[8]": "empty question",
    "test_human.json[9]": "record is a string, not an object",
    "test_human.json[10]": "text not storable as UTF-8: problem holds the lone surrogate \\ud800",
    "test_human.json[11]": "text not storable as UTF-8: answer holds the lone surrogate \\udfff",
    "test_human.json[12]": f"duplicate record: the same image, question and answer as {STEM}-h0",
    "test_human.json[15]": "label list: item 'a, b' is empty or holds one of",
    "test_human.json[16]": "label is an object, not text or a number",
    "test_human.json[17]": "label is a boolean",
    "test_human.json[18]": "query is a number, not text",
    "test_human.json[19]": "imgname '../two_col_258.png' is not a plain file name",
    "test_human.json[21]": "image file not found",
    "test_human.json[22]": "imgname is a number, not a file name",
    "test_human.json[23]": "empty question",
    "test_human.json[24]": "empty answer",
    "test_augmented.json[1]": f"duplicate record: the same image, question and answer as {STEM}-h0",
}


def bad_rows_folder(root: Path) -> Path:
    png = root / "test" / "png"
    png.mkdir(parents=True)
    shutil.copy(CHARTQA_REAL / "test/png" / GOOD, png / GOOD)
    shutil.copy(CHARTQA_REAL / "test/png" / GOOD, png / "other.png")
    (png / "garbage.png").write_bytes(b"\x89PNG\r\n\x1a\nthis is not a png")
    (png / "truncated.png").write_bytes((CHARTQA_REAL / "test/png" / GOOD).read_bytes()[:300])
    buffer = io.BytesIO()
    Image.new("L", (4000, 3000), 255).save(buffer, format="PNG")
    (png / "huge.png").write_bytes(buffer.getvalue())
    # json.dumps writes the lone surrogates as the escapes "\ud800" and "\udfff", as a broken export would
    (root / "test/test_human.json").write_text(json.dumps(HUMAN), encoding="utf-8")
    (root / "test/test_augmented.json").write_text(json.dumps(AUGMENTED), encoding="utf-8")
    return root


def dataset(root: Path):
    section = {
        "source": "chartqa_original",
        "path": str(root),
        "splits": ["test"],
        "max_reject_fraction": 1.0,
        "max_image_pixels": 5_000_000,
    }
    return dataset_from(section, name="bad_rows")


def run_data_stage(data: Path, out: Path) -> bytes:
    spec = dataset(data)
    parquet, rejects = out / "test.parquet", out / "test.rejects.json"
    build_split(spec, "test", Path("."), parquet, rejects)
    card, _ = build_card(spec, {"test": parquet}, {"test": rejects})
    write_json(out / "card.json", card)
    return (out / "card.json").read_bytes()


@pytest.fixture(scope="module")
def stage_twice(tmp_path_factory):
    base = tmp_path_factory.mktemp("bad_rows")
    data = bad_rows_folder(base / "cqa")
    first, second = run_data_stage(data, base / "run1"), run_data_stage(data, base / "run2")
    return first, second, read_split(base / "run1" / "test.parquet")


def test_every_source_record_is_kept_or_rejected_once(stage_twice):
    first, _, rows = stage_twice
    card = json.loads(first)
    assert {row.id: row.answer for row in rows} == KEPT
    rejected = card["rejected"]["test"]["rows"]
    named = [r["source"] for r in rejected] + [row.extra["source_row"] for row in rows]
    every_record = [f"test_human.json[{k}]" for k in range(len(HUMAN))]
    every_record += [f"test_augmented.json[{k}]" for k in range(len(AUGMENTED))]
    assert sorted(named) == sorted(every_record)  # each record named exactly once
    assert card["rejected"]["test"]["count"] == len(REJECTED) and card["splits"]["test"]["rows"] == len(KEPT)
    got = {r["source"]: r["reason"] for r in rejected}
    for source, reason in REJECTED.items():
        assert got[source].startswith(reason), (source, got[source])


def test_ids_never_collide_between_kept_and_rejected_rows(stage_twice):
    first, _, rows = stage_twice
    kept = {row.id for row in rows}
    rejected = [r["id"] for r in json.loads(first)["rejected"]["test"]["rows"]]
    assert not kept & set(rejected)
    assert "other.jpg-h0" in rejected  # the stem other is shared with other.png, so the ids use the whole name


def test_the_card_is_readable_and_the_same_twice(stage_twice):
    first, second, _ = stage_twice
    assert first == second
    text = first.decode("utf-8")
    assert " at 0x" not in text and "object at" not in text  # no memory addresses
    json.loads(text)


def test_a_latin1_json_file_stops_the_split_naming_the_file_and_the_fix(tmp_path):
    data = bad_rows_folder(tmp_path / "cqa")
    latin1 = data / "test" / "test_augmented.json"
    latin1.write_bytes(
        json.dumps([{"imgname": GOOD, "query": "Année?", "label": "2019"}], ensure_ascii=False).encode("latin-1")
    )
    with pytest.raises(DataSourceError) as err:
        build_split(dataset(data), "test", Path("."), tmp_path / "out/test.parquet", tmp_path / "out/r.json")
    message = str(err.value)
    assert str(latin1) in message and "is not UTF-8" in message and "iconv -f latin1 -t utf-8" in message
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
