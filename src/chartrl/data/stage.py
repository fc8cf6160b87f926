"""The data stage: read one split into the contract (rejecting bad rows, never dropping silently), then sum the
splits up in the dataset's card."""

from __future__ import annotations

import hashlib
import io
import json
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from chartrl.config import DatasetConfig
from chartrl.data.contract import (
    BAR_CHART_TYPES,
    BOX_AXES,
    Rejected,
    Row,
    RowRejected,
    check_row,
    has_boxes,
    read_split,
    write_split,
)
from chartrl.data.errors import DataSourceError, TooManyRejects
from chartrl.data.sources import source_of
from chartrl.files import write_atomically, write_json

log = logging.getLogger(__name__)
MAX_REJECTS_IN_MESSAGE = 20


def collect_split(dataset: DatasetConfig, split: str, root: Path, threads: int = 1) -> tuple[list[Row], list[Rejected]]:
    """Read ``split`` through the dataset's source; every row either passes the contract or is rejected with
    its reason. Duplicate ids: the first row keeps the id, later ones are rejected."""
    rows: list[Row] = []
    rejects: list[Rejected] = []
    first_seen: dict[str, int] = {}
    for item in source_of(dataset).read(dataset, split, root=root, threads=threads):
        if isinstance(item, Rejected):
            rejects.append(item)
            continue
        source = str(item.extra.get("source_row", "")) if isinstance(item.extra, dict) else ""
        try:
            check_row(item)
        except RowRejected as err:
            rejects.append(Rejected(item.id or "<no id>", str(err), source))
            continue
        if item.id in first_seen:
            rejects.append(Rejected(item.id, f"duplicate id (first seen at row {first_seen[item.id]})", source))
            continue
        first_seen[item.id] = len(rows)
        rows.append(item)
    return rows, rejects


def check_reject_fraction(dataset: DatasetConfig, split: str, n_rows: int, rejects: Sequence[Rejected]) -> None:
    total = n_rows + len(rejects)
    if total == 0:
        raise DataSourceError(f"dataset {dataset.name} split {split}: the source yielded no rows at all")
    fraction = len(rejects) / total
    if fraction > dataset.max_reject_fraction:
        listed = "\n".join(
            f"  {r.id}{f' ({r.source})' if r.source else ''}: {r.reason}" for r in rejects[:MAX_REJECTS_IN_MESSAGE]
        )
        more = len(rejects) - MAX_REJECTS_IN_MESSAGE
        raise TooManyRejects(
            f"dataset {dataset.name} split {split}: {len(rejects)} of {total} rows rejected "
            f"({fraction:.1%} > max_reject_fraction {dataset.max_reject_fraction:.1%}).\n{listed}"
            + (f"\n  ... and {more} more" if more > 0 else "")
            + f"\nFix the source rows, or raise datasets.{dataset.name}.max_reject_fraction "
            "if these losses are acceptable."
        )


def keep_rows_with_boxes(rows: Sequence[Row]) -> tuple[list[Row], list[dict[str, str]]]:
    """(rows whose chart has label boxes, the others as ``{id, chart_type}``): what ``require_boxes`` keeps."""
    kept = [row for row in rows if has_boxes(row.bboxes)]
    left_out = [{"id": row.id, "chart_type": row.chart_type} for row in rows if not has_boxes(row.bboxes)]
    return kept, left_out


def box_coverage(rows: Sequence[Row]) -> float:
    """The share of questions whose chart has label boxes (what a focus tool can edit)."""
    return sum(has_boxes(row.bboxes) for row in rows) / len(rows) if rows else 0.0


def check_box_coverage(dataset: DatasetConfig, split: str, rows: Sequence[Row], floor: float) -> None:
    """A tool series trains on this split: fail when too few of its questions have boxes for the tools."""
    coverage = box_coverage(rows)
    if coverage >= floor:
        return
    without = Counter(row.chart_type for row in rows if not has_boxes(row.bboxes))
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(without.items()))
    raise DataSourceError(
        f"dataset {dataset.name} split {split}: only {coverage:.1%} of {len(rows)} questions have label boxes "
        f"(below data.min_box_coverage {floor:.0%}); without boxes: {kinds}. A tool series trains on this split and "
        "its focus tools could only fail (no_boxes) on the rest. Give the charts boxes (the ChartQA release's "
        f"annotations/ folder, or datasets.{dataset.name}.refocus_boxes), keep only charts with boxes "
        f"(datasets.{dataset.name}.require_boxes: [train, val]), or lower data.min_box_coverage"
    )


def build_split(
    dataset: DatasetConfig,
    split: str,
    root: Path,
    out: Path,
    rejects_out: Path,
    threads: int = 1,
    min_box_coverage: float | None = None,
) -> dict[str, Any]:
    """Write ``out`` (the split's parquet) and ``rejects_out`` (its rejected rows, and the rows ``require_boxes``
    left out) atomically. ``min_box_coverage``: the split is a tool series' train split (see
    :func:`check_box_coverage`)."""
    rows, rejects = collect_split(dataset, split, root, threads)
    for reject in rejects:
        log.warning("rejected %s: %s", reject.id, reject.reason)
    check_reject_fraction(dataset, split, len(rows), rejects)
    left_out: list[dict[str, str]] = []
    if split in dataset.options.get("require_boxes", ()):
        rows, left_out = keep_rows_with_boxes(rows)
        log.info(
            "%s/%s: %d questions on charts without label boxes left out (require_boxes)",
            dataset.name,
            split,
            len(left_out),
        )
        if not rows:
            raise DataSourceError(
                f"dataset {dataset.name} split {split}: no question has a chart with label boxes, so require_boxes "
                f"leaves nothing; give the charts boxes (annotations/ or refocus_boxes) or drop {split} from "
                f"datasets.{dataset.name}.require_boxes"
            )
    if min_box_coverage is not None:
        check_box_coverage(dataset, split, rows, min_box_coverage)
    write_split(rows, out)
    summary = {
        "split": split,
        "rows": len(rows),
        "rejected": [r.to_dict() for r in rejects],
        "left_out": left_out,
    }
    write_json(rejects_out, summary)
    log.info("%s/%s: %d rows written to %s, %d rejected", dataset.name, split, len(rows), out, len(rejects))
    return summary


# --------------------------------------------------------------------------------------------------------------
# The card
# --------------------------------------------------------------------------------------------------------------


def _image_digest(row: Row) -> str:
    return hashlib.sha256(row.images[0]).hexdigest()[:16]


def split_card(rows: Sequence[Row]) -> dict[str, Any]:
    charts: dict[str, Row] = {}
    for row in rows:
        charts.setdefault(_image_digest(row), row)
    bar_charts = [r for r in charts.values() if r.chart_type in BAR_CHART_TYPES]
    with_boxes = [r for r in bar_charts if has_boxes(r.bboxes)]
    return {
        "rows": len(rows),
        "charts": len(charts),
        "rows_per_chart_type": dict(sorted(Counter(r.chart_type for r in rows).items())),
        "charts_per_chart_type": dict(sorted(Counter(r.chart_type for r in charts.values()).items())),
        "rows_per_data_source": dict(sorted(Counter(r.data_source for r in rows).items())),
        "rows_per_subset": dict(sorted(Counter(r.extra.get("subset", "unknown") for r in rows).items())),
        "rows_per_question_type": dict(
            sorted(Counter(r.extra["question_type"] for r in rows if "question_type" in r.extra).items())
        ),
        "bbox_coverage": {
            "bar_charts": len(bar_charts),
            "bar_charts_with_boxes": len(with_boxes),
            "bar_charts_fraction": round(len(with_boxes) / len(bar_charts), 4) if bar_charts else None,
            "rows_with_boxes": sum(has_boxes(r.bboxes) for r in rows),
            "question_fraction": round(box_coverage(rows), 4),
            "rows_with_boxes_per_chart_type": dict(
                sorted(Counter(r.chart_type for r in rows if has_boxes(r.bboxes)).items())
            ),
            "boxes_from": dict(
                sorted(Counter(str(r.extra.get("boxes_from", "renderer")) for r in charts.values()).items())
            ),
            "labels_per_axis": {axis: sum(len(r.bboxes[axis]) for r in charts.values()) for axis in BOX_AXES},
        },
    }


def build_card(
    dataset: DatasetConfig, split_files: Mapping[str, Path], reject_files: Mapping[str, Path]
) -> tuple[dict[str, Any], dict[str, list[Row]]]:
    """The dataset card and the rows it was computed from (for the sample sheet)."""
    rows = {split: read_split(path) for split, path in split_files.items()}
    summaries = {split: json.loads(Path(path).read_text()) for split, path in reject_files.items()}
    rejects = {split: summary["rejected"] for split, summary in summaries.items()}
    owners: dict[str, set[str]] = {}
    for split, split_rows in rows.items():
        for row in split_rows:
            owners.setdefault(_image_digest(row), set()).add(split)
    shared = sum(1 for splits in owners.values() if len(splits) > 1)
    card = {
        "dataset": dataset.name,
        "source": dataset.source,
        "splits": {split: split_card(split_rows) for split, split_rows in rows.items()},
        "charts_shared_across_splits": shared,
        "rejected": {
            split: {
                "count": len(items),
                "by_reason": dict(Counter(_reason_kind(item["reason"]) for item in items).most_common()),
                "rows": items,
            }
            for split, items in rejects.items()
        },
        "left_out": {
            split: {
                "count": len(summary.get("left_out", [])),
                "reason": "require_boxes: the chart has no label boxes",
                "by_chart_type": dict(sorted(Counter(i["chart_type"] for i in summary.get("left_out", [])).items())),
            }
            for split, summary in summaries.items()
            if summary.get("left_out")
        },
        "config": dataset.to_dict(),
    }
    return card, rows


def _reason_kind(reason: str) -> str:
    """Group reasons by their first words, without the specifics (sizes, ids) that make each one unique."""
    return reason.split(":")[0].split("(")[0].strip()


def card_metrics(card: Mapping[str, Any]) -> dict[str, float]:
    """Flat numbers of the card for MLflow."""
    metrics: dict[str, float] = {"charts_shared_across_splits": card["charts_shared_across_splits"]}
    for split, info in card["splits"].items():
        metrics[f"{split}/rows"] = info["rows"]
        metrics[f"{split}/charts"] = info["charts"]
        metrics[f"{split}/rejected"] = card["rejected"][split]["count"]
        if split in card["left_out"]:
            metrics[f"{split}/left_out_without_boxes"] = card["left_out"][split]["count"]
        metrics[f"{split}/question_box_coverage"] = info["bbox_coverage"]["question_fraction"]
        coverage = info["bbox_coverage"]["bar_charts_fraction"]
        if coverage is not None:
            metrics[f"{split}/bar_chart_box_coverage"] = coverage
        for chart_type, n in info["rows_per_chart_type"].items():
            metrics[f"{split}/rows_{chart_type}"] = n
    return metrics


def draw_sample_sheet(rows_by_split: Mapping[str, Sequence[Row]], n: int, out: Path, tile: int = 320) -> Path:
    """A contact sheet of ``n`` charts (bar charts first, spread over the splits) with their label boxes drawn,
    each captioned with its id, question and answer. Written atomically as PNG."""
    from PIL import Image, ImageDraw

    unique: dict[str, Row] = {}
    for split_rows in rows_by_split.values():
        for row in split_rows:
            unique.setdefault(_image_digest(row), row)
    with_boxes = [r for r in unique.values() if has_boxes(r.bboxes)]
    without = [r for r in unique.values() if not has_boxes(r.bboxes)]
    n_without = min(len(without), n // 4)  # mostly bar charts with their boxes, a few others for contrast
    chosen = _evenly(with_boxes, n - n_without) + _evenly(without, n - min(len(with_boxes), n - n_without))
    cols = min(4, max(1, len(chosen)))
    rows_n = max(1, (len(chosen) + cols - 1) // cols)
    caption_h = 44
    sheet = Image.new("RGB", (cols * tile, rows_n * (tile + caption_h)), "white")
    draw = ImageDraw.Draw(sheet)
    colours = {"x_values": (220, 30, 30), "y_values": (30, 90, 220)}
    for k, row in enumerate(chosen):
        image = Image.open(io.BytesIO(row.images[0])).convert("RGB")
        scale = tile / max(image.size)
        image = image.resize((max(1, int(image.width * scale)), max(1, int(image.height * scale))))
        chart_draw = ImageDraw.Draw(image)
        for axis in BOX_AXES:
            for x1, y1, x2, y2 in row.bboxes[axis].values():
                chart_draw.rectangle(
                    [x1 * image.width, y1 * image.height, x2 * image.width, y2 * image.height],
                    outline=colours[axis],
                    width=2,
                )
        x0, y0 = (k % cols) * tile, (k // cols) * (tile + caption_h)
        sheet.paste(image, (x0, y0))
        question = row.extra.get("question", "")[:58]
        draw.text((x0 + 4, y0 + tile + 2), f"{row.id} [{row.chart_type}]", fill=(0, 0, 0))
        draw.text((x0 + 4, y0 + tile + 15), question, fill=(60, 60, 60))
        draw.text((x0 + 4, y0 + tile + 28), f"answer: {row.answer[:50]}", fill=(0, 100, 0))

    return write_atomically(out, lambda tmp: sheet.save(tmp, format="PNG"))


def _evenly(items: Sequence[Row], k: int) -> list[Row]:
    """k items spread evenly over ``items`` (all of them when there are fewer)."""
    if k <= 0 or not items:
        return []
    step = max(1, len(items) // k)
    return list(items[::step][:k])
