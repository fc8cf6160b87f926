"""Geometry diagrams with exact answers, written in both GeoQA layouts: the small data the GeoQA recipes' CPU
variants run on (config/geoqa_r1v_cpu.yaml, config/geoqa_mc_cpu.yaml; tests/fixtures/geometry/).

Each problem is drawn with PIL on a small white canvas, its given values written in the figure, and its answer
computed exactly: the third angle of a triangle (degrees), the hypotenuse of a right triangle (a Pythagorean
triple, so the length is whole) and the area of a rectangle. ``write_geometry`` writes a folder laid out like a
Hugging Face dataset repository (``data/{split}-00000-of-00001.parquet``), which ``datasets.load_dataset`` reads
as it reads the hub:

- ``r1v``: EasyR1's GEOQA_8K_R1V columns ``images`` (a list of one image), ``problem`` (with ``<image>``) and
  ``answer`` (the number);
- ``mc``: ``problem``, ``choices`` (four option texts), ``label`` (the index of the right one) and ``image``,
  drawn RGBA with a transparent background (the reader composites it on white, as the recipe does).

Deterministic in ``seed``: ``python -m chartrl.data.geometry OUT`` rewrites the fixtures byte for byte.
"""

from __future__ import annotations

import io
import random
import sys
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageDraw

SIZE = 112
"""Canvas side in pixels: 16 image tokens at the tiny model's 28-px merged patches."""
TRIPLES = ((3, 4, 5), (6, 8, 10), (5, 12, 13), (8, 15, 17), (9, 12, 15), (12, 16, 20))
SPLIT_FILES = {"train": "train", "val": "validation", "test": "test"}
"""Our split -> the file name the hub layout gives it (``datasets`` reads ``validation`` as a split name)."""


@dataclass(frozen=True)
class Problem:
    kind: str
    """angle, length or area."""
    question: str
    answer: int
    image: Image.Image


def _canvas(transparent: bool) -> tuple[Image.Image, ImageDraw.ImageDraw]:
    image = Image.new("RGBA", (SIZE, SIZE), (255, 255, 255, 0 if transparent else 255))
    return image, ImageDraw.Draw(image)


def angle_problem(rng: random.Random, transparent: bool) -> Problem:
    a, b = rng.randrange(30, 80, 5), rng.randrange(30, 80, 5)
    image, draw = _canvas(transparent)
    points = [(12, 96), (100, 96), (rng.randint(36, 76), 16)]
    draw.polygon(points, outline=(0, 0, 0, 255))
    draw.text((6, 98), f"A {a}", fill=(0, 0, 0, 255))
    draw.text((76, 98), f"B {b}", fill=(0, 0, 0, 255))
    draw.text((points[2][0] - 3, 4), "C", fill=(0, 0, 0, 255))
    return Problem("angle", "In triangle ABC, find the measure of angle C in degrees.", 180 - a - b, image)


def length_problem(rng: random.Random, transparent: bool) -> Problem:
    p, q, r = rng.choice(TRIPLES)
    image, draw = _canvas(transparent)
    draw.line([(16, 96), (96, 96), (16, 20), (16, 96)], fill=(0, 0, 0, 255))
    draw.rectangle([(16, 88), (24, 96)], outline=(0, 0, 0, 255))  # the right angle
    draw.text((50, 99), str(q), fill=(0, 0, 0, 255))
    draw.text((2, 52), str(p), fill=(0, 0, 0, 255))
    return Problem("length", "In the right triangle, find the length of the hypotenuse.", r, image)


def area_problem(rng: random.Random, transparent: bool) -> Problem:
    w, h = rng.randint(2, 12), rng.randint(2, 12)
    image, draw = _canvas(transparent)
    draw.rectangle([(16, 30), (96, 84)], outline=(0, 0, 0, 255))
    draw.text((52, 87), str(w), fill=(0, 0, 0, 255))
    draw.text((100, 52), str(h), fill=(0, 0, 0, 255))
    return Problem("area", "Find the area of the rectangle.", w * h, image)


KINDS = (angle_problem, length_problem, area_problem)


def problems(n: int, seed: int, transparent: bool = False) -> list[Problem]:
    rng = random.Random(f"geometry:{seed}")
    return [KINDS[k % len(KINDS)](rng, transparent) for k in range(n)]


def _png(image: Image.Image, mode: str) -> bytes:
    buffer = io.BytesIO()
    image.convert(mode).save(buffer, format="PNG", optimize=False)
    return buffer.getvalue()


def choices_for(answer: int, rng: random.Random) -> tuple[list[str], int]:
    """Four distinct positive options, the answer among them at a seeded place."""
    wrong = sorted({answer + d for d in (-20, -10, -5, -2, 2, 5, 10, 20) if answer + d > 0} - {answer})
    options = rng.sample(wrong, 3) + [answer]
    rng.shuffle(options)
    return [str(o) for o in options], options.index(answer)


def write_geometry(out: str | Path, layout: str, sizes: dict[str, int], seed: int = 0) -> dict[str, Path]:
    """Write ``sizes[split]`` problems per split in ``layout`` (``r1v`` or ``mc``) under ``out/data/``; returns the
    files written."""
    import datasets

    if layout not in ("r1v", "mc"):
        raise ValueError(f"unknown GeoQA layout {layout!r}; known: r1v, mc")
    written = {}
    for k, (split, n) in enumerate(sizes.items()):
        rng = random.Random(f"geometry-choices:{seed}:{split}")
        drawn = problems(n, seed * 100 + k, transparent=layout == "mc")
        if layout == "r1v":
            features = datasets.Features(
                {
                    "images": datasets.List(datasets.Image()),
                    "problem": datasets.Value("string"),
                    "answer": datasets.Value("string"),
                }
            )
            columns = {
                "images": [[{"bytes": _png(p.image, "RGB"), "path": None}] for p in drawn],
                "problem": [f"<image>{p.question}" for p in drawn],
                "answer": [str(p.answer) for p in drawn],
            }
        else:
            options = [choices_for(p.answer, rng) for p in drawn]
            features = datasets.Features(
                {
                    "problem": datasets.Value("string"),
                    "choices": datasets.List(datasets.Value("string")),
                    "label": datasets.Value("int64"),
                    "image": datasets.Image(),
                }
            )
            columns = {
                "problem": [p.question for p in drawn],
                "choices": [c for c, _ in options],
                "label": [i for _, i in options],
                "image": [{"bytes": _png(p.image, "RGBA"), "path": None} for p in drawn],
            }
        path = Path(out) / "data" / f"{SPLIT_FILES[split]}-00000-of-00001.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        datasets.Dataset.from_dict(columns, features=features).to_parquet(str(path))
        written[split] = path
    return written


FIXTURES = {
    "r1v": {"train": 48, "val": 8, "test": 12},
    "mc": {"train": 48, "val": 8, "test": 40},
}
"""The fixtures' sizes (tests/fixtures/geometry/{r1v,mc}); the mc test split is subsampled (seed 42) to 12."""


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else Path("tests/fixtures/geometry")
    for layout, sizes in FIXTURES.items():
        for split, path in write_geometry(out / layout, layout, sizes).items():
            print(f"{layout} {split}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
