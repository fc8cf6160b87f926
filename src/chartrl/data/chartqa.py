"""ChartQA readers: the original release layout and the Hugging Face parquet layout.

Original layout (vis-nlp/ChartQA, "ChartQA Dataset/")::

    {split}/{split}_human.json        [{"imgname", "query", "label"}, ...]   human-written questions
    {split}/{split}_augmented.json    same, machine-generated questions
    {split}/png/{imgname}
    {split}/annotations/{stem}.json   optional (the full release on Hugging Face): chart type, plot area, label boxes

Label bands for bar charts come, in this order, from:

1. the chart's annotation file. Its schema (as read by ReFocus, zeyofu/ReFocus_Code
   ``helper/get_coordinates_for_chart.py``): ``type`` (``v_bar``, ``h_bar``, ``line``, ``pie``, ...),
   ``general_figure_info.figure_info.bbox`` = the plot area ``{x, y, w, h}`` in pixels, and
   ``general_figure_info.{x_axis,y_axis}.major_labels`` = ``{values: [...], bboxes: [{x, y, w, h}, ...]}``.
   Each category label gets a band around its centre reaching half-way to its neighbours (the outer ones
   symmetric), spanning the plot area across and reaching to the label itself. ChartQA stores the categories of
   an ``h_bar`` chart under ``x_axis`` ("x and y are reversed", ReFocus); we take, for each bar type, the axis
   whose label boxes spread along the band direction, so either convention works.
2. a box file released by ReFocus for ChartQA (``chartqa_vcot/{split}.jsonl``: ``image``, ``source``
   (``chartqa_v_bar``/``chartqa_h_bar``), ``x_values``/``y_values`` and their pixel boxes ``{x1, y1, x2, y2}``,
   ``figure_bbox``), JSON or JSONL, matched by image file name.
3. neither: empty boxes and chart type ``unknown``, counted in the card.

Records are checked one by one, and each bad one is rejected with a reason and its place in the source file
(``test_human.json[12]``): a missing field, a query or image name that is not text, a record that repeats an
earlier one of the split (same image, question and answer: rejected as a duplicate, not kept under a new id; only
a row that passes the contract counts as the earlier one, so a copy of a rejected row gets its own reason).
Labels are kept in one declared form (:func:`answer_text`): text as written (trimmed); a number as its decimal
text; a list of values as ChartQA's multi-value form ``[v1, v2]`` (what relaxed accuracy reads as a list), a list
of one value as that value. Row ids are ``{image stem}-{h|a}{n}``; when two image names of the split share a stem
(``a.png`` and ``a.jpg``) the whole name stands in for the stem, so ids never collide. JSON files must be UTF-8
(RFC 8259); one in another encoding stops the split with a message naming the file and how to convert it.

Hugging Face layout (``HuggingFaceM4/ChartQA``): parquet files with ``image`` (an image struct),
``query``, ``label`` (a list with the answer) and ``human_or_machine`` (0 human, 1 machine), loaded with
``datasets.load_dataset`` from a hub id or from a local folder laid out like the hub repository
(``data/{split}-*.parquet``); both go through the same code.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from chartrl.config import DatasetConfig
from chartrl.data.bands import half_way_intervals
from chartrl.data.contract import (
    IMAGE_PLACEHOLDER,
    Rejected,
    Row,
    RowRejected,
    check_row,
    empty_bboxes,
    normalise_box,
)
from chartrl.data.errors import DataSourceError
from chartrl.data.hub import load_hub_split
from chartrl.data.images import image_source_bytes, intake
from chartrl.data.sources import absolute, dataset_source, only_split
from chartrl.progress import Progress

log = logging.getLogger(__name__)

SUBSET_FILES = (("human", "{split}_human.json"), ("augmented", "{split}_augmented.json"))
REQUIRED_FIELDS = ("imgname", "query", "label")


# --------------------------------------------------------------------------------------------------------------
# Bands from the original annotations
# --------------------------------------------------------------------------------------------------------------


def _axis_labels(info: Mapping[str, Any], axis: str) -> tuple[list[str], list[dict]]:
    major = (info.get(axis) or {}).get("major_labels") or {}
    values, boxes = major.get("values") or [], major.get("bboxes") or []
    if len(values) != len(boxes):
        raise RowRejected(f"annotation {axis}.major_labels has {len(values)} values but {len(boxes)} boxes")
    return [str(v) for v in values], list(boxes)


def _spread(boxes: Sequence[Mapping[str, float]], coord: str, size: str) -> float:
    centres = [b[coord] + b[size] / 2 for b in boxes]
    return max(centres) - min(centres) if centres else 0.0


def bands_from_annotation(
    annotation: Mapping[str, Any], width: int, height: int
) -> tuple[str, dict, list[float] | None]:
    """(chart_type, bboxes, plot_area) from one ChartQA annotation; bands only for v_bar and h_bar."""
    chart_type = annotation.get("type", "unknown")
    bboxes = empty_bboxes()
    info = annotation.get("general_figure_info") or {}
    figure = (info.get("figure_info") or {}).get("bbox")
    if not figure:
        return (chart_type if chart_type in ("v_bar", "h_bar", "line", "pie") else "unknown"), bboxes, None
    px1, py1 = figure["x"], figure["y"]
    px2, py2 = figure["x"] + figure["w"], figure["y"] + figure["h"]
    plot_area = normalise_box([px1, py1, px2, py2], width, height)
    if chart_type not in ("v_bar", "h_bar"):
        return (chart_type if chart_type in ("line", "pie") else "unknown"), bboxes, plot_area

    candidates = [_axis_labels(info, "x_axis"), _axis_labels(info, "y_axis")]
    candidates = [c for c in candidates if c[0]]
    if not candidates:
        return chart_type, bboxes, plot_area
    if chart_type == "v_bar":  # categories spread horizontally
        labels, boxes = max(candidates, key=lambda c: _spread(c[1], "x", "w"))
        centres = [b["x"] + b["w"] / 2 for b in boxes]
        top = py1
        bottom = max([py2] + [b["y"] + b["h"] for b in boxes])
        for label, (x1, x2) in zip(labels, half_way_intervals(centres, px1, px2), strict=True):
            if x1 < x2:  # a label centred outside the plot area owns nothing a tool could edit
                bboxes["x_values"].setdefault(label, normalise_box([x1, top, x2, bottom], width, height))
    else:  # h_bar: categories spread vertically
        labels, boxes = max(candidates, key=lambda c: _spread(c[1], "y", "h"))
        centres = [b["y"] + b["h"] / 2 for b in boxes]
        left = min([px1] + [b["x"] for b in boxes])
        right = px2
        for label, (y1, y2) in zip(labels, half_way_intervals(centres, py1, py2), strict=True):
            if y1 < y2:
                bboxes["y_values"].setdefault(label, normalise_box([left, y1, right, y2], width, height))
    return chart_type, bboxes, plot_area


# --------------------------------------------------------------------------------------------------------------
# Boxes released by ReFocus
# --------------------------------------------------------------------------------------------------------------


def read_utf8(path: Path, what: str) -> str:
    """The text of a JSON source file, which must be UTF-8 (a BOM is allowed); anything else is a
    DataSourceError naming the file and the fix."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DataSourceError(
            f"{what} {path} is not UTF-8 (byte 0x{data[err.start]:02x} at offset {err.start}); JSON files must be "
            f"UTF-8. If it was saved as Latin-1, convert it: iconv -f latin1 -t utf-8 '{path}' > fixed.json && "
            f"mv fixed.json '{path}'"
        ) from err


def _read_json_records(path: Path) -> list[dict[str, Any]]:
    text = read_utf8(path, "ReFocus box file")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = [json.loads(line) for line in text.splitlines() if line.strip()]
    if isinstance(data, dict):
        data = list(data.values())
    return data


def load_refocus_boxes(path: Path) -> dict[str, dict[str, Any]]:
    """Image file name -> the first ReFocus record for it (all records of one image carry the same boxes)."""
    if not path.is_file():
        raise DataSourceError(f"ReFocus box file {path} does not exist; fix the path under refocus_boxes")
    try:
        records = _read_json_records(path)
    except json.JSONDecodeError as err:
        raise DataSourceError(f"ReFocus box file {path} is neither JSON nor JSONL: {err}") from err
    by_image: dict[str, dict[str, Any]] = {}
    for record in records:
        by_image.setdefault(Path(record.get("image", "")).name, record)
    return by_image


def bands_from_refocus(record: Mapping[str, Any], width: int, height: int) -> tuple[str, dict, list[float] | None]:
    source = record.get("source", "")
    chart_type = source.removeprefix("chartqa_") if source.startswith("chartqa_") else "unknown"
    if chart_type not in ("v_bar", "h_bar"):
        chart_type = "unknown"
    bboxes = empty_bboxes()
    for axis in ("x_values", "y_values"):
        labels, boxes = record.get(axis) or [], record.get(f"{axis}_bbox") or []
        if len(labels) != len(boxes):
            raise RowRejected(f"ReFocus record has {len(labels)} {axis} but {len(boxes)} boxes")
        for label, box in zip(labels, boxes, strict=True):
            bboxes[axis].setdefault(
                str(label), normalise_box([box["x1"], box["y1"], box["x2"], box["y2"]], width, height)
            )
    figure = record.get("figure_bbox")
    plot_area = (
        normalise_box([figure["x1"], figure["y1"], figure["x2"], figure["y2"]], width, height) if figure else None
    )
    return chart_type, bboxes, plot_area


# --------------------------------------------------------------------------------------------------------------
# The original layout
# --------------------------------------------------------------------------------------------------------------


def _load_records(path: Path, key_hint: str) -> list[Any]:
    if not path.is_file():
        raise DataSourceError(f"ChartQA file {path} does not exist; check {key_hint} (the 'ChartQA Dataset' folder)")
    try:
        records = json.loads(read_utf8(path, "ChartQA file"))
    except json.JSONDecodeError as err:
        raise DataSourceError(f"ChartQA file {path} is not valid JSON: {err}") from err
    if not isinstance(records, list):
        raise DataSourceError(f"ChartQA file {path} must hold a list of records, not {type(records).__name__}")
    return records


class _ChartCache:
    """Decode each chart once per split (a chart has two or more questions) and look up its boxes."""

    def __init__(self, split_dir: Path, refocus: Mapping[str, Mapping[str, Any]], max_pixels: int):
        self.split_dir, self.refocus, self.max_pixels = split_dir, refocus, max_pixels
        self._charts: dict[str, tuple[bytes, str, dict, dict] | RowRejected] = {}

    def get(self, imgname: str) -> tuple[bytes, str, dict, dict]:
        if imgname not in self._charts:
            try:
                self._charts[imgname] = self._load(imgname)
            except RowRejected as err:
                self._charts[imgname] = err
        chart = self._charts[imgname]
        if isinstance(chart, RowRejected):
            raise chart
        return chart

    def _load(self, imgname: str) -> tuple[bytes, str, dict, dict]:
        if Path(imgname).name != imgname:
            raise RowRejected(f"imgname {imgname!r} is not a plain file name")
        png, width, height = intake(image_source_bytes(str(self.split_dir / "png" / imgname), None), self.max_pixels)
        annotation_path = self.split_dir / "annotations" / f"{Path(imgname).stem}.json"
        extra: dict[str, Any] = {"imgname": imgname, "image_size": [width, height]}
        if annotation_path.is_file():
            try:
                annotation = json.loads(annotation_path.read_bytes().decode("utf-8-sig"))
            except UnicodeDecodeError as err:
                raise RowRejected(f"annotation {annotation_path.name} is not UTF-8 (offset {err.start})") from err
            except json.JSONDecodeError as err:
                raise RowRejected(f"annotation {annotation_path.name} is not valid JSON: {err}") from err
            chart_type, bboxes, plot_area = bands_from_annotation(annotation, width, height)
            extra["boxes_from"] = "annotation"
        elif imgname in self.refocus:
            chart_type, bboxes, plot_area = bands_from_refocus(self.refocus[imgname], width, height)
            extra["boxes_from"] = "refocus"
        else:
            chart_type, bboxes, plot_area = "unknown", empty_bboxes(), None
            extra["boxes_from"] = None
        if plot_area:
            extra["plot_area"] = plot_area
        return png, chart_type, bboxes, extra


def source_split(options: Mapping[str, Any], split: str) -> str:
    """The folder of the release a split is read from: the split itself, or ``carve.from``."""
    carve = options.get("carve")
    return carve["from"] if carve else split


def carved_charts(imgnames: Sequence[str], carve: Mapping[str, Any], split: str) -> set[str]:
    """The charts (image names) ``carve`` gives to ``split``: every chart ordered by a hash of (seed, name), then
    cut by the shares in the order train, val, test, each cut rounded on the running total, so the splits
    partition the charts and every question of a chart stays in one split."""
    shares = carve["shares"]
    if split not in shares:
        raise DataSourceError(
            f"split {split} has no share in carve.shares ({', '.join(shares)}); add it, or drop it from splits"
        )
    seed = carve.get("seed", 0)
    order = sorted(set(imgnames), key=lambda name: hashlib.sha256(f"{seed}:{name}".encode()).hexdigest())
    total, running, start = sum(shares.values()), 0.0, 0
    for name in ("train", "val", "test"):
        if name not in shares:
            continue
        running += shares[name]
        end = round(len(order) * running / total)
        if name == split:
            return set(order[start:end])
        start = end
    return set()


def labels_named(question: str, bboxes: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The chart's labels (those with boxes) that the question names, as whole words, ignoring case, in the chart's
    order: what a call that keeps "the asked labels" keeps (synthetic questions record theirs; ChartQA's are found
    in the text). Longer labels are matched first and their words taken out, so "Asia" counts only where the
    question names it outside "East Asia"."""
    labels = [label for axis in ("x_values", "y_values") for label in bboxes.get(axis, {}) if label.strip()]
    text, named = question, set()
    for label in sorted(labels, key=len, reverse=True):
        pattern = re.compile(r"(?<!\w)" + re.escape(label.strip()) + r"(?!\w)", flags=re.IGNORECASE)
        if pattern.search(text):
            named.add(label)
            text = pattern.sub(" ", text)
    return [label for label in labels if label in named]


def _original_split_options(options: dict[str, Any], split: str) -> dict[str, Any]:
    narrowed = only_split("require_boxes")(only_split("splits")(options, split), split)
    return only_split("refocus_boxes")(narrowed, source_split(options, split))


def _original_inputs(dataset: DatasetConfig, split: str, root: Path) -> list[Path]:
    base = root / dataset.options["path"]
    folder = source_split(dataset.options, split)
    files = [base / folder / pattern.format(split=folder) for _, pattern in SUBSET_FILES]
    refocus = dataset.options["refocus_boxes"].get(folder)
    return files + ([base / refocus] if refocus else [])


def _original_box_axes(dataset: DatasetConfig, split: str) -> frozenset[str]:
    """Bar charts get boxes from the release's annotations (declared with ``annotations: true``) or a ReFocus box
    file for the split's folder: x values for vertical bars, y values for horizontal ones."""
    options = dataset.options
    declared = options["annotations"] or source_split(options, split) in options["refocus_boxes"]
    return frozenset(("x_values", "y_values")) if declared else frozenset()


def _original_paths(options: dict[str, Any], root: Path) -> dict[str, Any]:
    return {**options, "path": absolute(options["path"], root)}


@dataset_source(
    "chartqa_original",
    _original_split_options,
    input_files=_original_inputs,
    box_axes=_original_box_axes,
    resolve_paths=_original_paths,
)
def read_chartqa_original(dataset: DatasetConfig, split: str, *, root: Path, **_: Any) -> Iterator[Row | Rejected]:
    options = dataset.options
    base = Path(root) / options["path"]
    folder = source_split(options, split)
    split_dir = base / folder
    refocus_file = options["refocus_boxes"].get(folder)
    refocus = load_refocus_boxes(base / refocus_file) if refocus_file else {}
    if options.get("annotations") and not (split_dir / "annotations").is_dir():
        raise DataSourceError(
            f"datasets.{dataset.name}.annotations is true but {split_dir / 'annotations'} does not exist; unpack "
            "the ChartQA release with its annotations/ folders there, or set annotations: false (then only "
            "refocus_boxes give charts boxes)"
        )
    charts = _ChartCache(split_dir, refocus, dataset.max_image_pixels)
    key_hint = f"datasets.{dataset.name}.path = {options['path']!r}"
    subsets = [(subset, pattern.format(split=folder)) for subset, pattern in SUBSET_FILES]
    loaded = {name: _load_records(split_dir / name, key_hint) for _, name in subsets}
    keep = None
    if options.get("carve"):
        names = [
            str(r["imgname"]) for records in loaded.values() for r in records if isinstance(r, dict) and "imgname" in r
        ]
        keep = carved_charts(names, options["carve"], split)
    id_stems = _id_stems(name for records in loaded.values() for name in _imgnames(records))
    first_of: dict[tuple[str, str, str], tuple[str, str]] = {}  # (imgname, query, answer) -> (id, source)
    for subset, file_name in subsets:
        records = loaded[file_name]
        progress = Progress(f"{dataset.name}/{split} {subset}", len(records), log, unit="rows")
        per_image: dict[str, int] = {}
        for k, record in enumerate(records):
            progress.advance()
            where = f"{file_name}[{k}]"
            if not isinstance(record, dict):
                yield Rejected(where, f"record is {_json_kind(record)}, not an object", where)
                continue
            missing = [f for f in REQUIRED_FIELDS if f not in record or record[f] is None]
            if missing:
                yield Rejected(where, f"missing field(s) {', '.join(missing)}", where)
                continue
            imgname, query = record["imgname"], record["query"]
            if not isinstance(imgname, str) or not imgname:
                yield Rejected(where, f"imgname is {_json_kind(imgname)}, not a file name", where)
                continue
            if Path(imgname).name != imgname:  # no id: its stem could be a kept chart's
                yield Rejected(where, f"imgname {imgname!r} is not a plain file name", where)
                continue
            if keep is not None and imgname not in keep:
                continue  # carved into another split
            n = per_image.get(imgname, 0)
            per_image[imgname] = n + 1
            row_id = f"{id_stems[imgname]}-{subset[0]}{n}"
            if not isinstance(query, str):
                yield Rejected(row_id, f"query is {_json_kind(query)}, not text", where)
                continue
            try:
                answer = answer_text(record["label"])
                png, chart_type, bboxes, chart_extra = charts.get(imgname)
            except RowRejected as err:
                yield Rejected(row_id, str(err), where)
                continue
            row = Row(
                id=row_id,
                images=[png],
                problem=f"{IMAGE_PLACEHOLDER}\n{query}",
                answer=answer,
                data_source=f"chartqa_{subset}",
                chart_type=chart_type,
                bboxes=bboxes,
                split=split,
                extra={
                    "question": query,
                    "subset": subset,
                    "source_row": where,
                    "about": labels_named(query, bboxes),
                    **chart_extra,
                },
            )
            try:  # before the duplicate check: a copy of a rejected row is rejected for its own reason
                check_row(row)
            except RowRejected as err:
                yield Rejected(row_id, str(err), where)
                continue
            key = (imgname, query.strip(), answer)
            if key in first_of:
                first_id, first_where = first_of[key]
                yield Rejected(
                    row_id,
                    f"duplicate record: the same image, question and answer as {first_id} ({first_where})",
                    where,
                )
                continue
            first_of[key] = (row_id, where)
            yield row


def _imgnames(records: Sequence[Any]) -> Iterator[str]:
    """The plain image file names of ``records`` (the others are rejected)."""
    names = (r.get("imgname") for r in records if isinstance(r, dict))
    return (name for name in names if isinstance(name, str) and Path(name).name == name)


def _id_stems(imgnames: Iterable[str]) -> dict[str, str]:
    """Image name -> the stem its row ids start with: the file's stem, or the whole name when another image of
    the split has the same stem (``a.png``, ``a.jpg``), so the ids of different charts never collide."""
    names = set(imgnames)
    stems = Counter(Path(name).stem for name in names)
    return {name: Path(name).stem if stems[Path(name).stem] == 1 else name for name in names}


def _json_kind(value: Any) -> str:
    """What a JSON value is, in words, never its repr (a card must read the same on every run)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string" if value else "an empty string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


LIST_SEPARATORS = (",", ";", "[", "]")
"""Characters a value of a multi-value answer may not hold: ``[v1, v2]`` could not be read back."""


def _scalar_text(value: Any, what: str) -> str:
    if isinstance(value, bool):
        raise RowRejected(f"{what} is a boolean, not an answer; write it as text")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise RowRejected(f"{what} is not a finite number")
        return repr(value)
    if isinstance(value, str):
        return value.strip()
    raise RowRejected(f"{what} is {_json_kind(value)}, not text or a number")


def answer_text(label: Any) -> str:
    """A record's ``label`` in the declared answer form (module doc): text, a number's decimal text, or a list
    of values as ``[v1, v2]``; anything else raises RowRejected with the reason."""
    if not isinstance(label, list):
        return _scalar_text(label, "label")
    if not label:
        raise RowRejected("empty answer (label is an empty list)")
    values = [_scalar_text(value, f"label item {k}") for k, value in enumerate(label)]
    if len(values) == 1:
        return values[0]
    for value in values:
        if not value or any(mark in value for mark in LIST_SEPARATORS):
            raise RowRejected(
                f"label list: item {value!r} is empty or holds one of {' '.join(LIST_SEPARATORS)}; the list "
                "cannot be written as [v1, v2]"
            )
    return "[" + ", ".join(values) + "]"


# --------------------------------------------------------------------------------------------------------------
# The Hugging Face layout
# --------------------------------------------------------------------------------------------------------------


def _subset_of(value: Any) -> str | None:
    if value in (0, "0", "human"):
        return "human"
    if value in (1, "1", "machine", "augmented"):
        return "augmented"
    return None


def _hf_inputs(dataset: DatasetConfig, split: str, root: Path) -> list[Path]:
    local = root / dataset.options["path"]
    return sorted(p for p in local.rglob("*.parquet")) if local.is_dir() else []


def _hf_paths(options: dict[str, Any], root: Path) -> dict[str, Any]:
    """A local folder made absolute; a hub id stays as it is."""
    return {**options, "path": absolute(options["path"], root)} if (root / options["path"]).exists() else options


@dataset_source("chartqa_hf", only_split("splits"), input_files=_hf_inputs, resolve_paths=_hf_paths)
def read_chartqa_hf(dataset: DatasetConfig, split: str, *, root: Path, **_: Any) -> Iterator[Row | Rejected]:
    options = dataset.options
    ds = load_hub_split(options["path"], options["splits"][split], options["revision"], root)
    missing = [c for c in ("image", "query", "label", "human_or_machine") if c not in ds.column_names]
    if missing:
        raise DataSourceError(
            f"{options['path']} split {options['splits'][split]!r} lacks column(s) {', '.join(missing)}; "
            f"it has {', '.join(ds.column_names)} (is this the ChartQA parquet layout?)"
        )
    limit = options["limit"]
    total = min(len(ds), limit) if limit else len(ds)
    progress = Progress(f"{dataset.name}/{split}", total, log, unit="rows")
    for k, record in enumerate(ds):
        if k >= total:
            break
        progress.advance()
        row_id = f"{split}-{k:06d}"
        labels = record["label"]
        if isinstance(labels, str):
            labels = [labels]
        if not labels or not str(labels[0]).strip():
            yield Rejected(row_id, "empty answer (label list is empty)")
            continue
        subset = _subset_of(record["human_or_machine"])
        if subset is None:
            yield Rejected(
                row_id, f"human_or_machine {record['human_or_machine']!r} is neither human (0) nor machine (1)"
            )
            continue
        if not record["query"] or not str(record["query"]).strip():
            yield Rejected(row_id, "empty question")
            continue
        try:
            png, width, height = intake(
                image_source_bytes(record["image"], Path(root) / options["path"]), dataset.max_image_pixels
            )
        except RowRejected as err:
            yield Rejected(row_id, str(err))
            continue
        query = str(record["query"])
        yield Row(
            id=row_id,
            images=[png],
            problem=f"{IMAGE_PLACEHOLDER}\n{query}",
            answer=str(labels[0]).strip(),
            data_source=f"chartqa_{subset}",
            chart_type="unknown",
            bboxes=empty_bboxes(),
            split=split,
            extra={
                "question": query,
                "subset": subset,
                "all_labels": [str(x) for x in labels],
                "image_size": [width, height],
                "boxes_from": None,
            },
        )
