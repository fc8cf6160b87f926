"""The two-pass rollout: sample, execute the tool call, show the edited chart, sample the answer.

Pass 1 samples ``n`` responses per prompt and stops at ``</tool_call>`` or at the end of the turn. A tool call is
parsed and executed on the chart (a malformed or failing call gets an error observation: a model's mistake is
data), the observation is appended as a ``tool`` message and pass 2 continues the same token stream and samples
the answer. ``tools.max_tool_turns`` tool turns are allowed (default 1: two passes); no-tool series run one pass.
With ``observation="unedited"`` (the tool-placebo control) a call that ran shows the unedited chart instead of the
edited one, everything else the same (``chartrl.tools.unedited_observation``).

Tokens are built with verl's Qwen-VL Continuous Token builder: the prompt by ``build_initial_tokens``, each
assistant pass appended as sampled, each tool turn by ``merge_context_tokens`` (its text and image tokens get
loss mask 0). When a pass stops on ``</tool_call>``, the turn is closed with ``<|im_end|>`` as a boundary token
(mask 0): the layout verl sees when the model itself ends its tool-call turn.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from chartrl.config import PromptConfig, ToolsConfig
from chartrl.data.contract import Row
from chartrl.model.batching import TokenSequence
from chartrl.rollout import conversation
from chartrl.rollout.sampling import SamplingParams, sample

log = logging.getLogger(__name__)
OBSERVATIONS = ("edited", "unedited")
"""What a tool turn shows: the edited chart, or (the tool-placebo control) the unedited chart."""


@dataclass
class Episode:
    row: Row
    sample: int
    with_tools: bool
    messages: list[dict[str, Any]]
    images: list[Any]
    """The chart first, then each image a tool returned, in token order."""
    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    """1 on sampled tokens, 0 on tool text, image tokens and boundary tokens."""
    response_logprobs: list[float] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)
    tool_outcomes: list[str] = field(default_factory=list)
    tool_error_kinds: list[str] = field(default_factory=list)
    tool_call_texts: list[str] = field(default_factory=list)
    vision_tokens: int = 0
    """Completions that sampled a vision special token (cut off there, the episode ended): counted, never a crash."""
    truncated: bool = False
    done: bool = False
    observation: str = "edited"
    """``edited``, or ``unedited``: the tool-placebo control shows the original chart after a call that ran."""

    @property
    def runtime_ids(self) -> list[int]:
        return self.prompt_ids + self.response_ids

    @property
    def final_response(self) -> str:
        texts = [t["text"] for t in self.turns if t["role"] == "assistant"]
        return texts[-1] if texts else ""

    @property
    def tool_outcome(self) -> str:
        """none (no call), malformed (a call that did not parse), failed (parsed, the tool refused it or no turn
        was left), executed (every call ran)."""
        for worst in ("malformed", "failed"):
            if worst in self.tool_outcomes:
                return worst
        return "executed" if self.tool_outcomes else "none"

    @property
    def sampled_tokens(self) -> int:
        return sum(self.response_mask)


def start_episodes(
    policy, rows: Sequence[Row], *, with_tools: bool, n: int, prompt_config: PromptConfig, tools: ToolsConfig
) -> list[Episode]:
    episodes = []
    for row in rows:
        image = conversation.chart_image(row)
        text = conversation.prompt_text(row, with_tools=with_tools, prompt_config=prompt_config, tool_names=tools.names)
        messages = conversation.initial_messages(row, image, text)
        prompt_ids = policy.builder.build_initial_tokens(messages, images=[image])
        for index in range(n):
            episodes.append(
                Episode(
                    row=row,
                    sample=index,
                    with_tools=with_tools,
                    messages=list(messages),
                    images=[image],
                    prompt_ids=list(prompt_ids),
                )
            )
    return episodes


def run_episodes(
    policy,
    rows: Sequence[Row],
    *,
    with_tools: bool,
    n: int,
    params: SamplingParams,
    prompt_config: PromptConfig,
    tools: ToolsConfig,
    batch_size: int,
    stats: list[dict[str, float]] | None = None,
    observation: str = "edited",
) -> list[Episode]:
    """Roll out ``n`` episodes per row; returns them grouped by row (row-major). When ``stats`` is a list, one
    dict per generation pass is appended: sequences, prefill tokens (the whole input of each sequence), the tokens
    whose keys/values the previous pass computed for these sequences, how many of those the prefill reused
    (``params.kv_reuse``) and how many it computed again, sampled tokens, seconds (wall and this process's CPU).
    ``observation``: one of OBSERVATIONS."""
    if observation not in OBSERVATIONS:
        raise ValueError(f"unknown observation {observation!r}; valid observations: {', '.join(OBSERVATIONS)}")
    episodes = start_episodes(policy, rows, with_tools=with_tools, n=n, prompt_config=prompt_config, tools=tools)
    for episode in episodes:
        episode.observation = observation
    passes = tools.max_tool_turns + 1 if with_tools else 1
    stop_ids = [policy.ids.eos] + ([policy.ids.tool_call_end] if policy.ids.tool_call_end is not None else [])
    computed: dict[int, int] = {}  # episode index -> tokens whose keys/values the previous pass computed
    caches: dict[int, object] = {}  # episode index -> the previous pass's keys/values (params.kv_reuse)
    for turn in range(passes):
        active = [(i, e) for i, e in enumerate(episodes) if not e.done]
        if not active:
            break
        started, cpu_started = time.perf_counter(), time.process_time()
        sequences = [TokenSequence(e.runtime_ids, e.images) for _, e in active]
        sampled_all = sample(
            policy,
            sequences,
            params,
            stop_ids,
            batch_size,
            caches=[caches.pop(i, None) for i, _ in active],
            keep_cache=turn < passes - 1,
        )
        previous = sum(computed.get(i, 0) for i, _ in active)
        recomputed = reused = 0
        for (index, episode), sequence, sampled in zip(active, sequences, sampled_all, strict=True):
            reused += sampled.reused
            recomputed += max(0, computed.get(index, 0) - sampled.reused)
            computed[index] = len(sequence.ids) + sampled.fed
            apply_pass(policy, episode, sampled, last_pass=turn == passes - 1, tools=tools)
            if sampled.cache is not None and not episode.done:
                caches[index] = sampled.cache
            sampled.cache = None
        if stats is not None:
            stats.append(
                {
                    "pass": turn + 1,
                    "sequences": len(active),
                    "prefill_tokens": sum(len(s.ids) for s in sequences),
                    "previous_pass_tokens": previous,
                    "reused_prefix_tokens": reused,
                    "recomputed_prefix_tokens": recomputed,
                    "sampled_tokens": sum(len(s.ids) for s in sampled_all),
                    "seconds": time.perf_counter() - started,
                    "cpu_seconds": time.process_time() - cpu_started,
                }
            )
    return episodes


def apply_pass(policy, episode: Episode, sampled, *, last_pass: bool, tools: ToolsConfig) -> None:
    """Append one sampled pass to the episode and, when it called a tool and a turn is left, the tool turn."""
    merge = policy.builder.merge_assistant_tokens(episode.runtime_ids, sampled.ids)
    episode.response_mask, episode.response_logprobs = policy.builder.align_response_metadata(
        merge, episode.response_mask, episode.response_logprobs, assistant_logprobs=sampled.logprobs
    )
    episode.response_ids = merge.token_ids[len(episode.prompt_ids) :]
    text = policy.tokenizer.decode(sampled.ids, skip_special_tokens=True)
    episode.turns.append({"role": "assistant", "text": text, "tokens": len(sampled.ids), "stop": sampled.stop})
    if sampled.stop == "vision_token":
        episode.vision_tokens += 1
        episode.done = True
        return
    if sampled.stop == "length":
        episode.truncated = True
        episode.done = True
        return
    if not episode.with_tools or "<tool_call>" not in text:
        episode.done = True
        return
    if last_pass:  # a call with no turn left to show its result
        episode.tool_outcomes.append("failed")
        episode.tool_error_kinds.append("turn_limit")
        episode.tool_call_texts.append(text)
        episode.done = True
        return
    _tool_turn(policy, episode, text, sampled, tools)


def _tool_turn(policy, episode: Episode, text: str, sampled, tools: ToolsConfig) -> None:
    from chartrl.tools import run_tool_text, unedited_observation

    row = episode.row
    outcome = run_tool_text(text, episode.images[0], row.bboxes, tools.names, max_calls=tools.max_calls_per_turn)
    if episode.observation == "unedited":
        outcome = unedited_observation(outcome, episode.images[0])
    episode.tool_outcomes.append(outcome.outcome)
    episode.tool_error_kinds.append(outcome.error_kind or "")
    episode.tool_call_texts.append(text)
    if sampled.stop == "tool_call":  # close the turn as the model would: <|im_end|>, not trained on
        from verl.utils.tokenizer.continuous_token import MergeResult

        eos = policy.ids.eos
        merge = MergeResult(
            episode.runtime_ids + [eos], appended_token_count=0, kind="context", inserted_token_ids=[eos]
        )
        episode.response_mask, episode.response_logprobs = policy.builder.align_response_metadata(
            merge, episode.response_mask, episode.response_logprobs
        )
        episode.response_ids = merge.token_ids[len(episode.prompt_ids) :]
    previous = list(episode.messages)
    episode.messages.append(conversation.assistant_message(text, outcome.calls))
    episode.messages.append(conversation.tool_message(outcome.observation, outcome.image))
    merge = policy.builder.merge_context_tokens(
        previous + [episode.messages[-2]], episode.messages, episode.runtime_ids
    )
    episode.response_mask, episode.response_logprobs = policy.builder.align_response_metadata(
        merge, episode.response_mask, episode.response_logprobs
    )
    episode.response_ids = merge.token_ids[len(episode.prompt_ids) :]
    if outcome.image is not None:
        episode.images.append(outcome.image)
    episode.turns.append(
        {
            "role": "tool",
            "text": outcome.observation,
            "tokens": merge.appended_token_count,
            "image": outcome.image is not None,
        }
    )
