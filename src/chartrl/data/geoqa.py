"""GeoQA readers for the extra geometry suites, into the same contract (chart_type ``geometry``, no boxes).

- ``geoqa_r1v``: EasyR1's GEOQA_8K_R1V layout, one row per problem with ``images`` (a list with one image:
  bytes, an image struct ``{bytes, path}`` or a path), ``problem`` (with or without an ``<image>``
  placeholder) and ``answer``.
- ``geoqa_mc``: multiple-choice GeoQA, one row per problem with ``problem`` (or ``question``), ``choices``
  (a list of option texts), ``label`` (the index of the right option, or its letter) and ``image``. The problem
  is written with lettered options and the answer is the letter, the form the multiple-choice reward reads
  (the last ``\\boxed{A-D}``).

Files are parquet (``.parquet``) or JSON lines (``.jsonl``), one per split; image paths are relative to the file.
"""

from __future__ import annotations

import json
import logging
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from chartrl.config import DatasetConfig
from chartrl.data.contract import IMAGE_PLACEHOLDER, Rejected, Row, RowRejected, empty_bboxes
from chartrl.data.errors import DataSourceError
from chartrl.data.images import image_source_bytes, intake
from chartrl.data.sources import dataset_source, only_split
from chartrl.progress import Progress

log = logging.getLogger(__name__)


def read_records(path: Path) -> list[dict[str, Any]]:
    """Rows of a parquet or JSONL file as dicts; a bad file stops the job naming it."""
    if not path.is_file():
        raise DataSourceError(f"GeoQA file {path} does not exist; fix datasets.<name>.files")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    if path.suffix in (".jsonl", ".json"):
        records = []
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise DataSourceError(f"{path}:{n} is not a JSON object: {err}") from err
        return records
    raise DataSourceError(f"{path}: unsupported file type {path.suffix!r}; use .parquet or .jsonl")


def _with_placeholder(problem: str) -> str:
    problem = problem.strip()
    count = problem.count(IMAGE_PLACEHOLDER)
    if count == 0:
        return f"{IMAGE_PLACEHOLDER}\n{problem}"
    if count > 1:
        raise RowRejected(f"problem holds {count} {IMAGE_PLACEHOLDER} placeholders; the contract allows one")
    return problem


def _geometry_row(
    dataset: DatasetConfig,
    split: str,
    row_id: str,
    image: Any,
    base: Path,
    problem: str,
    answer: str,
    data_source: str,
    extra: dict[str, Any],
) -> Row:
    png, width, height = intake(image_source_bytes(image, base), dataset.max_image_pixels)
    return Row(
        id=row_id,
        images=[png],
        problem=_with_placeholder(problem),
        answer=answer,
        data_source=data_source,
        chart_type="geometry",
        bboxes=empty_bboxes(),
        split=split,
        extra={"image_size": [width, height], "subset": "human", **extra},
    )


def _iter_records(dataset: DatasetConfig, split: str, root: Path) -> Iterator[tuple[str, dict[str, Any], Path]]:
    path = Path(root) / dataset.options["files"][split]
    records = read_records(path)
    progress = Progress(f"{dataset.name}/{split}", len(records), log, unit="rows")
    for k, record in enumerate(records):
        progress.advance()
        row_id = str(record.get("id") or f"{split}-{k:06d}")
        yield row_id, record, path.parent


def _split_file(dataset: DatasetConfig, split: str, root: Path) -> list[Path]:
    return [root / dataset.options["files"][split]]


@dataset_source("geoqa_r1v", only_split("files"), input_files=_split_file)
def read_geoqa_r1v(dataset: DatasetConfig, split: str, *, root: Path, **_: Any) -> Iterator[Row | Rejected]:
    for row_id, record, base in _iter_records(dataset, split, root):
        try:
            missing = [f for f in ("images", "problem", "answer") if record.get(f) in (None, "", [])]
            if missing:
                raise RowRejected(f"missing field(s) {', '.join(missing)}")
            images = record["images"]
            if not isinstance(images, list):
                images = [images]
            if len(images) != 1:
                raise RowRejected(f"{len(images)} images; the contract holds one image per row")
            answer = str(record["answer"]).strip()
            if not answer:
                raise RowRejected("empty answer")
            yield _geometry_row(
                dataset,
                split,
                row_id,
                images[0],
                base,
                str(record["problem"]),
                answer,
                "geoqa_r1v",
                {"question": str(record["problem"]).replace(IMAGE_PLACEHOLDER, "").strip()},
            )
        except RowRejected as err:
            yield Rejected(row_id, str(err))


def _choice_index(label: Any, n_choices: int) -> int:
    if isinstance(label, str) and len(label.strip()) == 1 and label.strip().upper() in string.ascii_uppercase:
        index = string.ascii_uppercase.index(label.strip().upper())
    elif isinstance(label, int) or (isinstance(label, str) and label.strip().isdigit()):
        index = int(label)
    else:
        raise RowRejected(f"label {label!r} is neither an option index nor a letter")
    if not 0 <= index < n_choices:
        raise RowRejected(f"label {label!r} points outside the {n_choices} choices")
    return index


@dataset_source("geoqa_mc", only_split("files"), input_files=_split_file)
def read_geoqa_mc(dataset: DatasetConfig, split: str, *, root: Path, **_: Any) -> Iterator[Row | Rejected]:
    for row_id, record, base in _iter_records(dataset, split, root):
        try:
            question = record.get("problem") or record.get("question")
            missing = [
                f
                for f, v in (("problem", question), ("choices", record.get("choices")), ("image", record.get("image")))
                if not v
            ]
            if record.get("label") is None:
                missing.append("label")
            if missing:
                raise RowRejected(f"missing field(s) {', '.join(missing)}")
            choices = [str(c) for c in record["choices"]]
            if not 2 <= len(choices) <= 26:
                raise RowRejected(f"{len(choices)} choices; need 2 to 26")
            letter = string.ascii_uppercase[_choice_index(record["label"], len(choices))]
            options = "\n".join(f"{string.ascii_uppercase[i]}. {c}" for i, c in enumerate(choices))
            problem = f"{str(question).strip()}\nChoices:\n{options}"
            yield _geometry_row(
                dataset,
                split,
                row_id,
                record["image"],
                base,
                problem,
                letter,
                "geoqa_mc",
                {"question": str(question).replace(IMAGE_PLACEHOLDER, "").strip(), "choices": choices},
            )
        except RowRejected as err:
            yield Rejected(row_id, str(err))
