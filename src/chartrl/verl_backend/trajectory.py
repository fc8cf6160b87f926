"""What verl hands over of an episode, the decoded response text, read back into turns and a tool outcome.

verl decodes the whole response (every assistant turn and the tool turns between them) with special tokens
skipped, both for the reward function (``NaiveRewardManager.run_single``) and for its generation dumps
(``trainer.validation_data_dir``). In the ChatML layout of Qwen2.5-VL (and of the tiny model), a tool turn
ends with ``<|im_end|>\\n<|im_start|>assistant\\n``, which decodes to ``\\nassistant\\n``: the boundary where the
model's next turn starts. So a tool-series response reads::

    <model turn with <tool_call>...</tool_call>>  <tool turn: role line, observation>  \\nassistant\\n  <answer turn>

The reader splits there, then applies the local rollout's rules (``chartrl.rollout.episodes``), so both backends
score the same episode the same way:

- a turn whose call our parser rejects is ``malformed`` (verl's hermes parser drops some of these silently and
  ends the episode; ours names the mistake);
- a well-formed call is ``failed`` when the tool refused it (a label not on the chart, checked against the
  sample's boxes, or an ``Error`` observation) or when no turn was left to show its result (``turn_limit``),
  else ``executed``; with the chart at hand (:func:`read_trajectory` ``chart=``) the call is run again, which
  gives the exact error kind and the edited image (our tools are deterministic);
- the episode's outcome is the worst of its turns (malformed, then failed, then executed; none without calls).

A no-tool series (no tools offered) is one turn, whatever it holds, as in the local rollout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chartrl.tools import chart_labels, run_tool_text
from chartrl.tools.calls import PARSE_ERROR_KINDS
from chartrl.tools.protocol import CLOSE_TAG, OPEN_TAG, parse_tool_calls

NEXT_TURN = "\nassistant\n"
"""``<|im_end|>\\n<|im_start|>assistant\\n`` decoded with special tokens skipped: where the next model turn starts."""
TOOL_ROLE_LINES = ("user", "tool")
"""The role line a tool turn starts with once decoded: Qwen2.5's template puts tool results in a user turn inside
``<tool_response>`` tags, Qwen2.5-VL's stock template in a ``tool`` turn."""
TURN_LIMIT = "turn_limit"
"""Error kind of a call made with no turn left to show its result (as the local rollout counts it)."""
TOOL_REFUSED = "tool_error"
"""Error kind of a call the tool refused, when only its observation tells (no chart at hand to rerun it)."""


@dataclass(frozen=True)
class Turn:
    text: str
    """The model's text for this turn."""
    called: bool = False
    """It held a tool call (a ``<tool_call>`` or ``</tool_call>`` tag)."""
    outcome: str = "none"
    """none | executed | malformed | failed."""
    error_kind: str = ""
    """'' when the call ran (or there was none); else one of the tool error kinds or TURN_LIMIT."""
    observation: str | None = None
    """The tool turn that followed, as the model saw it (text only), None when none followed."""
    image: Any = None
    """The edited chart, when the call was run again here."""


@dataclass(frozen=True)
class Trajectory:
    turns: tuple[Turn, ...]
    calls_offered: bool = field(default=True)

    @property
    def final_response(self) -> str:
        """The last model turn: what the answer is extracted from and the format term judges."""
        return self.turns[-1].text

    @property
    def calling_turns(self) -> list[Turn]:
        return [t for t in self.turns if t.called]

    @property
    def tool_calls(self) -> int:
        """Turns that held a call (the local rollout's ``len(tool_outcomes)``)."""
        return len(self.calling_turns)

    @property
    def tool_outcome(self) -> str:
        outcomes = {t.outcome for t in self.calling_turns}
        for worst in ("malformed", "failed"):
            if worst in outcomes:
                return worst
        return "executed" if outcomes else "none"


def split_response(text: str) -> tuple[list[str], list[str]]:
    """The model's turns and the tool turns between them (raw decoded text), as described in the module doc."""
    turns, between = [], []
    rest = text
    while True:
        close = rest.find(CLOSE_TAG)
        if close < 0:
            break
        end = close + len(CLOSE_TAG)
        boundary = rest.find(NEXT_TURN, end)
        if boundary < 0:
            break
        turns.append(rest[:end])
        between.append(rest[end:boundary])
        rest = rest[boundary + len(NEXT_TURN) :]
    turns.append(rest)
    return turns, between


def observation_text(tool_turn: str) -> str:
    """The observation inside a decoded tool turn: without the role line and the ``<tool_response>`` tags."""
    text = tool_turn
    if "<tool_response>" in text:
        start = text.rfind("<tool_response>") + len("<tool_response>")
        stop = text.find("</tool_response>", start)
        return text[start : stop if stop >= 0 else None].strip()
    lines = text.strip("\n").split("\n")
    for index, line in enumerate(lines):
        if line.strip() in TOOL_ROLE_LINES:
            return "\n".join(lines[index + 1 :]).strip()
    return text.strip()


def read_trajectory(
    text: str,
    *,
    tools: Sequence[str] | None,
    bboxes: Mapping[str, Any] | str | None = None,
    max_calls: int = 1,
    chart: Any = None,
) -> Trajectory:
    """The turns of one decoded verl response and their tool outcomes. ``tools``: the tools the policy was offered
    (empty or None for a no-tool series: one turn, outcome none). ``bboxes``: the sample's boxes (the contract's
    dict or its JSON text) to check label choices; ``chart``: the chart image, to run each call again (exact error
    kinds, edited images)."""
    if not tools:
        return Trajectory((Turn(text),), calls_offered=False)
    texts, between = split_response(text)
    labels = _labels(bboxes)
    turns = []
    for index, turn_text in enumerate(texts):
        observation = observation_text(between[index]) if index < len(between) else None
        turns.append(_read_turn(turn_text, observation, tools, labels, max_calls, chart, bboxes))
    return Trajectory(tuple(turns))


def _labels(bboxes: Mapping[str, Any] | str | None) -> dict[str, list[str]] | None:
    if bboxes is None:
        return None

    return dict(chart_labels(bboxes))


def _read_turn(
    text: str,
    observation: str | None,
    tools: Sequence[str],
    labels: Mapping[str, Sequence[str]] | None,
    max_calls: int,
    chart: Any,
    bboxes: Any,
) -> Turn:
    if OPEN_TAG not in text and CLOSE_TAG not in text:
        return Turn(text, observation=observation)
    parsed = parse_tool_calls(text, tools, labels=labels, max_calls=max_calls)
    if parsed.error is not None and parsed.error.kind in PARSE_ERROR_KINDS:
        return Turn(text, True, "malformed", parsed.error.kind, observation)
    if observation is None:  # a call, and no tool turn after it: no turn was left to show its result
        return Turn(text, True, "failed", TURN_LIMIT, observation)
    if parsed.error is not None:  # a label the chart does not have, ...: the tool refuses it
        return Turn(text, True, "failed", parsed.error.kind, observation)
    if chart is not None and bboxes is not None:
        ran = run_tool_text(text, chart, bboxes, tools, max_calls=max_calls)
        if ran.executed:
            return Turn(text, True, "executed", "", observation, ran.image)
        return Turn(text, True, "failed", ran.error_kind or TOOL_REFUSED, observation)
    if observation.startswith("Error"):  # our tools' and verl's own refusals both start so
        return Turn(text, True, "failed", TOOL_REFUSED, observation)
    return Turn(text, True, "executed", "", observation)


def response_tokens(trajectory: Trajectory, tokenizer) -> int:
    """Model-sampled tokens of the episode, counted again from the text: each model turn re-encoded, plus the
    end-of-turn token the model sampled to close it. Tool turns are not counted (they are observations). A
    re-encoding can differ from the sampled tokens by a few merges; the length term reads hundreds of tokens."""
    return sum(len(tokenizer.encode(turn.text, add_special_tokens=False)) + 1 for turn in trajectory.turns)
