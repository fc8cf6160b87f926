"""The tool-call format, and its parser.

The model calls a tool the way Qwen2.5 does, in the hermes format that verl's ``tool_agent`` loop parses
(verl/experimental/agent_loop/tool_parser.py, ``HermesToolParser``)::

    <tool_call>
    {"name": "focus_on_x_values_with_mask", "arguments": {"x_values": ["2019", "2020"]}}
    </tool_call>

Text around the tags (reasoning) is ignored and whitespace inside them is allowed. The tag bodies are found as
verl's regex finds them (:func:`tag_bodies`), so both backends see the same calls; where verl silently drops a
call it cannot decode, this parser names the mistake (:data:`chartrl.tools.calls.ERROR_KINDS`), so the rewards
can count it and the model can read it. :func:`parse_tool_calls` never raises on model output: any string gives
calls or an error.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from chartrl.tools.calls import ParseResult, ToolCall, ToolError
from chartrl.tools.focus import resolve_selection
from chartrl.tools.observations import one_line, shown
from chartrl.tools.registry import check_arguments, json_type, select_tools, tool_spec

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"


def tag_bodies(text: str) -> list[str]:
    """The text between each ``<tool_call>`` and the first ``</tool_call>`` after it, left to right: what verl's
    HermesToolParser finds with ``re.findall(r"<tool_call>(.*?)</tool_call>", text, re.DOTALL)``, in linear time
    (that regex is quadratic on many opening tags with no closing one after them)."""
    bodies = []
    position = 0
    while (start := text.find(OPEN_TAG, position)) >= 0:
        end = text.find(CLOSE_TAG, start + len(OPEN_TAG))
        if end < 0:
            break
        bodies.append(text[start + len(OPEN_TAG) : end])
        position = end + len(CLOSE_TAG)
    return bodies


def format_tool_call(name: str, arguments: Mapping[str, Any]) -> str:
    """A call written the way Qwen2.5's chat template writes one (for prompts, examples and tests)."""
    body = json.dumps({"name": name, "arguments": dict(arguments)}, ensure_ascii=False)
    return f"{OPEN_TAG}\n{body}\n{CLOSE_TAG}"


def parse_tool_calls(
    text: str,
    tool_names: Iterable[str] | None = None,
    labels: Mapping[str, Sequence[str]] | None = None,
    max_calls: int = 1,
) -> ParseResult:
    """The tool calls in one assistant turn, or the first thing wrong with them.

    ``tool_names``: the tools offered (all when None); a call to any other is ``unknown_tool``.
    ``labels``: the sample's ``{"x_values": [...], "y_values": [...]}``; when given, label choices are checked
    too (unknown, empty, masking everything, no boxes on that axis), as the tool would check them.
    ``max_calls``: calls allowed in one turn; more is ``too_many_calls``.
    """
    if max_calls < 1:
        raise ValueError(f"max_calls must be at least 1, got {max_calls}")
    return _parse(text, select_tools(tool_names), labels, max_calls)


def _parse(
    text: str, offered: tuple[str, ...], labels: Mapping[str, Sequence[str]] | None, max_calls: int
) -> ParseResult:
    if not isinstance(text, str):
        raise TypeError(f"parse_tool_calls takes the model's text as a str, got {type(text).__name__}")
    opens, closes = text.count(OPEN_TAG), text.count(CLOSE_TAG)
    if opens == 0 and closes == 0:
        return ParseResult(calls=(), error=None)
    bodies = tag_bodies(text)
    tag_problem = _tag_problem(opens, closes, bodies)
    if tag_problem:
        return ParseResult(calls=(), error=ToolError("bad_tag", tag_problem))
    if len(bodies) > max_calls:
        allowed = f"at most {max_calls} call{'s' if max_calls != 1 else ''} per turn"
        return ParseResult(calls=(), error=ToolError("too_many_calls", f"{len(bodies)} tool calls; {allowed}"))
    calls = []
    for body in bodies:
        call, error = _parse_body(body, offered)
        if error is None and labels is not None:
            error = _label_problem(call, labels)
        if error:
            return ParseResult(calls=(), error=error)
        calls.append(call)
    return ParseResult(calls=tuple(calls), error=None)


def _tag_problem(opens: int, closes: int, bodies: list[str]) -> str | None:
    if any(OPEN_TAG in body for body in bodies):
        return f"a {OPEN_TAG} tag inside another {OPEN_TAG}; write one call per pair of tags"
    if opens > closes:
        return f"{OPEN_TAG} is never closed with {CLOSE_TAG}"
    if closes > opens:
        return f"{CLOSE_TAG} without an opening {OPEN_TAG}"
    if len(bodies) != opens:
        return f"{CLOSE_TAG} comes before its {OPEN_TAG}"
    return None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse_body(body: str, offered: tuple[str, ...]) -> tuple[ToolCall | None, ToolError | None]:
    try:
        value = json.loads(body.strip(), parse_constant=_reject_constant)
    except RecursionError:
        return None, ToolError("bad_json", "the tool call is not valid JSON (nested too deeply)")
    except ValueError as err:  # json.JSONDecodeError is a ValueError; so are NaN and over-long integers
        return None, ToolError("bad_json", f"the tool call is not valid JSON ({one_line(str(err), 160)})")
    if not isinstance(value, dict) or "name" not in value or "arguments" not in value:
        return None, ToolError(
            "bad_json", f'the tool call must be a JSON object with "name" and "arguments", got {_shape(value)}'
        )
    name, arguments = value["name"], value["arguments"]
    if not isinstance(name, str):
        return None, ToolError("bad_json", f'"name" must be a string, got {json_type(name)}')
    if name not in offered:
        return None, ToolError(
            "unknown_tool", f"unknown tool {shown(name)}; available tools: {', '.join(sorted(offered))}"
        )
    error = check_arguments(tool_spec(name), arguments)
    if error:
        return None, error
    return ToolCall(name=name, arguments=arguments), None


def _shape(value: Any) -> str:
    if isinstance(value, dict):
        keys = ", ".join(shown(k) for k in list(value)[:5])
        return f"an object with keys {keys}" if keys else "an empty object"
    return json_type(value)


def labels_kept(call_texts: Iterable[str]) -> list[str]:
    """The labels kept by the first call, among the turns ``call_texts`` (each parsed alone, as one call), to a tool
    whose argument is labels (the tool's declared kind, :attr:`ToolSpec.argument`); empty when there is none."""
    for text in call_texts:
        for call in parse_tool_calls(text).calls:
            kept = tool_spec(call.name).kept_labels(call.arguments)
            if kept is not None:
                return kept
    return []


def _label_problem(call: ToolCall, labels: Mapping[str, Sequence[str]]) -> ToolError | None:
    spec = tool_spec(call.name)
    if spec.axis is None:
        return None
    chart_labels = {axis: list(labels.get(axis) or ()) for axis in ("x_values", "y_values")}
    _, error = resolve_selection(spec.axis, call.arguments[spec.axis], chart_labels, spec.edit)
    return error
