"""The pixel edits behind the tools: pure, deterministic functions of an RGB image and pixel boxes.

Conventions follow ReFocus (Fu et al. 2025, "ReFocus: Visual Editing as a Chain of Thought for Structured Image
Understanding", tools.py of github.com/zeyofu/ReFocus_Code): every rectangle is drawn 2 px inside its box, a
highlight is red at alpha 50/255 over the box, a mask is white, a drawn box is a red outline 5 px wide (ReFocus
charts are ~800x600; the width here scales with the chart so a 168x56 chart is not filled by its outlines).
Unlike ReFocus, a mask never paints over a kept band where two bands overlap (ReFocus boxes on ChartQA overlap
by up to 2 px), so the values the model asked to keep always stay visible.

Zoom follows DeepEyes (Zheng et al. 2025, arXiv 2505.14362, ``maybe_resize_bbox``): a box smaller than 28 px
is grown around its centre; the crop is then resized for the Qwen2-VL image processor (see
:func:`zoom_output_size`).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

import numpy as np
from PIL import Image

from chartrl.data.images import to_rgb

ChartImage = Image.Image | bytes | bytearray
"""A chart as the tools accept it: a PIL image in any mode, or encoded image bytes (PNG)."""

PixelBox = tuple[int, int, int, int]
"""left, top, right, bottom in pixels, half-open: the box covers columns left..right-1 and rows top..bottom-1."""

INSET = 2
"""Pixels between a band's edge and the rectangle drawn in it (ReFocus: ``int(x1 * width + 2)``)."""
HIGHLIGHT_COLOUR = (255, 0, 0)
HIGHLIGHT_ALPHA = 50
"""Of 255: ReFocus alpha-composites ``fill=(255, 0, 0, 50)`` over the band."""
MASK_COLOUR = (255, 255, 255)
OUTLINE_COLOUR = (255, 0, 0)
OUTLINE_WIDTH_AT_600 = 5
"""ReFocus draws 5-px outlines on ChartQA charts (short side ~600 px); the width scales with the short side."""

ZOOM_MIN_CROP_SIDE = 28
"""A zoom box is grown to at least 28 px per side (DeepEyes ``maybe_resize_bbox``; 28 px is one merged 2x2 patch
of 14 px, i.e. one visual token of Qwen2.5-VL)."""
PROCESSOR_MIN_SIDE = 56
"""Qwen2-VL's ``smart_resize`` wants at least 56 * 56 pixels (transformers, image_processing_qwen2_vl.py)."""
PROCESSOR_MAX_ASPECT = 200
"""``smart_resize`` raises on an aspect ratio above 200."""


def as_rgb(image: ChartImage) -> Image.Image:
    """``image`` as an RGB PIL image (itself when it is one already; the tools never modify their input).
    Transparent charts go on white, as the data stage stores them (chartrl.data.images.to_rgb)."""
    if isinstance(image, bytes | bytearray):
        decoded = Image.open(io.BytesIO(bytes(image)))
        decoded.load()
        return to_rgb(decoded)
    if isinstance(image, Image.Image):
        return to_rgb(image)
    raise TypeError(f"expected a PIL image or encoded image bytes, got {type(image).__name__}")


def pixel_box(box: Sequence[float], size: tuple[int, int]) -> PixelBox:
    """A normalised box [x1, y1, x2, y2] -> the pixels it touches (at least one), clipped to the image."""
    width, height = size
    x1, y1, x2, y2 = box
    left = min(max(math.floor(x1 * width), 0), width - 1)
    top = min(max(math.floor(y1 * height), 0), height - 1)
    right = min(max(math.ceil(x2 * width), left + 1), width)
    bottom = min(max(math.ceil(y2 * height), top + 1), height)
    return left, top, right, bottom


def inset(box: PixelBox, by: int = INSET) -> PixelBox:
    """``box`` shrunk by ``by`` pixels on each side, keeping at least one pixel on each axis."""
    left, top, right, bottom = box
    dx = min(by, (right - left - 1) // 2)
    dy = min(by, (bottom - top - 1) // 2)
    return left + dx, top + dy, right - dx, bottom - dy


def outline_width(size: tuple[int, int]) -> int:
    return max(1, round(OUTLINE_WIDTH_AT_600 * min(size) / 600))


def _region(shape: tuple[int, int], boxes: Sequence[PixelBox]) -> np.ndarray:
    """Boolean (H, W) array, True inside any of ``boxes``."""
    region = np.zeros(shape, dtype=bool)
    for left, top, right, bottom in boxes:
        region[top:bottom, left:right] = True
    return region


def highlight(image: Image.Image, boxes: Sequence[PixelBox]) -> Image.Image:
    """Red at alpha 50/255 over each box (inset); overlapping boxes are tinted once."""
    pixels = np.asarray(image, dtype=np.uint16).copy()  # (H, W, 3)
    region = _region(pixels.shape[:2], [inset(b) for b in boxes])
    colour = np.array(HIGHLIGHT_COLOUR, dtype=np.uint16)
    blended = (pixels[region] * (255 - HIGHLIGHT_ALPHA) + colour * HIGHLIGHT_ALPHA + 127) // 255
    pixels[region] = blended
    return Image.fromarray(pixels.astype(np.uint8), "RGB")


def mask(image: Image.Image, masked: Sequence[PixelBox], kept: Sequence[PixelBox]) -> Image.Image:
    """White over each masked box (inset), never over any pixel of a kept box."""
    pixels = np.array(image, dtype=np.uint8)  # (H, W, 3), a copy
    shape = pixels.shape[:2]
    region = _region(shape, [inset(b) for b in masked]) & ~_region(shape, kept)
    pixels[region] = MASK_COLOUR
    return Image.fromarray(pixels, "RGB")


def outline(image: Image.Image, boxes: Sequence[PixelBox], width: int) -> Image.Image:
    """A red rectangle ``width`` px wide along the inside of each box (inset)."""
    pixels = np.array(image, dtype=np.uint8)  # (H, W, 3), a copy
    ring = np.zeros(pixels.shape[:2], dtype=bool)
    for box in boxes:
        left, top, right, bottom = inset(box)
        w = max(1, min(width, (right - left + 1) // 2, (bottom - top + 1) // 2))
        ring[top : top + w, left:right] = True
        ring[bottom - w : bottom, left:right] = True
        ring[top:bottom, left : left + w] = True
        ring[top:bottom, right - w : right] = True
    pixels[ring] = OUTLINE_COLOUR
    return Image.fromarray(pixels, "RGB")


def zoom_crop_box(box: Sequence[float], size: tuple[int, int]) -> PixelBox:
    """The pixels a zoom box crops: the box's pixels, each side under 28 px grown to 28 px (or the whole image
    side, if smaller) around its centre, shifted back inside the image."""
    left, top, right, bottom = pixel_box(box, size)
    left, right = _at_least(left, right, min(ZOOM_MIN_CROP_SIDE, size[0]), size[0])
    top, bottom = _at_least(top, bottom, min(ZOOM_MIN_CROP_SIDE, size[1]), size[1])
    return left, top, right, bottom


def _at_least(low: int, high: int, length: int, limit: int) -> tuple[int, int]:
    if high - low >= length:
        return low, high
    start = math.floor((low + high - length) / 2)
    start = min(max(start, 0), limit - length)
    return start, start + length


def zoom_output_size(crop: tuple[int, int], original: tuple[int, int]) -> tuple[int, int]:
    """The size a crop is shown at: scaled, aspect kept, to the largest size whose pixel count is at most the
    original image's (a zoom costs at most as many visual tokens as the chart and shows the region as large as
    that budget allows), and to at least 56 px per side (Qwen2-VL's minimum). The two always agree when the
    original's short side is at least 112 px; below that the 56-px minimum wins."""
    crop_w, crop_h = crop
    scale = math.sqrt(original[0] * original[1] / (crop_w * crop_h))
    width, height = math.floor(crop_w * scale), math.floor(crop_h * scale)
    if min(width, height) < PROCESSOR_MIN_SIDE:
        scale = PROCESSOR_MIN_SIDE / min(crop_w, crop_h)
        width, height = math.ceil(crop_w * scale), math.ceil(crop_h * scale)
    return width, height


def zoom(image: Image.Image, crop: PixelBox) -> Image.Image:
    """Crop ``crop`` and resize it (bicubic, as the Qwen2-VL processor resamples) to :func:`zoom_output_size`."""
    left, top, right, bottom = crop
    size = zoom_output_size((right - left, bottom - top), image.size)
    return image.crop(crop).resize(size, Image.Resampling.BICUBIC)
