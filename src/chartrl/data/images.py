"""Image intake for every reader: size guard before decoding, full decode check, one stored format.

Every stored image is an RGB PNG. Transparent charts (27 of the 45 ChartQA sample PNGs are RGBA) are
composited on white, which is how a chart viewer shows them, so tools and models see the same pixels.
"""

from __future__ import annotations

import io
import struct
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from PIL import Image

from chartrl.data.contract import RowRejected


def open_checked(data: bytes, max_pixels: int) -> Image.Image:
    """Decode ``data`` fully, rejecting unreadable images and, before decoding, images over ``max_pixels``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
            width, height = image.size
            if width * height > max_pixels:
                raise RowRejected(
                    f"oversized image {width}x{height} = {width * height} pixels > max_image_pixels {max_pixels}"
                )
            image.load()
    except RowRejected:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as err:
        raise RowRejected(f"oversized image (decompression-bomb guard): {err}") from err
    except (OSError, SyntaxError, ValueError, EOFError, struct.error) as err:  # what PIL raises on corrupt files
        raise RowRejected(f"unreadable image: {type(err).__name__}: {err}") from err
    if width < 1 or height < 1:
        raise RowRejected(f"empty image {width}x{height}")
    return image


def to_rgb(image: Image.Image) -> Image.Image:
    if image.mode == "RGB":
        return image
    if image.mode in ("RGBA", "LA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        background = Image.new("RGB", rgba.size, (255, 255, 255))
        background.paste(rgba, mask=rgba.getchannel("A"))
        return background
    return image.convert("RGB")


def png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    to_rgb(image).save(buffer, format="PNG")
    return buffer.getvalue()


def intake(data: bytes, max_pixels: int) -> tuple[bytes, int, int]:
    """Checked source bytes -> (RGB PNG bytes, width, height)."""
    image = open_checked(data, max_pixels)
    return png_bytes(image), image.width, image.height


def image_source_bytes(value: Any, base_dir: Path | None) -> bytes:
    """The raw bytes behind one image cell of a source file: bytes, a Hugging Face image struct
    ``{"bytes": ..., "path": ...}``, or a path (relative to ``base_dir``)."""
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if isinstance(value, Mapping):
        if value.get("bytes"):
            return bytes(value["bytes"])
        if value.get("path"):
            return image_source_bytes(value["path"], base_dir)
        raise RowRejected("image cell has neither bytes nor a path")
    if isinstance(value, str) and value:
        path = Path(value)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        if not path.is_file():
            raise RowRejected(f"image file not found: {path}")
        return path.read_bytes()
    raise RowRejected(f"image cell of type {type(value).__name__} is not bytes, an image struct or a path")
