"""The tools by name: one registry (``TOOLS``) from which the prompt's tool list, the verl tool YAML and the
argument checks are all derived.

Each tool declares the kind of its argument (:data:`ARGUMENT_KINDS`): labels of the chart's x or y axis, or a
region of the image. The warm start demonstrates a tool's calls and the label metric reads the labels a call kept
by that kind, never by the tool's name, so a new tool is its function and its entry here.

Each tool's ``parameters`` is a JSON schema of its arguments object. verl's own schema model keeps only the
``type``, ``description`` and ``enum`` of a property (``items``, ``minItems``, ``additionalProperties`` are
dropped), so the arguments are validated here, against the full schema, by :func:`check_arguments`. The schema
checks the call's *shape* (types, required and unexpected arguments, four numbers in a box): breaking it is a
``bad_arguments`` error, a malformed call. What the values mean on a given chart (labels it has, a box inside the
image) is the tool's to check: a failed call.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError, best_match
from PIL import Image

from chartrl.config import Config, config_check
from chartrl.tools import focus, zoom
from chartrl.tools.boxes import ChartBoxes
from chartrl.tools.calls import ToolError, ToolResult
from chartrl.tools.observations import AXIS_WORDS, one_line, shown

ApplyFunction = Callable[[Image.Image, ChartBoxes, Mapping[str, Any]], ToolResult]

LABEL_AXES = {"x_labels": "x_values", "y_labels": "y_values"}
"""A label argument kind -> the bboxes axis its labels are on, which is also the argument's name in a call."""
ARGUMENT_KINDS = (*LABEL_AXES, "bbox")
"""What a tool's argument names: ``x_labels`` / ``y_labels`` (labels of the chart's x / y axis, as the chart
writes them) or ``bbox`` (a region of the image)."""


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    """What the model reads about the tool (in the prompt, and in verl's tool list)."""
    parameters: dict[str, Any]
    """JSON schema of the arguments object."""
    apply: ApplyFunction = field(repr=False)
    """(RGB image, bboxes in the contract, arguments valid under ``parameters``) -> ToolResult."""
    argument: str
    """The kind of the tool's argument, one of :data:`ARGUMENT_KINDS`."""
    edit: str | None = None
    """highlight | mask | draw for a label tool; None for zoom_in."""

    def __post_init__(self) -> None:
        if self.argument not in ARGUMENT_KINDS:
            raise ValueError(f"tool {self.name!r}: argument kind {self.argument!r} is not one of {ARGUMENT_KINDS}")

    @property
    def axis(self) -> str | None:
        """The bboxes axis a label tool selects on (``x_values`` / ``y_values``), also the name of its argument;
        None for a tool that takes no labels."""
        return LABEL_AXES.get(self.argument)

    def kept_labels(self, arguments: Mapping[str, Any]) -> list[str] | None:
        """The labels a call with these (valid) arguments keeps; None for a tool that takes no labels."""
        return None if self.axis is None else [str(v) for v in arguments[self.axis]]

    def schema(self) -> dict[str, Any]:
        """The tool in OpenAI function format, as chat templates and verl take it."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": copy.deepcopy(self.parameters),
            },
        }


# Descriptions adapted from the ReFocus tool docstrings (github.com/zeyofu/ReFocus_Code, tools.py).
_EDIT_SENTENCES = {
    "highlight": "by adding a light transparent red highlight over them",
    "mask": "by masking out (painting white) every other {word} of the chart",
    "draw": "by drawing a red box around each of them",
}
_CHART_KIND = {
    "x_values": "vertical bar charts (one band per column)",
    "y_values": "horizontal bar charts (one band per row)",
}


def _label_tool(argument: str, edit: str) -> ToolSpec:
    axis = LABEL_AXES[argument]
    word = AXIS_WORDS[axis]
    name = f"focus_on_{axis}_with_{edit}"
    function = getattr(focus, name)
    description = (
        f"Focus on some {word}s of the chart {_EDIT_SENTENCES[edit].format(word=word)}. "
        f"Especially useful for {_CHART_KIND[axis]}. Returns the edited chart."
    )
    parameters = {
        "type": "object",
        "properties": {
            axis: {
                "type": "array",
                "items": {"type": "string"},
                "description": f"The {word}s to focus on, written as the chart labels them (a non-empty list).",
            }
        },
        "required": [axis],
        "additionalProperties": False,
    }

    def apply(image: Image.Image, bboxes: ChartBoxes, arguments: Mapping[str, Any]) -> ToolResult:
        return function(image, bboxes, arguments[axis])

    return ToolSpec(
        name=name, description=description, parameters=parameters, apply=apply, argument=argument, edit=edit
    )


def _zoom_tool() -> ToolSpec:
    parameters = {
        "type": "object",
        "properties": {
            "bbox_2d": {
                "type": "array",
                "items": {"type": "number"},
                "minItems": 4,
                "maxItems": 4,
                "description": (
                    "The region as [x1, y1, x2, y2]: fractions of the image width and height in [0, 1], "
                    "top left is [0, 0], x1 < x2 and y1 < y2."
                ),
            }
        },
        "required": ["bbox_2d"],
        "additionalProperties": False,
    }

    def apply(image: Image.Image, bboxes: ChartBoxes, arguments: Mapping[str, Any]) -> ToolResult:
        return zoom.zoom_in(image, arguments["bbox_2d"])

    return ToolSpec(
        name="zoom_in",
        description=(
            "Zoom in on a region of the chart: crop the box bbox_2d and show it enlarged. "
            "Useful when the values or labels you need are too small to read. Returns the enlarged region."
        ),
        parameters=parameters,
        apply=apply,
        argument="bbox",
    )


TOOLS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        *(_label_tool(argument, edit) for argument in LABEL_AXES for edit in focus.EDITS),
        _zoom_tool(),
    )
}
"""Every tool by name: six ReFocus label tools and zoom_in."""


@config_check("tool names")
def unknown_tools(config: Config) -> list[str]:
    """``tools.names`` names tools of :data:`TOOLS` (the schema leaves the names to this registry)."""
    unknown = [name for name in config.tools.names if name not in TOOLS]
    return [
        f"config key 'tools.names': unknown tool {name!r}; known tools: {', '.join(sorted(TOOLS))} "
        "(register a new tool in chartrl.tools.registry)"
        for name in unknown
    ]


def tool_spec(name: str) -> ToolSpec:
    if name not in TOOLS:
        raise KeyError(f"unknown tool {name!r}; known tools: {', '.join(sorted(TOOLS))}")
    return TOOLS[name]


def select_tools(names: Iterable[str] | None = None) -> tuple[str, ...]:
    """``names`` checked against the registry (all tools when None), in the order given."""
    if names is None:
        return tuple(TOOLS)
    if isinstance(names, str):
        names = (names,)
    checked = tuple(names)
    for name in checked:
        tool_spec(name)
    return checked


def tool_schemas(names: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The tools ``names`` (all when None) in OpenAI function format: the one source of the prompt's tool list and
    of the verl tool YAML. Unknown names raise KeyError listing the known ones."""
    return [tool_spec(name).schema() for name in select_tools(names)]


# ----------------------------------------------------------------------------------------------------------------
# Argument checks against the JSON schema
# ----------------------------------------------------------------------------------------------------------------

_JSON_TYPES = {
    "null": "null",
    "boolean": "a boolean",
    "number": "a number",
    "string": "a string",
    "array": "an array",
    "object": "an object",
}


def json_type(value: Any) -> str:
    """The JSON type of a decoded value, with its article ('a string')."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return _JSON_TYPES["boolean"]
    if isinstance(value, int | float):
        return _JSON_TYPES["number"]
    if isinstance(value, str):
        return _JSON_TYPES["string"]
    if isinstance(value, list | tuple):
        return _JSON_TYPES["array"]
    if isinstance(value, Mapping):
        return _JSON_TYPES["object"]
    return type(value).__name__


@cache
def _validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(TOOLS[name].parameters)


def check_arguments(spec: ToolSpec, arguments: Any) -> ToolError | None:
    """None when ``arguments`` fit the tool's JSON schema, else a ``bad_arguments`` error in one line."""
    if not isinstance(arguments, Mapping):
        return ToolError(
            "bad_arguments", f"the arguments of {spec.name} must be a JSON object, got {json_type(arguments)}"
        )
    try:
        error = best_match(_validator(spec.name).iter_errors(dict(arguments)))
        if error is None:
            return None
        detail = _explain(spec, error)
    except RecursionError:  # jsonschema and its messages recurse into the value
        detail = "the arguments are nested too deeply"
    return ToolError("bad_arguments", f"bad arguments for {spec.name}: {detail}")


def _explain(spec: ToolSpec, error: ValidationError) -> str:
    path = list(error.absolute_path)
    properties = list(spec.parameters["properties"])
    if error.validator == "required":
        missing = [p for p in error.validator_value if p not in error.instance]
        return f"missing argument '{missing[0]}'"
    if error.validator == "additionalProperties":
        extra = sorted((str(p) for p in error.instance if p not in properties), key=lambda p: (len(p), p))
        return f"unexpected argument {shown(extra[0])}; {spec.name} takes only {', '.join(properties)}"
    if error.validator == "type" and len(path) == 1:
        return f"argument '{path[0]}' must be {_JSON_TYPES[error.validator_value]}, got {json_type(error.instance)}"
    if error.validator == "type" and len(path) == 2:
        wanted = _JSON_TYPES[error.validator_value].split(" ", 1)[1]
        return f"argument '{path[0]}' must hold only {wanted}s; item {path[1]} is {json_type(error.instance)}"
    if error.validator in ("minItems", "maxItems") and len(path) == 1:
        schema = spec.parameters["properties"][path[0]]
        if schema.get("minItems") == schema.get("maxItems"):
            return f"argument '{path[0]}' must hold exactly {schema['minItems']} items, got {len(error.instance)}"
    return one_line(f"argument {'/'.join(map(str, path)) or '(root)'}: {error.message}", 200)
