"""Judges: the one scorer that does I/O, always behind an object that is passed in (never a global).

- The judge interface (``chartrl.judge.base``): :class:`Judge`, :class:`JudgeItem`, :class:`Verdict`,
  :func:`judge_batch` (a batch judged from synchronous code, one ``asyncio.run``), and :func:`log_judge_usage`.
- :data:`JUDGE_BACKENDS`: ``reference`` (offline answer equivalence, labelled "reference (not an LLM)") and
  ``openai`` (any OpenAI-compatible endpoint; async, bounded, retried, cached); the panel
  (``chartrl.judge.panel``: several judges, combined by majority, ties incorrect, or mean).
- :func:`build_judge`, :func:`build_panel`, :func:`judge_for_accuracy`: from the ``judge:`` config section.
- :func:`judge_modules`: the modules a judge built from a config loads.

A backend and the panel are loaded by name when a judge is built, so only a job that judges runs (and depends on)
their code: a rule-rewarded series imports the judge interface alone (``chartrl.fingerprint``).
"""

from __future__ import annotations

import importlib
from typing import Any

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
from chartrl.judge.usage import log_judge_usage, usage_metrics

JUDGE_BACKENDS: dict[str, tuple[str, str]] = {
    "reference": ("chartrl.judge.reference", "ReferenceJudge"),
    "openai": ("chartrl.judge.openai_judge", "OpenAIJudge"),
}
"""Backend name (``judge.backend``) -> the module and the class (with ``from_config``) that implement it."""
PANEL = ("chartrl.judge.panel", "JudgePanel")
VERDICT_CACHE = ("chartrl.judge.cache", "VerdictCache")

ACCURACY_SIGNALS = ("rule", "judge", "panel")
"""What grades a reward's answers: nothing (the rule), the judge, or the panel."""


def _loaded(module: str, name: str) -> Any:
    return getattr(importlib.import_module(module), name)


def backend(name: str) -> Any:
    """The class of judge backend ``name``; an unknown name raises, listing the valid ones."""
    if name not in JUDGE_BACKENDS:
        raise KeyError(f"unknown judge backend {name!r}; valid: {', '.join(sorted(JUDGE_BACKENDS))}")
    return _loaded(*JUDGE_BACKENDS[name])


def build_judge(config: JudgeConfig, name: str = "judge", cache: Any = None) -> Judge:
    """The single judge the top-level ``judge:`` settings describe."""
    return backend(config.backend).from_config(config, name=name, cache=cache)


def build_panel(config: JudgeConfig) -> Judge:
    """The ``judge.panel`` members (each the top-level settings with its own keys replaced), sharing one cache."""
    members = [config.member(m) for m in config.panel.members]
    cache = _loaded(*VERDICT_CACHE)(config.cache_path) if any(m.backend == "openai" for m in members) else None
    judges = [
        build_judge(settings, name=m.name, cache=cache)
        for m, settings in zip(config.panel.members, members, strict=True)
    ]
    return _loaded(*PANEL)(judges, combine=config.panel.combine)


def judge_for_accuracy(accuracy: str, config: JudgeConfig) -> Judge | None:
    """What a reward or scorer with this accuracy signal grades with: nothing for ``rule``, the judge for
    ``judge``, the panel for ``panel``."""
    if accuracy not in ACCURACY_SIGNALS:
        raise KeyError(f"unknown accuracy signal {accuracy!r}; valid: {', '.join(ACCURACY_SIGNALS)}")
    if accuracy == "judge":
        return build_judge(config)
    return build_panel(config) if accuracy == "panel" else None


def judge_modules(accuracy: str, config: JudgeConfig) -> list[str]:
    """The modules :func:`judge_for_accuracy` loads for ``accuracy`` and ``config``: a job that grades with that
    judge depends on them besides the judge interface (chartrl.workflow)."""
    if accuracy == "judge":
        return [JUDGE_BACKENDS[config.backend][0]]
    if accuracy != "panel":
        return []
    members = [config.member(m) for m in config.panel.members]
    modules = {PANEL[0], *(JUDGE_BACKENDS[m.backend][0] for m in members)}
    if any(m.backend == "openai" for m in members):
        modules.add(VERDICT_CACHE[0])
    return sorted(modules)


__all__ = [
    "ACCURACY_SIGNALS",
    "JUDGE_BACKENDS",
    "Judge",
    "JudgeConfigError",
    "JudgeItem",
    "JudgeUnavailable",
    "JudgeUsage",
    "Verdict",
    "backend",
    "build_judge",
    "build_panel",
    "judge_batch",
    "judge_for_accuracy",
    "judge_modules",
    "log_judge_usage",
    "run_sync",
    "usage_metrics",
]
