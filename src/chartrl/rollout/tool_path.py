"""The tool-path check: every configured label tool, on every chart of a dataset that it applies to, called with
a scripted call built from the chart's own label boxes, run through the rollout's own tool turn and second pass.

It is not the policy: no call here is sampled. It shows that the path a policy's call takes works on these charts
(the boxes the data stage stored, the labels the tool prompt lists, the tools, the edited image in the tool turn and
the second pass that reads it), so that a policy that never calls a tool, or calls one wrongly, is told apart from
a tool path that cannot run. The rehearsal runs it (``evaluate.tool_path_check``).

For each chart (the first question of each distinct chart: its image and boxes) and each configured tool whose
argument is labels on an axis the chart has boxes for, the call is the one the tool prompt asks for
(``prompts/tool_use.jinja``): ``<tool_call>{"name": ..., "arguments": {axis: [label]}}</tool_call>``, keeping the
first label the prompt lists for that axis (``conversation.axis_labels``), written as the chart writes it. Its token
ids stand in for a sampled first pass (stopped on ``</tool_call>``) and go through
:func:`chartrl.rollout.episodes.apply_pass`, which runs the call (``run_tool_text``), merges the tool message with
the edited chart into the token stream, and appends the image; then one greedy token of the second pass is sampled
on the whole sequence (:func:`chartrl.rollout.sampling.sample`: the processor's image tokens of both charts through
the model's vision tower). A mask keeping the only label of an axis masks nothing and is refused by design, so a
mask applies to charts with two labels or more on its axis. A tool taking a region (``zoom_in``) is not checked.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from chartrl.config import PromptConfig, ToolsConfig
from chartrl.data.contract import Row
from chartrl.errors import ChartrlError
from chartrl.model.batching import TokenSequence
from chartrl.rollout import conversation
from chartrl.rollout.episodes import Episode, apply_pass, start_episodes
from chartrl.rollout.sampling import Sampled, SamplingParams, sample
from chartrl.tools.registry import tool_spec


class ToolPathError(ChartrlError):
    """A configured tool failed on a chart it applies to: the message names each chart and tool."""


@dataclass(frozen=True)
class ScriptedCall:
    """One call of the check: a tool on a chart, keeping ``label``."""

    split: str
    chart: str
    """The chart's image name (``extra.imgname``), else its first question's id."""
    tool: str
    axis: str
    label: str
    row: Row

    @property
    def text(self) -> str:
        """The call as the tool prompt asks the model to write it."""
        body = json.dumps({"name": self.tool, "arguments": {self.axis: [self.label]}}, ensure_ascii=False)
        return f"<tool_call>{body}</tool_call>"


def chart_name(row: Row) -> str:
    return str(row.extra.get("imgname") or row.id)


def distinct_charts(rows: Iterable[Row]) -> list[Row]:
    """The first question of each chart, in split order (charts told apart by their image bytes)."""
    seen: set[bytes] = set()
    charts = []
    for row in rows:
        if row.images and row.images[0] not in seen:
            seen.add(row.images[0])
            charts.append(row)
    return charts


def scripted_calls(split: str, rows: Iterable[Row], tool_names: Sequence[str]) -> tuple[list[ScriptedCall], int]:
    """The check's calls on a split's charts, and how many (chart, label tool) pairs do not apply (no boxes on the
    tool's axis, or a mask on an axis with one label)."""
    calls, not_applicable = [], 0
    for row in distinct_charts(rows):
        labels = conversation.axis_labels(row)
        for name in tool_names:
            spec = tool_spec(name)
            if spec.axis is None:
                continue
            listed = labels.get(spec.axis) or []
            if not listed or (spec.edit == "mask" and len(listed) < 2):
                not_applicable += 1
                continue
            calls.append(ScriptedCall(split, chart_name(row), name, spec.axis, listed[0], row))
    return calls, not_applicable


def _scripted_pass(policy, call: ScriptedCall) -> Sampled:
    """The call's tokens as a first pass that stopped on ``</tool_call>``, as the sampler returns one."""
    ids = policy.tokenizer.encode(call.text, add_special_tokens=False)
    if policy.ids.tool_call_end is None or ids[-1] != policy.ids.tool_call_end:
        raise ChartrlError(
            f"the tokenizer does not end {call.text!r} on its </tool_call> token: the rollout's first pass could "
            "never stop on a call (load the processor saved with this model)"
        )
    return Sampled(ids=ids, logprobs=[0.0] * len(ids), stop="tool_call")


def _problem(call: ScriptedCall, episode: Episode) -> str | None:
    """What went wrong on the tool turn of ``episode``, or None."""
    import numpy as np

    outcome = episode.tool_outcomes[0] if episode.tool_outcomes else "none"
    if outcome != "executed":
        kind = episode.tool_error_kinds[0] if episode.tool_error_kinds else ""
        tool_turn = next((t["text"] for t in episode.turns if t["role"] == "tool"), "")
        return f"{outcome} ({kind}): {tool_turn}"
    if len(episode.images) != 2:
        return f"the tool turn added {len(episode.images) - 1} images, not the edited chart"
    if np.array_equal(np.asarray(episode.images[0]), np.asarray(episode.images[1])):
        return "the call ran but the edited chart is the chart unchanged"
    return None


def check_tool_path(
    policy,
    splits: dict[str, Sequence[Row]],
    *,
    prompt_config: PromptConfig,
    tools: ToolsConfig,
    batch_size: int,
) -> dict[str, Any]:
    """Run the check on every split's charts. Returns ``{"tools": {name: {"charts", "executed", "failed"}},
    "splits": {split: {name: {...}}}, "not_applicable", "failures": [...]}`` (``failures``: chart, split, tool,
    label and what went wrong) and, per label axis, how many test charts have boxes on it and how many of those
    share a label with a train chart (``test_labels_seen_in_train``)."""
    calls, not_applicable = [], 0
    for split, rows in splits.items():
        found, skipped = scripted_calls(split, rows, tools.names)
        calls += found
        not_applicable += skipped
    episodes: list[Episode] = []
    for _, group in groupby(calls, key=lambda call: (call.split, call.row.id)):
        group = list(group)  # one chart's calls: its prompt built once, an episode per call
        started = start_episodes(
            policy, [group[0].row], with_tools=True, n=len(group), prompt_config=prompt_config, tools=tools
        )
        for call, episode in zip(group, started, strict=True):
            apply_pass(policy, episode, _scripted_pass(policy, call), last_pass=False, tools=tools)
        episodes += started
    problems = [_problem(call, episode) for call, episode in zip(calls, episodes, strict=True)]
    ran = [(c, e) for c, e, problem in zip(calls, episodes, problems, strict=True) if problem is None]
    _second_pass(policy, ran, batch_size)
    out: dict[str, Any] = {
        "tools": {},
        "splits": {},
        "not_applicable": not_applicable,
        "failures": [],
        "test_labels_seen_in_train": labels_seen_in_train(splits),
    }
    for call, problem in zip(calls, problems, strict=True):
        for count in (
            out["tools"].setdefault(call.tool, _empty()),
            out["splits"].setdefault(call.split, {}).setdefault(call.tool, _empty()),
        ):
            count["charts"] += 1
            count["executed"] += problem is None
            count["failed"] += problem is not None
        if problem is not None:
            out["failures"].append(
                {"split": call.split, "chart": call.chart, "tool": call.tool, "label": call.label, "problem": problem}
            )
    for name in tools.names:
        if tool_spec(name).axis is not None:
            out["tools"].setdefault(name, _empty())
    return out


def _second_pass(policy, ran: Sequence[tuple[ScriptedCall, Episode]], batch_size: int) -> None:
    """One greedy token after each tool turn, on the whole sequence (both charts through the vision tower), each
    chart's prompt prefilled once for its calls as a rollout group's is (``kv_reuse``). An error here is the image
    path's: it names the calls of the batch it broke on."""
    params = SamplingParams(max_new_tokens=1, greedy=True, kv_reuse=True)
    stop_ids = [policy.ids.eos] + ([policy.ids.tool_call_end] if policy.ids.tool_call_end is not None else [])
    for start in range(0, len(ran), batch_size):
        batch = ran[start : start + batch_size]
        try:
            sample(policy, [TokenSequence(e.runtime_ids, e.images) for _, e in batch], params, stop_ids, batch_size)
        except (RuntimeError, ValueError, IndexError) as err:
            named = ", ".join(f"{c.tool} on {c.chart}" for c, _ in batch)
            raise ToolPathError(f"the second pass after the tool turn failed ({err}) on a batch of: {named}") from err


def _empty() -> dict[str, int]:
    return {"charts": 0, "executed": 0, "failed": 0}


def labels_seen_in_train(splits: dict[str, Sequence[Row]]) -> dict[str, dict[str, int]]:
    """Per label axis: the test split's charts with boxes on it (``charts``) and those with a label that some train
    chart has on the same axis (``sharing_a_train_label``): a policy that names labels it learned on the train
    charts can run a tool on the others only by copying an unseen label from the prompt's list."""
    seen: dict[str, set[str]] = {}
    for row in distinct_charts(splits.get("train", ())):
        for axis, labels in conversation.axis_labels(row).items():
            seen.setdefault(axis, set()).update(labels)
    out: dict[str, dict[str, int]] = {}
    for row in distinct_charts(splits.get("test", ())):
        for axis, labels in conversation.axis_labels(row).items():
            if labels:
                count = out.setdefault(axis, {"charts": 0, "sharing_a_train_label": 0})
                count["charts"] += 1
                count["sharing_a_train_label"] += bool(set(labels) & seen.get(axis, set()))
    return dict(sorted(out.items()))


def raise_on_failures(result: dict[str, Any]) -> None:
    """Fail naming every chart and tool that failed (the check's JSON is written first)."""
    failures = result["failures"]
    if not failures:
        return
    lines = [
        f"{f['tool']} on chart {f['chart']} ({f['split']} split), keeping {f['label']!r}: {f['problem']}"
        for f in failures
    ]
    raise ToolPathError(
        f"the tool-path check failed on {len(failures)} call(s) of tools on charts they apply to:\n  "
        + "\n  ".join(lines)
    )
