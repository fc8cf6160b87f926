"""Rollouts for people: chart, edited chart, tool call, answer, truth and every scorer's verdict (failures too).
Images are embedded as small PNG data URIs, so the report opens offline from file://."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq


def _thumbnail(data: bytes | None = None, path: str | Path | None = None, size: int = 260) -> str | None:
    from PIL import Image

    if data is None and (path is None or not Path(path).is_file()):
        return None
    image = Image.open(io.BytesIO(data) if data is not None else path).convert("RGB")
    image.thumbnail((size, size))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def gallery_items(
    generations: Path, charts: Mapping[str, bytes], verdicts: Mapping[str, Mapping[str, str]], limit: int, base: Path
) -> list[dict[str, Any]]:
    """``limit`` rollouts: tool calls first, then failures, then the rest; ``verdicts`` is scorer -> id -> verdict."""
    rows = pq.read_table(generations).to_pylist()

    def order(row):
        key = f"{row['id']}#{row['sample']}"
        wrong = any(v.get(key) != "correct" for v in verdicts.values())
        return (not row["tool_called"], not wrong, row["id"], row["sample"])

    items = []
    for row in sorted(rows, key=order)[:limit]:
        key = f"{row['id']}#{row['sample']}"
        edited = json.loads(row["edited_images"])
        items.append(
            {
                "id": key,
                "question": row["question"],
                "truth": row["ground_truth"],
                "answer": row["answer"],
                "tool_outcome": row["tool_outcome"],
                "turns": json.loads(row["turns"]),
                "chart": _thumbnail(data=charts.get(row["id"])),
                "edited": _thumbnail(path=base / edited[0]) if edited else None,
                "verdicts": {scorer: v.get(key, "-") for scorer, v in verdicts.items()},
            }
        )
    return items


def charts_by_id(parquet: Path, ids: Sequence[str]) -> dict[str, bytes]:
    wanted = set(ids)
    table = pq.read_table(parquet, columns=["id", "images"]).to_pylist()
    return {row["id"]: row["images"][0] for row in table if row["id"] in wanted}
