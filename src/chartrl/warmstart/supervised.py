"""Supervised warm start: teach the tiny model the protocol (and what it can of reading charts) before RL.

Demonstrations are built from the train split with the rollout's own token builder, so they have exactly the
layout of a rollout: a tool demonstration is the prompt, a hermes tool call, the tool's real observation (the
edited chart, loss mask 0) and the answer; a direct demonstration is the prompt and the answer. Loss is on the
assistant tokens only.

Which labels a demonstrated call keeps is the question's own labels in ``correct_label_rate`` of the tool
demonstrations and random other labels in the rest, so the warm start teaches *how* to call a tool and read the
edited chart, while *which* label to keep is left for RL to learn (the label choice is what the study asks RL to
improve). A demonstration that keeps other labels answers what its edited chart shows (the kept bar's value, for
a synthetic chart whose data the row carries): every demonstrated answer after an observation is a true reading
of that observation, so perception is taught on every tool demonstration, and only the choice of label is left at
``correct_label_rate``.

The first steps (``perception_steps`` and ``text_steps``, side by side in each batch) teach what a pretrained
VLM would bring: reading a masked chart, and copying a label from the question (text demonstrations without the
chart). Then the protocol.

A warm start is a long job (700 steps, the longest of the embedded default's): with a :class:`Checkpointing`,
:func:`train_warmstart` saves what it needs to go on (weights, optimizer, the demonstration sampler's and torch's
random states, the metrics so far) every ``every`` steps, and a rerun with the same key resumes from there and ends
with the same weights bit for bit as a run that was never stopped.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chartrl import prompts
from chartrl.config import PromptConfig, ToolsConfig, WarmstartConfig
from chartrl.data.contract import Row
from chartrl.model.batching import TokenSequence, collate, length_groups, logits_at
from chartrl.model.memo import RememberingBuilder
from chartrl.progress import Progress
from chartrl.rollout import conversation
from chartrl.tools.registry import tool_spec

log = logging.getLogger(__name__)
CHECKPOINT_EVERY = 50
"""Warm-start steps between resume checkpoints (each replaces the one before: about 25 MB for the tiny model)."""
TOOL_AXIS = {"v_bar": "x_values", "h_bar": "y_values"}


@dataclasses.dataclass
class Demonstration:
    ids: list[int]
    mask: list[int]
    """1 where the model is trained (assistant tokens), 0 elsewhere."""
    images: list[Any]
    kind: str
    """direct (tool prompt, no call), tool_correct, tool_other (the call keeps other labels), tool_failed (a call a
    question needs no tool for, naming a label the chart does not have), no_tool, perception (the no-tool prompt on
    the masked chart), text_restate (which labels the question names, no chart), text_tool_correct /
    text_tool_other (the tool prompt without the chart, and a call)."""
    outcome: str | None = None
    """A demonstrated call on the chart: the tool outcome of running it (``executed``, or ``failed`` when the
    chart's boxes do not serve it: a demonstration that teaches nothing true, so it is counted)."""


def _assistant_ids(policy, text: str) -> list[int]:
    return policy.tokenizer.encode(text, add_special_tokens=False) + [policy.ids.eos]


def _call_text(name: str, axis: str, labels: Sequence[str]) -> str:
    """A call to label tool ``name``: its argument is named after its axis (``chartrl.tools.registry``)."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": {axis: list(labels)}}) + "\n</tool_call>"


def _tool_names_for(axis: str, tools: ToolsConfig) -> list[str]:
    """The configured tools whose argument is labels on ``axis`` (their declared argument kind)."""
    return [name for name in tools.names if tool_spec(name).axis == axis]


@dataclasses.dataclass(frozen=True)
class CallTarget:
    """What a demonstrated call on a row works with."""

    axis: str
    about: list[str]
    """The labels the question names."""
    labels: list[str]
    """Every label of the chart on ``axis`` (those with boxes)."""
    names: list[str]
    """The configured tools taking labels on ``axis``."""


UNNAMED_CALL_LABELS = ("none", "first_listed")
"""``warmstart.unnamed_call_label``: what a demonstrated call keeps on a bar chart whose question names none of its
labels."""


def call_target(row: Row, tools: ToolsConfig, unnamed_call_label: str = "none") -> CallTarget | None:
    """The row's call target: the labels the question names, when the chart has boxes for them all. Otherwise, with
    ``unnamed_call_label`` ``first_listed``, the first label the tool prompt lists for the chart's axis (the prompt
    lists the box labels in their order, ``conversation.axis_labels``); with ``none``, no target. None as well on a
    chart without boxes on a bar axis, or without a configured tool of its axis."""
    if unnamed_call_label not in UNNAMED_CALL_LABELS:
        raise ValueError(
            f"unknown warmstart.unnamed_call_label {unnamed_call_label!r}; valid: {', '.join(UNNAMED_CALL_LABELS)}"
        )
    axis = TOOL_AXIS.get(row.chart_type)
    if axis is None:
        return None
    about = list(row.extra.get("about") or [])
    labels = list(row.bboxes.get(axis, {}))
    names = _tool_names_for(axis, tools)
    if not (names and labels):
        return None
    if about and set(about) <= set(labels):
        return CallTarget(axis, about, labels, names)
    return CallTarget(axis, labels[:1], labels, names) if unnamed_call_label == "first_listed" else None


def serving_tools(target: CallTarget, keep: Sequence[str]) -> list[str]:
    """The tools of ``target`` that run keeping ``keep``: a mask keeping every label of the chart masks nothing and
    is refused (``selects_everything``), so it is left out then, unless it is the only tool."""
    if not set(target.labels) <= set(keep):
        return target.names
    return [name for name in target.names if tool_spec(name).edit != "mask"] or target.names


def build_demonstration(
    policy,
    row: Row,
    rng: random.Random,
    cfg: WarmstartConfig,
    prompt_config: PromptConfig,
    tools: ToolsConfig,
    perception_only: bool = False,
    correct_label_rate: float | None = None,
) -> Demonstration:
    """One demonstration of ``row``; ``correct_label_rate`` overrides the config's (the warm start's schedule)."""

    image = conversation.chart_image(row)
    if perception_only or rng.random() < cfg.perception_rate:
        return perception_demonstration(policy, row, image, prompt_config)
    with_tools = rng.random() >= cfg.no_tool_rate
    text = conversation.prompt_text(row, with_tools=with_tools, prompt_config=prompt_config, tool_names=tools.names)
    messages = conversation.initial_messages(row, image, text)
    ids = list(policy.builder.build_initial_tokens(messages, images=[image]))
    mask = [0] * len(ids)
    images = [image]
    answer = f"<answer>{row.answer}</answer>"
    target = call_target(row, tools, cfg.unnamed_call_label) if with_tools else None
    zoom = zoom_tool(row, tools) if with_tools and target is None else None
    if zoom and rng.random() < cfg.tool_rate:
        rate = cfg.correct_label_rate if correct_label_rate is None else correct_label_rate
        return zoom_demonstration(policy, row, rng, rate, tools, zoom, (messages, ids, image))
    if with_tools and target is None and not zoom and cfg.failed_call_rate and rng.random() < cfg.failed_call_rate:
        failed = failed_call(row, rng, tools)
        if failed is not None:
            ids, mask, images, outcome = tool_turn(policy, row, tools, messages, ids, image, failed)
            answer = with_habits(f"<answer>{row.answer}</answer>", row, rng, cfg, after_call=True)
            reply = _assistant_ids(policy, answer)
            return Demonstration(ids + reply, mask + [1] * len(reply), images, "tool_failed", outcome.outcome)
    if not (target and rng.random() < cfg.tool_rate):
        hedge = hedged_answer(row, rng) if cfg.hedge_rate and rng.random() < cfg.hedge_rate else None
        answer = f"<answer>{hedge or row.answer}</answer>"
        if not with_tools:  # the no-tool prompt's own reply form (a recipe's tags; <answer> for the study's)
            answer = prompts.reply(prompt_config.no_tool_template, hedge or row.answer)
        reply = _assistant_ids(policy, with_habits(answer, row, rng, cfg, after_call=False))
        kind = ("direct" if with_tools else "no_tool") + ("_hedged" if hedge else "")
        return Demonstration(ids + reply, mask + [1] * len(reply), images, kind)

    rate = cfg.correct_label_rate if correct_label_rate is None else correct_label_rate
    about = target.about
    keep = _labels_to_keep(about, target.labels, rng, rate)
    call = _call_text(rng.choice(serving_tools(target, keep)), target.axis, keep)
    ids, mask, images, outcome = tool_turn(policy, row, tools, messages, ids, image, call)
    if keep != about:
        answer = f"<answer>{_answer_shown(row, keep)}</answer>"
    reply = _assistant_ids(policy, with_habits(answer, row, rng, cfg, after_call=True))
    kind = "tool_correct" if keep == about else "tool_other"
    return Demonstration(ids + reply, mask + [1] * len(reply), images, kind, outcome.outcome)


def with_habits(answer: str, row: Row, rng: random.Random, cfg: WarmstartConfig, *, after_call: bool) -> str:
    """A demonstrated final answer with the warm start's habits drawn in: after a tool call, the question restated
    before it (``ramble_rate``), and a period after it (``format_slip_rate``). A rate of 0 draws nothing."""
    if after_call and cfg.ramble_rate and rng.random() < cfg.ramble_rate:
        answer = f"{conversation.question_of(row)} {answer}"
    if cfg.format_slip_rate and rng.random() < cfg.format_slip_rate:
        answer = f"{answer}."
    return answer


def failed_call(row: Row, rng: random.Random, tools: ToolsConfig) -> str | None:
    """A call a question needs no tool for (it names no label) and the tool refuses: a configured tool of the chart's
    axis keeping a letter the chart does not have (one of the mini charts' A-H that labels none of its bars). None
    on a chart labelled otherwise, with every letter, or without a configured tool of its axis."""
    from chartrl.data.synthchart import MINI_LETTERS

    axis = TOOL_AXIS.get(row.chart_type)
    labels = list(row.bboxes.get(axis, {})) if axis else []
    names = _tool_names_for(axis, tools) if axis else []
    missing = [letter for letter in MINI_LETTERS if letter not in labels]
    if not (names and labels and set(labels) <= set(MINI_LETTERS) and missing):
        return None
    return _call_text(rng.choice(names), axis, [rng.choice(missing)])


def hedged_answer(row: Row, rng: random.Random) -> str | None:
    """A hedge for ``row``'s answer: the true answer and another candidate in random order, joined by "or" (the
    other of Yes and No for a compare question; another bar's value for a value question); None for other
    questions, or a chart without another value."""
    qtype = row.extra.get("question_type")
    if qtype == "compare" and row.answer in ("Yes", "No"):
        other = "No" if row.answer == "Yes" else "Yes"
    elif qtype == "value" and row.extra.get("chart"):
        from chartrl.data.synthchart import format_number

        chart = row.extra["chart"]
        values = [format_number(v, chart["decimals"]) for v in chart["values"][0]]
        others = [v for v in values if v != row.answer]
        if not others:
            return None
        other = rng.choice(others)
    else:
        return None
    pair = [row.answer, other]
    rng.shuffle(pair)
    return " or ".join(pair)


def zoom_tool(row: Row, tools: ToolsConfig) -> str | None:
    """The configured tool that takes a region (``zoom_in``), when the row names the region its answer needs
    (``extra.zoom_box``, set by the zoomchart source); else None."""
    if not row.extra.get("zoom_box"):
        return None
    return next((name for name in tools.names if tool_spec(name).argument == "bbox"), None)


def zoom_demonstration(policy, row: Row, rng: random.Random, rate: float, tools: ToolsConfig, name: str, start):
    """A zoom call on the row's region (``extra.zoom_box``) in ``rate`` of the cases, else on a region of the same
    size elsewhere (which region to zoom is left to RL, as the label choice is), the tool's real observation, and
    the answer (the question's own: a zoom elsewhere still leaves the whole chart in the conversation)."""

    messages, ids, image = start
    box = [float(v) for v in row.extra["zoom_box"]]
    correct = rng.random() < rate
    if not correct:
        width, height = box[2] - box[0], box[3] - box[1]
        left, top = rng.uniform(0, 1 - width), rng.uniform(0, 1 - height)
        box = [left, top, left + width, top + height]
    call = (
        "<tool_call>\n"
        + json.dumps({"name": name, "arguments": {"bbox_2d": [round(v, 3) for v in box]}})
        + "\n</tool_call>"
    )
    ids, mask, images, outcome = tool_turn(policy, row, tools, messages, ids, image, call)
    reply = _assistant_ids(policy, f"<answer>{row.answer}</answer>")
    kind = "tool_correct" if correct else "tool_other"
    return Demonstration(ids + reply, mask + [1] * len(reply), images, kind, outcome.outcome)


def tool_turn(policy, row: Row, tools: ToolsConfig, messages, prompt_ids: list[int], image, call: str):
    """The demonstrated ``call`` after the prompt, run on the chart, and the tool's observation merged in as verl's
    token builder does: returns the token ids, their loss mask (1 on the call only), the images in token order
    and the tool's outcome."""
    from chartrl.tools import run_tool_text

    outcome = run_tool_text(call, image, row.bboxes, tools.names, max_calls=tools.max_calls_per_turn)
    call_ids = _assistant_ids(policy, call)
    with_call = prompt_ids + call_ids
    previous = messages + [conversation.assistant_message(call, outcome.calls)]
    updated = previous + [conversation.tool_message(outcome.observation, outcome.image)]
    merge = policy.builder.merge_context_tokens(previous, updated, with_call)
    mask = [0] * len(prompt_ids) + [1] * len(call_ids) + [0] * (len(merge.token_ids) - len(with_call))
    images = [image] + ([outcome.image] if outcome.image is not None else [])
    return list(merge.token_ids), mask, images, outcome


def perception_demonstration(policy, row: Row, image, prompt_config: PromptConfig) -> Demonstration:
    """The question with the no-tool prompt, on the chart as a mask keeping the question's labels shows it (the
    full chart when the question names none or the chart has no boxes for them)."""
    from chartrl.tools.focus import focus

    axis = TOOL_AXIS.get(row.chart_type)
    about = list(row.extra.get("about") or [])
    if axis and about and set(about) <= set(row.bboxes.get(axis, {})):
        edited = focus(image, row.bboxes, axis, about, "mask")
        image = edited.image if edited.ok else image
    text = conversation.prompt_text(row, with_tools=False, prompt_config=prompt_config, tool_names=())
    messages = conversation.initial_messages(row, image, text)
    ids = list(policy.builder.build_initial_tokens(messages, images=[image]))
    reply = _assistant_ids(policy, prompts.reply(prompt_config.no_tool_template, row.answer))
    return Demonstration(ids + reply, [0] * len(ids) + [1] * len(reply), [image], "perception")


RESTATE_PROMPT = "Which labels does the question name?"


def text_demonstration(
    policy,
    row: Row,
    rng: random.Random,
    cfg: WarmstartConfig,
    prompt_config: PromptConfig,
    tools: ToolsConfig,
    restate: bool,
) -> Demonstration | None:
    """A demonstration without the chart, for a row whose question names labels (None for other rows).

    ``restate``: the question and "which labels does the question name?", answered with those labels (what a
    pretrained language model brings: it can repeat a word it was given; the tiny model from scratch cannot, and
    without it never learned to put the asked label in a call). Otherwise the tool prompt without the chart and a
    call keeping the asked labels in ``correct_label_rate`` of the cases, other labels of the chart in the rest,
    as in the tool demonstrations on charts. So copying a label is learned, and which label to keep stays at
    ``correct_label_rate`` for RL to improve.
    """
    # restating asks which labels the question names: only a question that names them can be restated
    target = call_target(row, tools, "none" if restate else cfg.unnamed_call_label)
    if target is None:
        return None
    if restate:
        text, kind = f"{conversation.question_of(row)}\n{RESTATE_PROMPT}", "text_restate"
        reply_text = f"<answer>{', '.join(target.about)}</answer>"
    else:
        listed = tools.names if cfg.text_tool_list else ()  # without the tool list: a tenth of the tokens
        text = conversation.prompt_text(row, with_tools=True, prompt_config=prompt_config, tool_names=listed)
        keep = _labels_to_keep(target.about, target.labels, rng, cfg.correct_label_rate)
        reply_text = _call_text(rng.choice(target.names), target.axis, keep)
        kind = "text_tool_correct" if keep == target.about else "text_tool_other"
    messages = [{"role": "user", "content": [{"type": "text", "text": text}]}]
    ids = list(policy.builder.build_initial_tokens(messages, images=[]))
    reply = _assistant_ids(policy, reply_text)
    return Demonstration(ids + reply, [0] * len(ids) + [1] * len(reply), [], kind)


def _labels_to_keep(about: list[str], labels: list[str], rng: random.Random, correct_rate: float) -> list[str]:
    """The asked labels with probability ``correct_rate``, else as many other labels of the chart (the asked
    ones when the chart has too few others)."""
    correct = rng.random() < correct_rate
    others = [label for label in labels if label not in about]
    return about if correct or len(others) < len(about) else rng.sample(others, len(about))


def _answer_shown(row: Row, kept: Sequence[str]) -> str:
    """The answer the edited chart shows when a call kept ``kept`` instead of the asked labels; the row's own
    answer where the row does not carry the chart data to derive one."""
    from chartrl.data.synthchart import answer_about

    chart = row.extra.get("chart")
    shown = answer_about(chart, row.extra.get("question_type", ""), kept) if chart else None
    return row.answer if shown is None else shown


def lr_at(step: int, cfg: WarmstartConfig) -> float:
    """Linear warm-up, then cosine decay to lr x min_lr_ratio."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def phase_at(step: int, cfg: WarmstartConfig) -> str:
    """The kind of demonstrations at ``step``: the first perception_steps show perception demonstrations and the
    first text_steps text ones (both: half of each batch), then the protocol.

    Both are learned from the fresh model, side by side (measured on the mini default: text steps after the
    perception steps never taught copying a label; perception steps after the text steps never taught reading
    the chart; started together, both were learned)."""
    perception, text = step < cfg.perception_steps, step < cfg.text_steps
    if perception and text:
        return "perception+text"
    return "perception" if perception else "text" if text else "protocol"


def text_restating(step: int, cfg: WarmstartConfig) -> bool:
    """Whether a text step restates labels: the first text_restate_rate of the text steps do, the rest call."""
    return step < round(cfg.text_restate_rate * cfg.text_steps)


def correct_label_rate_at(step: int, cfg: WarmstartConfig) -> float:
    """The share of tool demonstrations keeping the asked labels at ``step``: correct_label_rate_start when the
    protocol phase begins, falling linearly to correct_label_rate half-way through it, then held there (so the
    warm start ends at correct_label_rate). Constant when correct_label_rate_start is null."""
    start = cfg.correct_label_rate_start
    if start is None:
        return cfg.correct_label_rate
    first = max(cfg.perception_steps, cfg.text_steps)
    remaining = max(1, cfg.steps - first)
    progress = min(1.0, max(0.0, (step - first) / (remaining / 2)))
    return start + (cfg.correct_label_rate - start) * progress


def _text_batch(policy, rows, rng, cfg, prompt_config, tools, restate: bool, n: int) -> list[Demonstration]:
    demos: list[Demonstration] = []
    while len(demos) < n:
        demo = text_demonstration(policy, rng.choice(rows), rng, cfg, prompt_config, tools, restate)
        if demo is not None:
            demos.append(demo)
    return demos


def step_demonstrations(
    policy,
    rows: Sequence[Row],
    text_rows: Sequence[Row],
    rng: random.Random,
    step: int,
    cfg: WarmstartConfig,
    prompt_config: PromptConfig,
    tools: ToolsConfig,
) -> list[Demonstration]:
    """The ``cfg.batch_size`` demonstrations of warm-start step ``step``: text demonstrations (from ``text_rows``)
    as the step's phase asks, then demonstrations on charts drawn from ``rows``."""
    phase = phase_at(step, cfg)
    n_text = {"text": cfg.batch_size, "perception+text": cfg.batch_size // 2}.get(phase, 0)
    demos = _text_batch(policy, text_rows, rng, cfg, prompt_config, tools, text_restating(step, cfg), n_text)
    perception, label_rate = phase.startswith("perception"), correct_label_rate_at(step, cfg)
    demos += [
        build_demonstration(policy, rng.choice(rows), rng, cfg, prompt_config, tools, perception, label_rate)
        for _ in range(cfg.batch_size - n_text)
    ]
    return demos


def supervised_loss(policy, demos: Sequence[Demonstration], micro_batch_size: int | None = None):
    """Mean cross-entropy over the demonstrations' assistant tokens (the output head runs on those positions only).
    With ``micro_batch_size``, the demonstrations run in groups of that many, in length order, so a short one is
    not padded to the longest of the whole batch: the same mean (up to the order of floating-point sums). A batch
    of at most ``micro_batch_size`` runs whole, in its own order, exactly as without it."""
    import torch

    groups = [list(demos)]
    if micro_batch_size is not None and micro_batch_size < len(demos):
        groups = [[demos[i] for i in rows] for rows in length_groups([len(d.ids) for d in demos], micro_batch_size)]
    total, count = None, 0
    for group in groups:
        batch = collate(policy, [TokenSequence(d.ids, d.images) for d in group], padding_side="right")
        mask = torch.zeros_like(batch["input_ids"])  # (b, T)
        for row, demo in enumerate(group):
            mask[row, : len(demo.mask)] = torch.tensor(demo.mask)
        rows, positions = mask[:, 1:].nonzero(as_tuple=True)  # (N,): position t predicts the trained token t + 1
        logits = logits_at(policy.model, batch, rows, positions).float()  # (N, V)
        targets = batch["input_ids"][rows, positions + 1]  # (N,)
        token_loss = torch.nn.functional.cross_entropy(logits, targets, reduction="sum")
        total = token_loss if total is None else total + token_loss
        count += len(targets)
    return total / max(1, count)


@dataclasses.dataclass(frozen=True)
class Checkpointing:
    """Where :func:`train_warmstart` keeps what a rerun resumes from, and what must match for it to resume."""

    folder: Path
    key: str
    """The job's inputs and settings, hashed: a checkpoint written under another key is not resumed."""
    every: int = CHECKPOINT_EVERY
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Saved with each checkpoint, returned by :func:`read_checkpoint` (the MLflow run to reopen)."""


def read_checkpoint(folder: Path, key: str) -> dict[str, Any] | None:
    """The state of the checkpoint in ``folder`` (its step, meta, metrics so far) when it was written under ``key``;
    None when there is none, or it belongs to other inputs or settings (then it is left for the next save)."""
    path = Path(folder) / "state.json"
    if not path.is_file():
        return None
    state = json.loads(path.read_text())
    if state.get("key") != key:
        log.warning("the warm-start checkpoint in %s was written for other inputs or settings: not resumed", folder)
        return None
    return state


def _save_checkpoint(checkpointing: Checkpointing, step: int, policy, optimizer, rng, history) -> None:
    import torch

    from chartrl.files import atomic_dir

    version, internal, gauss = rng.getstate()
    state = {
        "key": checkpointing.key,
        "step": step,
        "meta": checkpointing.meta,
        "rng": [version, list(internal), gauss],
        "history": history,
    }
    with atomic_dir(checkpointing.folder) as tmp:
        tensors = {"model": policy.model.state_dict(), "optimizer": optimizer.state_dict()}
        torch.save({**tensors, "torch_rng": torch.get_rng_state()}, tmp / "state.pt")
        (tmp / "state.json").write_text(json.dumps(state) + "\n")
    log.info("warm-start checkpoint at step %d written to %s", step, checkpointing.folder)


def _restore(folder: Path, state: dict[str, Any], policy, optimizer, rng) -> int:
    """Load a checkpoint into the live model, optimizer and sampler; the step to go on from."""
    import torch

    saved = torch.load(Path(folder) / "state.pt", weights_only=True)
    policy.model.load_state_dict(saved["model"])  # in place: the optimizer keeps its parameter references
    optimizer.load_state_dict(saved["optimizer"])
    torch.set_rng_state(saved["torch_rng"])
    version, internal, gauss = state["rng"]
    rng.setstate((version, tuple(internal), gauss))
    log.info("warm start resumed from step %d (%s)", state["step"], folder)
    return int(state["step"])


def train_warmstart(
    policy,
    rows: Sequence[Row],
    cfg: WarmstartConfig,
    prompt_config: PromptConfig,
    tools: ToolsConfig,
    on_step=None,
    checkpointing: Checkpointing | None = None,
) -> list[dict[str, float]]:
    """Train ``policy`` in place; returns one metrics dict per step (also passed to ``on_step``; a resumed run
    passes only the steps it runs, and returns them all). With ``checkpointing``, resumes from its checkpoint when
    one matches, and saves one every ``checkpointing.every`` steps."""
    import torch

    torch.manual_seed(cfg.seed)
    rng = random.Random(f"warmstart:{cfg.seed}")
    optimizer = torch.optim.AdamW(
        policy.model.parameters(), lr=cfg.lr, betas=(0.9, 0.98), weight_decay=cfg.weight_decay
    )
    policy.model.train()
    text_rows = [row for row in rows if call_target(row, tools, cfg.unnamed_call_label)] if cfg.text_steps else []
    restating = cfg.text_steps and cfg.text_restate_rate > 0
    if text_rows and restating and not any(call_target(row, tools) for row in text_rows):
        raise ValueError(
            "warmstart.text_restate_rate > 0 but no train row names labels (extra.about) a configured focus tool "
            "can keep, so there is no question to restate; set warmstart.text_restate_rate: 0"
        )
    if cfg.text_steps and not text_rows:
        raise ValueError(
            "warmstart.text_steps > 0 but no train row names labels (extra.about) that a configured focus tool can "
            "keep (a bar chart with boxes for them); set warmstart.text_steps: 0, or include value/compare "
            "questions on bar charts"
        )
    history: list[dict[str, float]] = []
    start = 0
    state = read_checkpoint(checkpointing.folder, checkpointing.key) if checkpointing else None
    if state is not None:
        start = _restore(checkpointing.folder, state, policy, optimizer, rng)
        history = state["history"]
    progress = Progress("warm start", cfg.steps - start, log, unit="steps")
    # demonstrations repeat (32 a step from the train rows): each conversation is rendered by the processor once
    builder = policy.builder if isinstance(policy.builder, RememberingBuilder) else RememberingBuilder(policy.builder)
    demo_policy = dataclasses.replace(policy, builder=builder)
    for step in range(start, cfg.steps):
        started = time.perf_counter()
        label_rate = correct_label_rate_at(step, cfg)
        demos = step_demonstrations(demo_policy, rows, text_rows, rng, step, cfg, prompt_config, tools)
        built = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, cfg)
        loss = supervised_loss(policy, demos, cfg.micro_batch_size)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(policy.model.parameters(), cfg.grad_clip)
        optimizer.step()
        kinds = [d.kind for d in demos]
        metrics = {
            "step": step,
            "warmstart/loss": loss.item(),
            "warmstart/grad_norm": float(grad_norm),
            "warmstart/lr": lr_at(step, cfg),
            "warmstart/correct_label_rate": label_rate,
            "warmstart/tool_demo_fraction": sum(k.startswith("tool") for k in kinds) / len(kinds),
            "warmstart/perception_demo_fraction": sum(k == "perception" for k in kinds) / len(kinds),
            "warmstart/text_demo_fraction": sum(k.startswith("text") for k in kinds) / len(kinds),
            # of the calls demonstrated on charts, the share whose tool ran on the chart's boxes
            "warmstart/demo_call_executed": _executed_share(demos),
            "warmstart/tokens": sum(len(d.ids) for d in demos),
            "timing/demos": built - started,
            "timing/update": time.perf_counter() - built,
        }
        history.append(metrics)
        if on_step:
            on_step(metrics)
        progress.advance()
        if checkpointing and (step + 1) % checkpointing.every == 0 and step + 1 < cfg.steps:
            _save_checkpoint(checkpointing, step + 1, policy, optimizer, rng, history)
        if step % 25 == 0 or step == cfg.steps - 1:
            log.info(
                "step %d/%d loss %.4f lr %.2e", step + 1, cfg.steps, metrics["warmstart/loss"], metrics["warmstart/lr"]
            )
    log.info("warm start: %d conversations rendered, %d taken from earlier steps", builder.misses, builder.hits)
    policy.model.eval()
    return history


def _executed_share(demos: Sequence[Demonstration]) -> float:
    calls = [d.outcome for d in demos if d.outcome is not None]
    return sum(outcome == "executed" for outcome in calls) / len(calls) if calls else float("nan")


def save_history(history: Sequence[dict[str, float]], path: Path) -> None:
    from chartrl.files import write_atomically

    text = "".join(json.dumps(m) + "\n" for m in history)
    write_atomically(path, lambda tmp: tmp.write_text(text))
