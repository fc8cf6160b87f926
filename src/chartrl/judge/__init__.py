"""Judges: the one scorer that does I/O, always behind an object that is passed in (never a global).

- :data:`JUDGE_BACKENDS`: ``reference`` (offline answer equivalence, labelled "reference (not an LLM)") and
  ``openai`` (any OpenAI-compatible endpoint; async, bounded, retried, cached).
- :class:`JudgePanel`: several judges, combined by majority (ties incorrect) or mean.
- :func:`build_judge`, :func:`build_panel`, :func:`judge_for_accuracy`: from the ``judge:`` config section.
- :func:`judge_batch`: judge a batch from synchronous code (one ``asyncio.run``).
- :func:`log_judge_usage`: the usage counters to an MLflow run.
"""

from __future__ import annotations

from collections.abc import Callable

from chartrl.config import JudgeConfig
from chartrl.judge.base import (
    Judge,
    JudgeConfigError,
    JudgeItem,
    JudgeUnavailable,
    JudgeUsage,
    Verdict,
    judge_batch,
    run_sync,
)
from chartrl.judge.cache import VerdictCache
from chartrl.judge.openai_judge import OpenAIJudge
from chartrl.judge.panel import COMBINE, JudgePanel
from chartrl.judge.reference import ReferenceJudge, answers_equivalent
from chartrl.judge.usage import log_judge_usage, usage_metrics

JUDGE_BACKENDS: dict[str, Callable[..., Judge]] = {
    "reference": ReferenceJudge.from_config,
    "openai": OpenAIJudge.from_config,
}


def _backend(name: str) -> Callable[..., Judge]:
    if name not in JUDGE_BACKENDS:
        raise KeyError(f"unknown judge backend {name!r}; valid: {', '.join(sorted(JUDGE_BACKENDS))}")
    return JUDGE_BACKENDS[name]


def build_judge(config: JudgeConfig, name: str = "judge", cache: VerdictCache | None = None) -> Judge:
    """The single judge the top-level ``judge:`` settings describe."""
    return _backend(config.backend)(config, name=name, cache=cache)


def build_panel(config: JudgeConfig) -> JudgePanel:
    """The ``judge.panel`` members (each the top-level settings with its own keys replaced), sharing one cache."""
    members = [config.member(m) for m in config.panel.members]
    cache = VerdictCache(config.cache_path) if any(m.backend == "openai" for m in members) else None
    judges = [
        build_judge(settings, name=m.name, cache=cache)
        for m, settings in zip(config.panel.members, members, strict=True)
    ]
    return JudgePanel(judges, combine=config.panel.combine)


ACCURACY_JUDGES: dict[str, Callable[[JudgeConfig], Judge] | None] = {
    "rule": None,
    "judge": build_judge,
    "panel": build_panel,
}
"""What each ``accuracy`` option of a reward needs: nothing (the rule), the judge, or the panel."""


def judge_for_accuracy(accuracy: str, config: JudgeConfig) -> Judge | None:
    if accuracy not in ACCURACY_JUDGES:
        raise KeyError(f"unknown accuracy signal {accuracy!r}; valid: {', '.join(sorted(ACCURACY_JUDGES))}")
    build = ACCURACY_JUDGES[accuracy]
    return build(config) if build is not None else None


__all__ = [
    "ACCURACY_JUDGES",
    "COMBINE",
    "JUDGE_BACKENDS",
    "Judge",
    "JudgeConfigError",
    "JudgeItem",
    "JudgePanel",
    "JudgeUnavailable",
    "JudgeUsage",
    "OpenAIJudge",
    "ReferenceJudge",
    "Verdict",
    "VerdictCache",
    "answers_equivalent",
    "build_judge",
    "build_panel",
    "judge_batch",
    "judge_for_accuracy",
    "log_judge_usage",
    "run_sync",
    "usage_metrics",
]
