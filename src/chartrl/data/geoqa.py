"""GeoQA readers for the extra geometry suites, into the same contract (chart_type ``geometry``, no boxes).

- ``geoqa_r1v``: EasyR1's GEOQA_8K_R1V layout, one row per problem with ``images`` (a list with one image:
  bytes, an image struct ``{bytes, path}`` or a path), ``problem`` (with or without an ``<image>``
  placeholder) and ``answer``.
- ``geoqa_mc``: multiple-choice GeoQA, one row per problem with ``problem`` (or ``question``), ``choices``
  (a list of option texts), ``label`` (the index of the right option, or its letter) and ``image``. The problem
  is written with lettered options and the answer is the letter, the form the multiple-choice reward reads
  (the last ``\\boxed{A-D}``).

Files are parquet (``.parquet``) or JSON lines (``.jsonl``), one per split; image paths are relative to the file.
Or, instead of ``files``, ``path`` names a hub dataset id (pinned by ``revision``) or a local folder laid out like
one, read by ``datasets.load_dataset`` (the same call either way, as ``chartqa_hf`` reads), with ``splits``
mapping our split names to the source's.

``subsample: {<split>: {size, seed, take}}`` keeps a fixed sample of a split: the split shuffled as Hugging Face
``datasets`` shuffles with ``seed`` (``numpy.random.default_rng(seed).permutation(n)``), then its first ``size`` rows
(``take: first``, ``Dataset.shuffle(seed=seed).select(range(size))``) or its last (``take: last``,
``.select(range(n - size, n))``), in that order. The multiple-choice recipe's test subset is the last 100 of GeoQA's
759 test questions shuffled with seed 42.
"""

from __future__ import annotations

import json
import logging
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from chartrl.config import DatasetConfig
from chartrl.data.contract import IMAGE_PLACEHOLDER, Rejected, Row, RowRejected, empty_bboxes, with_one_placeholder
from chartrl.data.errors import DataSourceError
from chartrl.data.hub import load_hub_split
from chartrl.data.images import image_source_bytes, intake
from chartrl.data.sources import absolute, dataset_source
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
        problem=with_one_placeholder(problem, "problem"),
        answer=answer,
        data_source=data_source,
        chart_type="geometry",
        bboxes=empty_bboxes(),
        split=split,
        extra={"image_size": [width, height], "subset": "human", **extra},
    )


SUBSAMPLE_ENDS = ("first", "last")


def subsample_indices(n: int, size: int, seed: int, take: str = "first") -> list[int]:
    """The rows of a split of ``n`` rows that ``Dataset.shuffle(seed=seed)`` puts first (``take: first``,
    ``.select(range(size))``) or last (``take: last``, ``.select(range(n - size, n))``), in its order (``datasets``
    permutes with ``numpy.random.default_rng(seed).permutation(n)``; tests/test_geoqa_recipes.py checks the two
    agree)."""
    import numpy as np

    if take not in SUBSAMPLE_ENDS:
        raise ValueError(f"subsample take {take!r}: choose one of {', '.join(SUBSAMPLE_ENDS)}")
    order = np.random.default_rng(seed).permutation(n)
    return [int(i) for i in (order[:size] if take == "first" else order[n - size :])]


def _hub_records(dataset: DatasetConfig, split: str, root: Path) -> tuple[list[dict[str, Any]], Path]:
    """Records of one split of a hub dataset id (at ``revision``) or a local folder laid out like one."""
    import datasets

    options = dataset.options
    ds = load_hub_split(options["path"], options["splits"][split], options.get("revision"), root)
    if "images" in ds.column_names:  # the R1V layout: a list of images per row, kept as raw bytes
        ds = ds.cast_column("images", datasets.List(datasets.Image(decode=False)))
    local = Path(root) / options["path"]
    return ds.to_list(), local if local.is_dir() else Path(root)


def _iter_records(dataset: DatasetConfig, split: str, root: Path) -> Iterator[tuple[str, dict[str, Any], Path]]:
    if "files" in dataset.options:
        path = Path(root) / dataset.options["files"][split]
        records, base = read_records(path), path.parent
    else:
        records, base = _hub_records(dataset, split, root)
    records = [{**r, "id": r.get("id") or f"{split}-{k:06d}"} for k, r in enumerate(records)]
    sample = (dataset.options.get("subsample") or {}).get(split)
    if sample is not None:
        if sample["size"] > len(records):
            raise DataSourceError(
                f"datasets.{dataset.name}.subsample.{split}.size {sample['size']} exceeds the split's "
                f"{len(records)} rows; lower it"
            )
        take = sample.get("take", "first")
        records = [records[i] for i in subsample_indices(len(records), sample["size"], sample["seed"], take)]
    progress = Progress(f"{dataset.name}/{split}", len(records), log, unit="rows")
    for record in records:
        progress.advance()
        yield str(record["id"]), record, base


def _split_file(dataset: DatasetConfig, split: str, root: Path) -> list[Path]:
    """The local files one split reads: its file, or the parquet files of a local folder (none for a hub id)."""
    if "files" in dataset.options:
        return [root / dataset.options["files"][split]]
    local = root / dataset.options["path"]
    return sorted(local.rglob("*.parquet")) if local.is_dir() else []


def _one_split(options: dict[str, Any], split: str) -> dict[str, Any]:
    """The options one split depends on: its file or source split, and its subsample."""
    return {
        **options,
        **{
            key: {s: v for s, v in options[key].items() if s == split}
            for key in ("files", "splits", "subsample")
            if isinstance(options.get(key), dict)
        },
    }


def _geoqa_paths(options: dict[str, Any], root: Path) -> dict[str, Any]:
    """Per-split files made absolute; a local folder ``path`` made absolute, a hub id left as it is."""
    if "files" in options:
        return {**options, "files": {s: absolute(p, root) for s, p in options["files"].items()}}
    return {**options, "path": absolute(options["path"], root)} if (root / options["path"]).exists() else options


GEOQA_SOURCE = {"input_files": _split_file, "resolve_paths": _geoqa_paths}


@dataset_source("geoqa_r1v", _one_split, **GEOQA_SOURCE)
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


@dataset_source("geoqa_mc", _one_split, **GEOQA_SOURCE)
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
