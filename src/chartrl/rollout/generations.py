"""The generations contract (``results/eval/{series}/generations.parquet`` and ``chartrl rollout --out``) and a
gallery people can look at.

One row per (question, sample)::

    id, sample, split, question, ground_truth, data_source, subset, chart_type
    turns            JSON list of {role, text, tokens, stop | image}: every assistant pass and tool observation
    tool_calls       JSON list of the assistant texts that held a call
    tool_called      bool
    tool_outcome     none | executed | malformed | failed (see chartrl.rollout.episodes.Episode.tool_outcome)
    tool_error_kinds JSON list, one per call ('' when it ran)
    final_response   text of the last assistant pass
    answer           the extracted answer (last <answer>...</answer>), null when there is none
    prompt_tokens, response_tokens (sampled), total_tokens, tool_turn_tokens
    vision_tokens_sampled, truncated
    edited_images    JSON list of PNG paths (one per image a tool returned)
    model            the policy folder
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from chartrl.files import write_atomically
from chartrl.rollout.conversation import question_of

SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("sample", pa.int32()),
        ("split", pa.string()),
        ("question", pa.string()),
        ("ground_truth", pa.string()),
        ("data_source", pa.string()),
        ("subset", pa.string()),
        ("chart_type", pa.string()),
        ("turns", pa.string()),
        ("tool_calls", pa.string()),
        ("tool_called", pa.bool_()),
        ("tool_outcome", pa.string()),
        ("tool_error_kinds", pa.string()),
        ("final_response", pa.string()),
        ("answer", pa.string()),
        ("prompt_tokens", pa.int32()),
        ("response_tokens", pa.int32()),
        ("total_tokens", pa.int32()),
        ("tool_turn_tokens", pa.int32()),
        ("vision_tokens_sampled", pa.int32()),
        ("truncated", pa.bool_()),
        ("edited_images", pa.string()),
        ("model", pa.string()),
    ]
)


def episode_record(episode, image_paths: Sequence[str], model: str) -> dict[str, Any]:
    from chartrl.answers import extract_answer

    row = episode.row
    return {
        "id": row.id,
        "sample": episode.sample,
        "split": row.split,
        "question": question_of(row),
        "ground_truth": row.answer,
        "data_source": row.data_source,
        "subset": row.extra.get("subset", ""),
        "chart_type": row.chart_type,
        "turns": json.dumps(episode.turns),
        "tool_calls": json.dumps(episode.tool_call_texts),
        "tool_called": bool(episode.tool_outcomes),
        "tool_outcome": episode.tool_outcome,
        "tool_error_kinds": json.dumps(episode.tool_error_kinds),
        "final_response": episode.final_response,
        "answer": extract_answer(episode.final_response),
        "prompt_tokens": len(episode.prompt_ids),
        "response_tokens": episode.sampled_tokens,
        "total_tokens": len(episode.prompt_ids) + len(episode.response_ids),
        "tool_turn_tokens": sum(t["tokens"] for t in episode.turns if t["role"] == "tool"),
        "vision_tokens_sampled": episode.vision_tokens,
        "truncated": episode.truncated,
        "edited_images": json.dumps(list(image_paths)),
        "model": model,
    }


def save_edited_images(episode, folder: Path) -> list[str]:
    paths = []
    for k, image in enumerate(episode.images[1:]):
        path = folder / f"{episode.row.id}-s{episode.sample}-{k}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, lambda tmp, image=image: image.save(tmp, format="PNG"))
        paths.append(str(path))
    return paths


def write_generations(episodes: Sequence, out: Path, image_dir: Path, model: str) -> list[dict[str, Any]]:
    records = [episode_record(e, save_edited_images(e, image_dir), model) for e in episodes]
    table = pa.Table.from_pylist(records, schema=SCHEMA)
    write_atomically(out, lambda tmp: pq.write_table(table, tmp, compression="zstd"))
    return records


def draw_gallery(episodes: Sequence, out: Path, limit: int = 8, tile: int = 280) -> Path:
    """Original chart | edited chart (or a blank) | the tool call and the answer, one episode per line;
    episodes with a tool call first, failures included."""
    from PIL import Image, ImageDraw

    chosen = sorted(episodes, key=lambda e: (not e.tool_outcomes, e.row.id, e.sample))[:limit]
    text_width, line = 420, 13
    sheet = Image.new("RGB", (2 * tile + text_width, max(1, len(chosen)) * tile), "white")
    draw = ImageDraw.Draw(sheet)
    for k, episode in enumerate(chosen):
        y = k * tile
        for column, image in enumerate(episode.images[:2]):
            thumb = image.copy()
            thumb.thumbnail((tile - 6, tile - 6))
            sheet.paste(thumb, (column * tile + 3, y + 3))
        lines = [
            f"{episode.row.id} sample {episode.sample} [{episode.tool_outcome}]",
            f"Q: {question_of(episode.row)}",
            f"truth: {episode.row.answer}",
        ]
        for turn in episode.turns:
            prefix = "A" if turn["role"] == "assistant" else "tool"
            lines.append(f"{prefix}: {turn['text']}")
        wrapped = [chunk for text in lines for chunk in _wrap(text.replace("\n", " "), 62)]
        for n, text in enumerate(wrapped[: tile // line - 1]):
            draw.text((2 * tile + 6, y + 4 + n * line), text, fill=(0, 0, 0))
        draw.line([(0, y + tile - 1), (sheet.width, y + tile - 1)], fill=(200, 200, 200))
    return write_atomically(out, lambda tmp: sheet.save(tmp, format="PNG"))


def _wrap(text: str, width: int) -> list[str]:
    return [text[i : i + width] for i in range(0, len(text), width)] or [""]
