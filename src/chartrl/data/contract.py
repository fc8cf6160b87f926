"""The parquet contract every dataset is written in (``results/data/{dataset}/{split}.parquet``).

One row per question::

    id           str          unique within the dataset
    images       list[bytes]  PNG bytes (RGB); one image per row in every current source
    problem      str          the question with exactly one ``<image>`` placeholder
    answer       str          the ground truth, non-empty
    data_source  str          e.g. ``synthchart``, ``chartqa_human``, ``chartqa_augmented``, ``geoqa_r1v``
    chart_type   str          one of CHART_TYPES (ChartQA's own names where they exist)
    bboxes       str (JSON)   {"x_values": {label: [x1, y1, x2, y2]}, "y_values": {...}}, normalised to [0, 1]
    split        str          train | val | test
    extra        str (JSON)   source-specific metadata (question, subset human/augmented/synthetic, ...)

A row that breaks the contract is not written: it becomes a :class:`Rejected` entry (id, where it sits in the
source, and reason) that the card lists. Nothing is dropped silently. Every text field must be storable as UTF-8:
a row holding a lone surrogate (the JSON escape of half a UTF-16 pair, ``"\\ud800"``) is rejected, since
parquet, tokenizers and the card's JSON all refuse it. Reasons are stable between runs: they never carry an
object's memory address.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from chartrl.files import storable, write_atomically

IMAGE_PLACEHOLDER = "<image>"
CONTRACT_VERSION = "1"
CHART_TYPES = ("v_bar", "h_bar", "line", "pie", "geometry", "unknown")
BAR_CHART_TYPES = ("v_bar", "h_bar")
BOX_AXES = ("x_values", "y_values")
SUBSETS = ("human", "augmented", "synthetic")

SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("images", pa.list_(pa.binary()), nullable=False),
        pa.field("problem", pa.string(), nullable=False),
        pa.field("answer", pa.string(), nullable=False),
        pa.field("data_source", pa.string(), nullable=False),
        pa.field("chart_type", pa.string(), nullable=False),
        pa.field("bboxes", pa.string(), nullable=False),
        pa.field("split", pa.string(), nullable=False),
        pa.field("extra", pa.string(), nullable=False),
    ],
    metadata={"chartrl.contract": CONTRACT_VERSION},
)
COLUMNS = tuple(SCHEMA.names)


class RowRejected(ValueError):
    """A source row cannot become a contract row; the message is the reason shown in the card."""


@dataclass
class Row:
    id: str
    images: list[bytes]
    problem: str
    answer: str
    data_source: str
    chart_type: str
    bboxes: dict[str, dict[str, list[float]]]
    split: str
    extra: dict[str, Any] = field(default_factory=dict)

    def to_record(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "images": self.images,
            "problem": self.problem,
            "answer": self.answer,
            "data_source": self.data_source,
            "chart_type": self.chart_type,
            "bboxes": json.dumps(self.bboxes, ensure_ascii=False),
            "split": self.split,
            "extra": json.dumps(self.extra, ensure_ascii=False, sort_keys=True),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Row:
        return cls(
            id=record["id"],
            images=list(record["images"]),
            problem=record["problem"],
            answer=record["answer"],
            data_source=record["data_source"],
            chart_type=record["chart_type"],
            bboxes=json.loads(record["bboxes"]),
            split=record["split"],
            extra=json.loads(record["extra"]),
        )


_MEMORY_ADDRESS = re.compile(r" (?:object )?at 0x[0-9a-fA-F]+")


def readable_reason(text: str) -> str:
    """``text`` as a card shows it: lone surrogates escaped, memory addresses (``<_io.BytesIO object at 0x7f..>``,
    in PIL's messages) taken out, so identical runs write identical cards."""
    return _MEMORY_ADDRESS.sub("", storable(str(text)))


@dataclass(frozen=True)
class Rejected:
    id: str
    """The row's id, or where it sits in the source (``test_human.json[12]``) when it has no usable id."""
    reason: str
    source: str = ""
    """Where the row sits in the source (``test_human.json[12]``), when the reader knows: unique per row even when
    two rows carry one id."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", readable_reason(self.id))
        object.__setattr__(self, "reason", readable_reason(self.reason))
        object.__setattr__(self, "source", readable_reason(self.source))

    def to_dict(self) -> dict[str, str]:
        """The reject as the rejects file and the card list it."""
        return {"id": self.id, **({"source": self.source} if self.source else {}), "reason": self.reason}


def with_one_placeholder(text: str, field: str) -> str:
    """``text`` (a source's question, stripped) with exactly one image placeholder: put in front when the source
    has none; more than one rejects the row, naming ``field`` (where the text came from)."""
    text = text.strip()
    count = text.count(IMAGE_PLACEHOLDER)
    if count == 0:
        return f"{IMAGE_PLACEHOLDER}\n{text}"
    if count > 1:
        raise RowRejected(f"{field} holds {count} {IMAGE_PLACEHOLDER} placeholders; the contract allows one")
    return text


def empty_bboxes() -> dict[str, dict[str, list[float]]]:
    return {axis: {} for axis in BOX_AXES}


def has_boxes(bboxes: Mapping[str, Mapping[str, Any]]) -> bool:
    return any(bboxes.get(axis) for axis in BOX_AXES)


def normalise_box(box: Sequence[float], width: int, height: int) -> list[float]:
    """Pixel box [x1, y1, x2, y2] -> normalised to [0, 1] of the image, clipped to the image.

    Clipping is deliberate: published boxes can overshoot the image by a few pixels (ReFocus boxes on one OECD
    chart of the ChartQA sample end 2 px outside); the part outside the image holds nothing a tool could edit.
    """
    x1, y1, x2, y2 = (float(v) for v in box)
    return [_unit(x1 / width), _unit(y1 / height), _unit(x2 / width), _unit(y2 / height)]


def _unit(value: float) -> float:
    return round(min(max(value, 0.0), 1.0), 6)


def check_box(box: Any) -> str | None:
    """None when ``box`` is a valid normalised box, else what is wrong with it."""
    if not isinstance(box, list | tuple) or len(box) != 4:
        return f"box {box!r} is not a list of four numbers"
    if not all(isinstance(v, int | float) and math.isfinite(v) for v in box):
        return f"box {box!r} holds a non-finite or non-numeric value"
    x1, y1, x2, y2 = box
    if not all(0.0 <= v <= 1.0 for v in box):
        return f"box {box!r} lies outside [0, 1]"
    if not (x1 < x2 and y1 < y2):
        return f"box {box!r} is empty or inverted (need x1 < x2 and y1 < y2)"
    return None


def unstorable_text(row: Row) -> str | None:
    """None when every text field of ``row`` encodes as UTF-8, else which field holds a lone surrogate, and where."""
    fields = {
        "id": row.id,
        "problem": row.problem,
        "answer": row.answer,
        "data_source": row.data_source,
        "bboxes": json.dumps(row.bboxes, ensure_ascii=False),
        "extra": json.dumps(row.extra, ensure_ascii=False, sort_keys=True),
    }
    for name, text in fields.items():
        if not isinstance(text, str):
            continue
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            escaped = text[err.start : err.end].encode("utf-8", "backslashreplace").decode()
            return (
                f"text not storable as UTF-8: {name} holds the lone surrogate {escaped} at character {err.start} "
                "(half of a UTF-16 pair); fix the source row"
            )
    return None


def check_row(row: Row) -> None:
    """Raise RowRejected when ``row`` breaks the contract."""
    if not row.id or not isinstance(row.id, str):
        raise RowRejected("empty id")
    problem = unstorable_text(row)
    if problem:
        raise RowRejected(problem)
    if not row.images:
        raise RowRejected("no image")
    if row.problem.count(IMAGE_PLACEHOLDER) != 1:
        raise RowRejected(
            f"problem must hold exactly one {IMAGE_PLACEHOLDER} placeholder, "
            f"found {row.problem.count(IMAGE_PLACEHOLDER)}"
        )
    if not row.problem.replace(IMAGE_PLACEHOLDER, "").strip():
        raise RowRejected("empty question")
    if not isinstance(row.answer, str) or not row.answer.strip():
        raise RowRejected("empty answer")
    if row.chart_type not in CHART_TYPES:
        raise RowRejected(f"unknown chart_type {row.chart_type!r}; known: {', '.join(CHART_TYPES)}")
    if row.split not in ("train", "val", "test"):
        raise RowRejected(f"unknown split {row.split!r}")
    if set(row.bboxes) != set(BOX_AXES):
        raise RowRejected(f"bboxes must have exactly the keys {', '.join(BOX_AXES)}")
    for axis in BOX_AXES:
        for label, box in row.bboxes[axis].items():
            if not isinstance(label, str) or not label.strip():
                raise RowRejected(f"bboxes.{axis} has an empty label")
            problem = check_box(box)
            if problem:
                raise RowRejected(f"bboxes.{axis}[{label!r}]: {problem}")


def write_split(rows: Iterable[Row], path: str | Path) -> Path:
    """Write contract rows to ``path`` atomically."""
    records = [row.to_record() for row in rows]
    table = pa.Table.from_pylist(records, schema=SCHEMA)
    return write_atomically(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def read_split(path: str | Path) -> list[Row]:
    """Read a split written by :func:`write_split`, checking it is one."""
    table = pq.read_table(path)
    if table.schema.names != list(COLUMNS):
        raise ValueError(
            f"{path}: columns {table.schema.names} do not match the data contract {list(COLUMNS)}; "
            "rebuild it with the data rule"
        )
    return [Row.from_record(record) for record in table.to_pylist()]
