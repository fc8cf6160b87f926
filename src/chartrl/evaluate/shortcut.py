"""The shortcut filter: train questions the starting policy answers right without a usable chart.

A question whose answer comes from its text (a prior over answers, a two-way choice named in the question) teaches
a chart policy nothing about looking, and rewards it for not looking. The filter finds such questions::

    examine   the train split, or a seeded sample of ``max_questions`` of it
    controls  each examined question without a usable chart: ``blank`` (a white image of the chart's size) and
              ``shuffled`` (another examined question's chart: ``chartrl.rollout.checks.shuffled_rows``, the
              control the validation and test checks use)
    answer    the starting policy answers each control question ``k`` times, sampled at the rollout temperature
              with the no-tool prompt (without a usable chart a tool edits nothing useful); locally here
              (:func:`sample_answers`), on verl by a verl generation job (``chartrl.verl_backend.shortcut``); both
              write the generations contract (``chartrl.rollout.generations``), one record per answer, the
              control in the id (``{row id}@{control}``)
    decide    a question answered right (``chartrl.answers.answer_accuracy``: relaxed accuracy, as every scorer)
              in at least ``threshold`` of its ``k x len(controls)`` answers is a shortcut question
    filter    shortcut questions leave the train split (``remove``) or stay with ``extra.sample_weight`` =
              ``weight`` (``downweight``); questions not examined stay as they are
    card      what was found per question type and chart type (rates with bootstrap intervals), the accuracy
              without a chart per control, and examples

The decision and the card read only the answers and the split, so they are the same code on both backends.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import random
from collections.abc import Mapping, Sequence
from typing import Any

from chartrl.answers import answer_accuracy
from chartrl.config import PromptConfig, RolloutConfig, ShortcutFilterConfig, ToolsConfig
from chartrl.data.contract import Row
from chartrl.evaluate.intervals import bootstrap_mean
from chartrl.rollout.checks import shuffled_rows
from chartrl.rollout.conversation import question_of
from chartrl.rollout.episodes import run_episodes
from chartrl.rollout.sampling import SamplingParams

log = logging.getLogger(__name__)
CONTROLS = ("blank", "shuffled")
CONTROL_SEPARATOR = "@"
SAMPLE_WEIGHT = "sample_weight"
"""The key in a row's ``extra`` that the local trainer draws its questions by (absent: 1)."""


def control_id(row_id: str, control: str) -> str:
    return f"{row_id}{CONTROL_SEPARATOR}{control}"


def split_control_id(text: str) -> tuple[str, str]:
    """``{row id}@{control}`` -> (row id, control); a row id may itself hold the separator."""
    row_id, _, control = text.rpartition(CONTROL_SEPARATOR)
    if not row_id or control not in CONTROLS:
        raise ValueError(f"{text!r} is not a shortcut-filter answer id ({{row id}}{CONTROL_SEPARATOR}{{control}})")
    return row_id, control


def examined_rows(rows: Sequence[Row], settings: ShortcutFilterConfig) -> list[Row]:
    """The questions the filter examines: all of them, or a seeded sample of ``max_questions`` (in split order)."""
    if settings.max_questions is None or settings.max_questions >= len(rows):
        return list(rows)
    chosen = set(random.Random(f"shortcut-filter:{settings.seed}").sample(range(len(rows)), settings.max_questions))
    return [row for index, row in enumerate(rows) if index in chosen]


def _blank_png(chart: bytes, cache: dict[tuple[int, int], bytes]) -> bytes:
    from PIL import Image

    with Image.open(io.BytesIO(chart)) as image:
        size = image.size
    if size not in cache:
        buffer = io.BytesIO()
        Image.new("RGB", size, "white").save(buffer, format="PNG")
        cache[size] = buffer.getvalue()
    return cache[size]


def blank_rows(rows: Sequence[Row]) -> list[Row]:
    """Each row with its chart replaced by a white image of the same size (its boxes kept: no tool is offered)."""
    cache: dict[tuple[int, int], bytes] = {}
    return [dataclasses.replace(row, images=[_blank_png(row.images[0], cache)]) for row in rows]


def control_rows(rows: Sequence[Row], settings: ShortcutFilterConfig) -> list[Row]:
    """Every examined question under every control, its id ``{row id}@{control}``, grouped by control."""
    makers = {"blank": blank_rows, "shuffled": lambda r: shuffled_rows(r, settings.seed)}
    out = []
    for control in settings.controls:
        out += [dataclasses.replace(row, id=control_id(row.id, control)) for row in makers[control](rows)]
    return out


def sample_answers(
    policy,
    rows: Sequence[Row],
    settings: ShortcutFilterConfig,
    *,
    rollout: RolloutConfig,
    prompts: PromptConfig,
    tools: ToolsConfig,
) -> list:
    """The local backend's answers: ``k`` sampled no-tool episodes per control question (row-major)."""
    import torch

    torch.manual_seed(settings.seed)
    params = SamplingParams(
        temperature=rollout.temperature,
        top_p=rollout.top_p,
        max_new_tokens=rollout.max_new_tokens,
        kv_reuse=rollout.kv_reuse,  # no tool turn here (no-tool prompt): one pass, nothing to reuse
    )
    return run_episodes(
        policy,
        control_rows(rows, settings),
        with_tools=False,
        n=settings.k,
        params=params,
        prompt_config=prompts,
        tools=tools,
        batch_size=rollout.batch_size,
    )


def answers_by_question(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, list[str]]]:
    """Generations-contract records -> row id -> control -> final responses (in sample order)."""
    out: dict[str, dict[str, list[str]]] = {}
    for record in sorted(records, key=lambda r: (r["id"], r["sample"])):
        row_id, control = split_control_id(record["id"])
        out.setdefault(row_id, {}).setdefault(control, []).append(record["final_response"])
    return out


@dataclasses.dataclass(frozen=True)
class Decision:
    row: Row
    right: Mapping[str, int]
    """Control -> answers right (of ``k``)."""
    share: float
    """Right answers over every control's answers."""
    shortcut: bool


def decide(
    rows: Sequence[Row], answers: Mapping[str, Mapping[str, Sequence[str]]], settings: ShortcutFilterConfig
) -> list[Decision]:
    """One decision per examined row: a shortcut question when its share of right answers reaches ``threshold``.
    Every examined row must have ``k`` answers under every control (a dump that lost some fails, naming them)."""
    incomplete = [
        f"{row.id} ({control}: {len(answers.get(row.id, {}).get(control, []))})"
        for row in rows
        for control in settings.controls
        if len(answers.get(row.id, {}).get(control, [])) != settings.k
    ]
    if incomplete:
        raise ValueError(
            f"the answers do not hold k = {settings.k} answers per question and control for {len(incomplete)} "
            f"question(s), e.g. {', '.join(incomplete[:5])}; on verl, prompts longer than verl.max_prompt_length "
            "are dropped (data.filter_overlong_prompts): raise it or lower model.max_pixels; else rerun the "
            "shortcut_answers job"
        )
    decisions = []
    for row in rows:
        right = {
            control: sum(answer_accuracy(text, row.answer) >= 1.0 for text in answers[row.id][control])
            for control in settings.controls
        }
        share = sum(right.values()) / (settings.k * len(settings.controls))
        decisions.append(Decision(row, right, share, share >= settings.threshold))
    return decisions


def filtered_split(rows: Sequence[Row], decisions: Sequence[Decision], settings: ShortcutFilterConfig) -> list[Row]:
    """The train split without its shortcut questions (``remove``), or with them weighted ``weight``
    (``downweight``, in ``extra.sample_weight``); questions not examined are kept as they are."""
    shortcut = {d.row.id for d in decisions if d.shortcut}
    if settings.mode == "remove":
        return [row for row in rows if row.id not in shortcut]
    return [
        dataclasses.replace(row, extra={**row.extra, SAMPLE_WEIGHT: settings.weight}) if row.id in shortcut else row
        for row in rows
    ]


def _group(decisions: Sequence[Decision], key, settings: ShortcutFilterConfig, interval) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[Decision]] = {}
    for decision in decisions:
        groups.setdefault(key(decision.row), []).append(decision)
    return {name: _summary(members, settings, interval) for name, members in sorted(groups.items())}


def _summary(decisions: Sequence[Decision], settings: ShortcutFilterConfig, interval) -> dict[str, Any]:
    return {
        "examined": len(decisions),
        "shortcut": sum(d.shortcut for d in decisions),
        "shortcut_rate": interval([float(d.shortcut) for d in decisions]),
        "accuracy_without_chart": {
            control: interval([d.right[control] / settings.k for d in decisions]) for control in settings.controls
        },
    }


def shortcut_card(
    dataset: str,
    rows: Sequence[Row],
    decisions: Sequence[Decision],
    answers: Mapping[str, Mapping[str, Sequence[str]]],
    settings: ShortcutFilterConfig,
    *,
    kept: int,
    bootstrap_samples: int,
    confidence: float,
    seed: int,
    backend: str,
) -> dict[str, Any]:
    """What the filter found: counts, the shortcut rate and the accuracy without a chart (each per control,
    question mean of its ``k`` answers) overall, per question type and per chart type, each with its bootstrap
    interval over the examined questions, and ``settings.examples`` shortcut questions with their answers."""
    def interval(values: Sequence[float]) -> dict[str, float | None]:
        return bootstrap_mean(values, samples=bootstrap_samples, confidence=confidence, seed=seed)

    shortcut = [d for d in decisions if d.shortcut]
    examples = [
        {
            "id": d.row.id,
            "question": question_of(d.row),
            "answer": d.row.answer,
            "question_type": str(d.row.extra.get("question_type", "unknown")),
            "chart_type": d.row.chart_type,
            "share_right": d.share,
            "answers": {control: list(answers[d.row.id][control]) for control in settings.controls},
        }
        for d in shortcut[: settings.examples]
    ]
    return {
        "dataset": dataset,
        "backend": backend,
        "settings": dataclasses.asdict(settings),
        "rows": len(rows),
        "examined": len(decisions),
        "not_examined": len(rows) - len(decisions),
        "shortcut": len(shortcut),
        "removed": len(shortcut) if settings.mode == "remove" else 0,
        "downweighted": len(shortcut) if settings.mode == "downweight" else 0,
        "rows_after": kept,
        "overall": _summary(decisions, settings, interval),
        "by_question_type": _group(
            decisions, lambda r: str(r.extra.get("question_type", "unknown")), settings, interval
        ),
        "by_chart_type": _group(decisions, lambda r: r.chart_type, settings, interval),
        "examples": examples,
    }


def card_metrics(card: Mapping[str, Any]) -> dict[str, float]:
    """The card as MLflow metrics: counts, and the shortcut rate overall and per question and chart type."""
    import re

    unsafe = re.compile(r"[^A-Za-z0-9_\-. /:]")
    metrics = {key: float(card[key]) for key in ("rows", "examined", "shortcut", "removed", "downweighted")}
    metrics["shortcut_rate"] = card["overall"]["shortcut_rate"]["mean"] or 0.0
    for group in ("by_question_type", "by_chart_type"):
        for name, summary in card[group].items():
            metrics[f"{group}/{unsafe.sub('_', name)}/shortcut_rate"] = summary["shortcut_rate"]["mean"]
    return metrics
