"""``zoomchart``: charts the project makes itself whose answer needs the zoom tool (DeepEyes' task, in miniature).

Each chart is a white ``image_size`` canvas with a light grid and a few framed label boxes; one box (the asked one,
named by its corner letter) holds a two-digit number written ``text_px`` pixels tall, the others hold decoys. The
image is larger than the model sees it (``model.max_pixels`` shrinks it: on the CPU variant 448 x 448 becomes
224 x 224, so a 4-px number is 2 px tall and unreadable), while ``zoom_in`` on the asked box crops a quarter of
the side and enlarges it to the chart's pixel count (4x), after which the shrink leaves the number 8 px tall.

Rows carry the asked box as ``extra.zoom_box`` (normalised [x1, y1, x2, y2], the frame grown to a quarter of the
image), which the warm start's zoom demonstrations use; they have no label boxes (``zoom_in`` needs none).
Everything is a function of ``seed`` and the split (splits draw from disjoint seeds).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from chartrl.config import DatasetConfig
from chartrl.data.contract import IMAGE_PLACEHOLDER, Row, empty_bboxes
from chartrl.data.images import png_bytes
from chartrl.data.sources import dataset_source

SPLIT_SALT = {"train": 0, "val": 1, "test": 2}
CORNERS = ("top left", "top right", "bottom left", "bottom right")


def _narrow(options: Mapping[str, Any], split: str) -> dict[str, Any]:
    """A split depends on its own size, the seed and the drawing options, never on another split's size."""
    return {**options, "splits": {split: options["splits"][split]}}


def _tiny_text(text: str, height: int) -> Image.Image:
    """``text`` in PIL's built-in font, scaled to ``height`` pixels (a greyscale mask)."""
    font = ImageFont.load_default()
    left, top, right, bottom = font.getbbox(text)
    canvas = Image.new("L", (right - left + 2, bottom - top + 2), 0)
    ImageDraw.Draw(canvas).text((1 - left, 1 - top), text, fill=255, font=font)
    width = max(1, round(canvas.width * height / canvas.height))
    return canvas.resize((width, height), Image.Resampling.LANCZOS)


def draw_chart(rng: random.Random, size: tuple[int, int], text_px: int) -> tuple[Image.Image, str, str, list[float]]:
    """One chart: (image, the asked corner, its number, the asked box's zoom region normalised)."""
    width, height = size
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    for x in range(0, width, width // 8):
        draw.line([(x, 0), (x, height)], fill=(232, 232, 232))
    for y in range(0, height, height // 8):
        draw.line([(0, y), (width, y)], fill=(232, 232, 232))
    frame_w, frame_h = width // 8, height // 8
    numbers = rng.sample(range(10, 100), len(CORNERS))
    asked = rng.randrange(len(CORNERS))
    region: list[float] = []
    for k, number in enumerate(numbers):
        # each box sits somewhere in its own quadrant, clear of the quadrant's edges
        qx, qy = (k % 2) * width // 2, (k // 2) * height // 2
        x = qx + rng.randrange(width // 16, width // 2 - frame_w - width // 16)
        y = qy + rng.randrange(height // 16, height // 2 - frame_h - height // 16)
        draw.rectangle([x, y, x + frame_w, y + frame_h], outline=(40, 40, 40), width=2)
        mask = _tiny_text(str(number), text_px)
        image.paste((0, 0, 0), (x + (frame_w - mask.width) // 2, y + (frame_h - mask.height) // 2), mask)
        if k == asked:
            cx, cy = x + frame_w / 2, y + frame_h / 2
            half_w, half_h = width / 8, height / 8  # a quarter of each side around the box's centre
            left, top = min(max(cx - half_w, 0), width - 2 * half_w), min(max(cy - half_h, 0), height - 2 * half_h)
            region = [left / width, top / height, (left + 2 * half_w) / width, (top + 2 * half_h) / height]
    return image, CORNERS[asked], str(numbers[asked]), [round(v, 4) for v in region]


def _rows(dataset: DatasetConfig, split: str) -> Iterator[Row]:
    options = dataset.options
    size = (int(options["image_size"][0]), int(options["image_size"][1]))
    count = int(options["splits"][split])
    for k in range(count):
        rng = random.Random(f"{options['seed']}/{SPLIT_SALT[split]}/{k}")
        image, corner, number, region = draw_chart(rng, size, int(options["text_px"]))
        question = f"What number is written in the small box in the {corner} of the image?"
        yield Row(
            id=f"{dataset.name}-{split}-{k:05d}",
            images=[png_bytes(image)],
            problem=f"{IMAGE_PLACEHOLDER}\n{question}",
            answer=number,
            data_source="zoomchart",
            chart_type="unknown",
            bboxes=empty_bboxes(),
            split=split,
            extra={"question": question, "subset": "synthetic", "zoom_box": region, "image_size": list(size)},
        )


@dataset_source("zoomchart", _narrow)
def read_zoomchart(dataset: DatasetConfig, split: str, **_: Any) -> Iterator[Row]:
    yield from _rows(dataset, split)
