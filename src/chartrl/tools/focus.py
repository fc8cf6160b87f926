"""The six ReFocus tools: highlight, mask or draw a box around some x values (columns of a vertical bar chart) or
y values (rows of a horizontal bar chart), each a band the data stage stored in the sample's ``bboxes``.

Semantics follow ReFocus (Fu et al. 2025, tools.py of github.com/zeyofu/ReFocus_Code): highlight tints each
selected band, mask paints every *non-selected* band white (masking nothing or everything is refused, as
ReFocus returns the image unchanged when asked to mask every value), draw outlines each selected band. Where
ReFocus silently skips an unknown label, these tools report it: a mistake the model should see and be scored on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from PIL import Image

from chartrl.tools import pixels
from chartrl.tools.boxes import BoxesInput, read_bboxes
from chartrl.tools.calls import ToolError, ToolResult
from chartrl.tools.labels import match_labels
from chartrl.tools.observations import AXIS_WORDS, axis_noun, listed, shown
from chartrl.tools.pixels import ChartImage

EDITS = ("highlight", "mask", "draw")
OTHER_AXIS = {"x_values": "y_values", "y_values": "x_values"}


def resolve_selection(
    axis: str, requested: Sequence[str], chart_labels: Mapping[str, Sequence[str]], edit: str
) -> tuple[tuple[str, ...], ToolError | None]:
    """The chart labels a call selects, or why the call cannot run on this chart. Used by the tools and by the
    parser when it is given the sample's labels."""
    word = AXIS_WORDS[axis]
    if not isinstance(requested, list | tuple) or not all(isinstance(label, str) for label in requested):
        return (), ToolError("bad_arguments", f"{axis} must be a list of {word}s, got {shown(requested)}")
    valid = list(chart_labels.get(axis) or ())
    if not valid:
        other = OTHER_AXIS[axis]
        article = "an" if other == "x_values" else "a"
        hint = (
            f"; it has {AXIS_WORDS[other]}s, use {article} {AXIS_WORDS[other]} tool" if chart_labels.get(other) else ""
        )
        return (), ToolError("no_boxes", f"this chart has no {word}s to focus on{hint}")
    if not requested:
        return (), ToolError("empty_selection", f"{axis} is empty; name at least one {word}")
    selected, error = match_labels(requested, valid, axis)
    if error:
        return (), error
    if edit == "mask" and len(selected) == len(valid):
        return (), ToolError(
            "selects_everything", f"keeping every {word} ({listed(valid)}) masks nothing; keep only the ones you need"
        )
    return selected, None


def _highlight(image: Image.Image, selected: list[pixels.PixelBox], others: list[pixels.PixelBox]) -> Image.Image:
    return pixels.highlight(image, selected)


def _mask(image: Image.Image, selected: list[pixels.PixelBox], others: list[pixels.PixelBox]) -> Image.Image:
    return pixels.mask(image, masked=others, kept=selected)


def _draw(image: Image.Image, selected: list[pixels.PixelBox], others: list[pixels.PixelBox]) -> Image.Image:
    return pixels.outline(image, selected, pixels.outline_width(image.size))


def _highlight_said(axis: str, selected: Sequence[str]) -> str:
    return f"Highlighted {axis_noun(axis, selected)}."


def _mask_said(axis: str, selected: Sequence[str]) -> str:
    return f"Masked all {AXIS_WORDS[axis]}s except {listed(selected)}."


def _draw_said(axis: str, selected: Sequence[str]) -> str:
    boxes = "a box" if len(selected) == 1 else "boxes"
    return f"Drew {boxes} around {axis_noun(axis, selected)}."


EditFunction = Callable[[Image.Image, list[pixels.PixelBox], list[pixels.PixelBox]], Image.Image]
EDIT_FUNCTIONS: dict[str, tuple[EditFunction, Callable[[str, Sequence[str]], str]]] = {
    "highlight": (_highlight, _highlight_said),
    "mask": (_mask, _mask_said),
    "draw": (_draw, _draw_said),
}


def focus(image: ChartImage, bboxes: BoxesInput, axis: str, requested: Sequence[str], edit: str) -> ToolResult:
    """Apply ``edit`` to the bands of ``requested`` labels on ``axis``. Never raises on the model's choice of
    labels; raises ChartBoxesError when ``bboxes`` break the data contract."""
    image = pixels.as_rgb(image)
    bboxes = read_bboxes(bboxes)
    bands = bboxes[axis]
    chart_labels = {name: list(bboxes.get(name) or ()) for name in AXIS_WORDS}
    selected, error = resolve_selection(axis, requested, chart_labels, edit)
    if error:
        return ToolResult.failed(image, error)
    edit_function, say = EDIT_FUNCTIONS[edit]
    chosen = set(selected)
    selected_boxes = [pixels.pixel_box(bands[label], image.size) for label in selected]
    other_boxes = [pixels.pixel_box(box, image.size) for label, box in bands.items() if label not in chosen]
    edited = edit_function(image, selected_boxes, other_boxes)
    return ToolResult(ok=True, image=edited, applied=selected, error=None, observation=say(axis, selected))


def focus_on_x_values_with_highlight(image: ChartImage, bboxes: BoxesInput, x_values: Sequence[str]) -> ToolResult:
    """Tint the bands of ``x_values`` (columns of a vertical bar chart) red at alpha 50/255."""
    return focus(image, bboxes, "x_values", x_values, "highlight")


def focus_on_x_values_with_mask(image: ChartImage, bboxes: BoxesInput, x_values: Sequence[str]) -> ToolResult:
    """Paint every x-value band except those of ``x_values`` white."""
    return focus(image, bboxes, "x_values", x_values, "mask")


def focus_on_x_values_with_draw(image: ChartImage, bboxes: BoxesInput, x_values: Sequence[str]) -> ToolResult:
    """Draw a red box along the inside of each band of ``x_values``."""
    return focus(image, bboxes, "x_values", x_values, "draw")


def focus_on_y_values_with_highlight(image: ChartImage, bboxes: BoxesInput, y_values: Sequence[str]) -> ToolResult:
    """Tint the bands of ``y_values`` (rows of a horizontal bar chart) red at alpha 50/255."""
    return focus(image, bboxes, "y_values", y_values, "highlight")


def focus_on_y_values_with_mask(image: ChartImage, bboxes: BoxesInput, y_values: Sequence[str]) -> ToolResult:
    """Paint every y-value band except those of ``y_values`` white."""
    return focus(image, bboxes, "y_values", y_values, "mask")


def focus_on_y_values_with_draw(image: ChartImage, bboxes: BoxesInput, y_values: Sequence[str]) -> ToolResult:
    """Draw a red box along the inside of each band of ``y_values``."""
    return focus(image, bboxes, "y_values", y_values, "draw")
