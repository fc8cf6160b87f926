"""The values passed between the tool-call parser, the tools and the rollout: calls, errors and outcomes.

A model's mistake is data, never an exception (a malformed call must not crash a rollout): every way a tool call
can go wrong is a :class:`ToolError` whose ``kind`` is one of :data:`ERROR_KINDS`, shown to the model as one line of
text and counted by the rewards as a malformed or a failed call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from PIL import Image

from chartrl.files import storable

PARSE_ERROR_KINDS = (
    "bad_tag",  # <tool_call> tags unbalanced, unclosed or nested
    "bad_json",  # the text inside the tags is not a JSON object with "name" and "arguments"
    "unknown_tool",  # the name is not one of the tools offered
    "bad_arguments",  # the arguments do not match the tool's JSON schema (types, required, unexpected, box length)
    "too_many_calls",  # more calls than max_calls in one turn
)
"""The call is malformed: it breaks the call format or the tool's schema (reward outcome ``malformed``)."""

TOOL_ERROR_KINDS = (
    "unknown_label",  # a label the chart does not have on that axis
    "empty_selection",  # an empty list of labels
    "selects_everything",  # masking every label but all of them: nothing would be masked
    "no_boxes",  # the chart has no boxes on the tool's axis (e.g. an x tool on a horizontal bar chart)
    "bad_box",  # a zoom box outside [0, 1], inverted, non-finite, or of an aspect Qwen2-VL refuses
)
"""The call is well formed but the tool cannot do it on this chart (reward outcome ``failed``)."""

ERROR_KINDS = PARSE_ERROR_KINDS + TOOL_ERROR_KINDS

OUTCOMES = ("none", "executed", "malformed", "failed")
"""The outcome label the rewards use (the v2_shaped reward's tool term: +1 executed, -1 malformed or failed,
0 none)."""


@dataclass(frozen=True)
class ToolError:
    kind: str
    """One of ERROR_KINDS."""
    message: str
    """One line, without the ``Error:`` prefix; the observation the model sees is ``Error: <message>.``"""

    def __post_init__(self) -> None:
        if self.kind not in ERROR_KINDS:
            raise ValueError(f"unknown tool error kind {self.kind!r}; known: {', '.join(sorted(ERROR_KINDS))}")

    @property
    def observation(self) -> str:
        return storable(f"Error: {self.message.rstrip('.')}.")


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ParseResult:
    calls: tuple[ToolCall, ...]
    """The parsed calls; empty when there is no call or when ``error`` is set."""
    error: ToolError | None

    @property
    def called(self) -> bool:
        """Whether the text held a ``<tool_call>`` or ``</tool_call>`` tag (every parse error needs one)."""
        return bool(self.calls) or self.error is not None


@dataclass(frozen=True)
class ToolResult:
    ok: bool
    image: Image.Image
    """The edited image; the input image, unchanged, when ``ok`` is False."""
    applied: tuple[str, ...]
    """What the edit acted on: the chart's own labels after matching (label tools), or the pixel box that was
    cropped as ``"left,top,right,bottom"`` (zoom_in). Empty on an error."""
    error: ToolError | None
    observation: str
    """One line of text for the model, e.g. ``Masked all x values except 2019.``"""

    @classmethod
    def failed(cls, image: Image.Image, error: ToolError) -> ToolResult:
        """The result of a call the tool refused: the image unchanged, the error as the observation."""
        return cls(ok=False, image=image, applied=(), error=error, observation=error.observation)


@dataclass(frozen=True)
class ToolOutcome:
    """What happened to one assistant turn's tool calls (``run_tool_text``)."""

    called: bool
    """A <tool_call> tag was present."""
    parsed: bool
    """The calls parsed without error."""
    executed: bool
    """Every parsed call ran without error."""
    error_kind: str | None
    observation: str
    """One line for the model: the tools' observations, or the error; empty when there was no call."""
    calls: tuple[ToolCall, ...]
    results: tuple[ToolResult, ...]
    images: tuple[Image.Image, ...]
    """One edited image per call that ran, each applied to the original chart (as verl's tool loop does)."""

    @property
    def image(self) -> Image.Image | None:
        """The last edited image, or None when no tool ran."""
        return self.images[-1] if self.images else None

    @property
    def outcome(self) -> str:
        """One of OUTCOMES: none, executed, malformed (parse error) or failed (the tool reported an error)."""
        if not self.called:
            return "none"
        if not self.parsed:
            return "malformed"
        return "executed" if self.executed else "failed"
