"""Running tool calls on a chart: one call (:func:`apply_tool_call`), or one assistant turn, parsed and run
(:func:`run_tool_text`, what the two-pass rollout calls between its passes); and the tool-placebo control's
observation (:func:`unedited_observation`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from chartrl.tools.boxes import BoxesInput, read_bboxes
from chartrl.tools.calls import ToolCall, ToolError, ToolOutcome, ToolResult
from chartrl.tools.observations import one_line, shown
from chartrl.tools.pixels import ChartImage, as_rgb
from chartrl.tools.protocol import parse_tool_calls
from chartrl.tools.registry import TOOLS, check_arguments


def apply_tool_call(image: ChartImage, bboxes: BoxesInput, call: ToolCall) -> ToolResult:
    """Run ``call`` on the chart. Never raises on what the model chose (tool name, arguments): a call the tool
    cannot run gives ``ok=False``, the image unchanged and an ``Error: ...`` observation. Raises only on
    infrastructure: an unreadable image, or bboxes outside the data contract (ChartBoxesError)."""
    chart = as_rgb(image)
    boxes = read_bboxes(bboxes)
    spec = TOOLS.get(call.name) if isinstance(call.name, str) else None
    if spec is None:
        known = ", ".join(sorted(TOOLS))
        return ToolResult.failed(
            chart, ToolError("unknown_tool", f"unknown tool {shown(call.name)}; available tools: {known}")
        )
    error = check_arguments(spec, call.arguments)
    if error:
        return ToolResult.failed(chart, error)
    return spec.apply(chart, boxes, call.arguments)


def run_tool_text(
    text: str,
    image: ChartImage,
    bboxes: BoxesInput,
    tool_names: Iterable[str] | None = None,
    max_calls: int = 1,
) -> ToolOutcome:
    """Parse one assistant turn and run its calls, each on the original chart (as verl's tool loop runs the calls
    of one turn). ``tool_names``: the tools offered (all when None)."""
    parsed = parse_tool_calls(text, tool_names, max_calls=max_calls)
    if not parsed.called:
        return ToolOutcome(False, False, False, None, "", (), (), ())
    if parsed.error:
        return ToolOutcome(True, False, False, parsed.error.kind, parsed.error.observation, (), (), ())
    chart, boxes = as_rgb(image), read_bboxes(bboxes)
    results = tuple(apply_tool_call(chart, boxes, call) for call in parsed.calls)
    failures = [r.error for r in results if r.error is not None]
    return ToolOutcome(
        called=True,
        parsed=True,
        executed=not failures,
        error_kind=failures[0].kind if failures else None,
        observation=one_line(" ".join(r.observation for r in results)),
        calls=parsed.calls,
        results=results,
        images=tuple(r.image for r in results if r.ok),
    )


def unedited_observation(outcome: ToolOutcome, image: ChartImage) -> ToolOutcome:
    """The tool-placebo control: ``outcome`` with every image a call returned replaced by the unedited chart
    (``image``), everything else as it was (the call, its outcome, its observation line; a failed or malformed
    call returned no image and stays as it is). A second pass that answers as well from this as from the edited
    chart owes its accuracy to the second look, not to the edit."""
    if not outcome.images:
        return outcome
    chart = as_rgb(image)
    return dataclasses.replace(outcome, images=tuple(chart.copy() for _ in outcome.images))


def chart_labels(bboxes: BoxesInput) -> Mapping[str, list[str]]:
    """The sample's labels per axis, as parse_tool_calls(labels=...) takes them."""
    boxes = read_bboxes(bboxes)
    return {axis: list(bands) for axis, bands in boxes.items()}
