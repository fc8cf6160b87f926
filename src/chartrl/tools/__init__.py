"""The visual tools on charts and the tool-call protocol (their verl adapters are ``chartrl.verl_backend.tools``).

The rollout imports from here::

    from chartrl.tools import TOOLS, tool_schemas, parse_tool_calls, apply_tool_call, run_tool_text

- chartrl.tools.calls         ToolCall, ToolError (ERROR_KINDS), ParseResult, ToolResult, ToolOutcome
- chartrl.tools.focus         the six ReFocus tools (highlight / mask / draw on x or y values)
- chartrl.tools.zoom          zoom_in (DeepEyes)
- chartrl.tools.pixels        the pixel edits and the zoom size rules
- chartrl.tools.registry      TOOLS (each tool's argument kind), tool_schemas, argument checks against the schemas
- chartrl.tools.protocol      the <tool_call> format and its parser
- chartrl.tools.execute       apply_tool_call, run_tool_text, unedited_observation (the tool-placebo control)
"""

from chartrl.tools.boxes import ChartBoxesError, read_bboxes
from chartrl.tools.calls import (
    ERROR_KINDS,
    OUTCOMES,
    PARSE_ERROR_KINDS,
    TOOL_ERROR_KINDS,
    ParseResult,
    ToolCall,
    ToolError,
    ToolOutcome,
    ToolResult,
)
from chartrl.tools.execute import apply_tool_call, chart_labels, run_tool_text, unedited_observation
from chartrl.tools.focus import (
    focus_on_x_values_with_draw,
    focus_on_x_values_with_highlight,
    focus_on_x_values_with_mask,
    focus_on_y_values_with_draw,
    focus_on_y_values_with_highlight,
    focus_on_y_values_with_mask,
)
from chartrl.tools.protocol import format_tool_call, labels_kept, parse_tool_calls
from chartrl.tools.registry import ARGUMENT_KINDS, TOOLS, ToolSpec, tool_schemas
from chartrl.tools.zoom import zoom_in

__all__ = [
    "ARGUMENT_KINDS",
    "ERROR_KINDS",
    "OUTCOMES",
    "PARSE_ERROR_KINDS",
    "TOOLS",
    "TOOL_ERROR_KINDS",
    "ChartBoxesError",
    "ParseResult",
    "ToolCall",
    "ToolError",
    "ToolOutcome",
    "ToolResult",
    "ToolSpec",
    "apply_tool_call",
    "chart_labels",
    "focus_on_x_values_with_draw",
    "focus_on_x_values_with_highlight",
    "focus_on_x_values_with_mask",
    "focus_on_y_values_with_draw",
    "focus_on_y_values_with_highlight",
    "focus_on_y_values_with_mask",
    "format_tool_call",
    "labels_kept",
    "parse_tool_calls",
    "read_bboxes",
    "run_tool_text",
    "tool_schemas",
    "unedited_observation",
    "zoom_in",
]
