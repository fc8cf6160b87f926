"""An external scorer of sampled responses for best-of-N reranking: a process reward model (VisualPRM-style) or any
chat model served behind an OpenAI-compatible endpoint (``vllm serve <model>``), asked for a score in [0, 1].

It is the ``openai`` judge client with a different question, so it keeps that client's contract: the key read from
the environment variable the config names (never stored or logged), bounded concurrency, retries with backoff on
429/5xx/timeouts and on unreadable replies, a persistent cache, usage counters, and :class:`JudgeUnavailable`
naming the endpoint when it stays down. What differs:

- the request carries the chart (a PNG data URL, as vLLM's OpenAI server takes images) and the candidate's whole
  response under the template ``rerank_score`` (src/chartrl/prompts/rerank_score.jinja); no reference answer is
  ever sent: a reranker must not see the truth;
- the reply is read as a score (:func:`parse_score`): a ``{"score": p}`` JSON object or a final ``SCORE: p`` line,
  ``p`` a number in [0, 1] (a percentage ``85%`` is read as 0.85); anything else is unreadable, retried, then a
  scorer failure (``Verdict.score is None``), which ranks the candidate below every scored one;
- the cache key holds the chart's sha256 in the place of the judge's reference answer, and the backend name
  ``openai_scorer``, so a judge verdict and a score never share an entry.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from typing import Any

from chartrl import prompts
from chartrl.judge.base import JudgeItem
from chartrl.judge.openai_judge import OpenAIJudge
from chartrl.judge.prompt import quote_data
from chartrl.judge.verdict import json_objects

KIND = "external scorer (OpenAI-compatible endpoint)"
_NUMBER = r"([-+]?\d+(?:\.\d+)?|[-+]?\.\d+)\s*(%?)"
_LINE = re.compile(r"^[\s>*_#`-]*score[\s*_`]*[:=][\s*_`\"']*" + _NUMBER + r"[\s*_`\"'.!]*$", re.IGNORECASE)


@dataclass(frozen=True)
class ScoreItem:
    """One sampled response to score: the question, the response (every assistant pass and tool observation),
    the chart as PNG bytes (None: text only)."""

    question: str
    response: str
    image: bytes | None = None

    @property
    def reference(self) -> str:
        """What stands in the cache's reference column: the chart's digest (the truth is never sent)."""
        return "image sha256:" + (hashlib.sha256(self.image).hexdigest() if self.image is not None else "none")


def _unit_score(value: Any, percent: bool = False) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    if percent:
        number /= 100
    return number if 0.0 <= number <= 1.0 else None


def parse_score(reply: str) -> float | None:
    """The score in [0, 1] a reply gives (the last ``{"score": p}`` object, else the last ``SCORE: p`` line), or
    None when it gives none or one outside [0, 1]."""
    for value in reversed(json_objects(reply)):
        if isinstance(value, dict) and "score" in value:
            raw = value["score"]
            if isinstance(raw, str) and raw.strip().endswith("%"):
                return _unit_score(raw.strip()[:-1], percent=True)
            return _unit_score(raw)
    for line in reversed(reply.strip().splitlines()):
        match = _LINE.match(line)
        if match:
            return _unit_score(match.group(1), percent=bool(match.group(2)))
    return None


class OpenAIScorer(OpenAIJudge):
    """Scores sampled responses in [0, 1] through an OpenAI-compatible endpoint (see the module docstring)."""

    kind = KIND
    backend = "openai_scorer"

    def __init__(self, name: str, *, template: str = "rerank_score", **settings: Any):
        super().__init__(name, template=template, **settings)

    @classmethod
    def from_rerank(cls, settings, cache=None) -> OpenAIScorer:
        """From an eval series' ``rerank.scorer`` settings (chartrl.config.RerankScorerConfig): the judge's client
        settings, under the name ``rerank_scorer``."""
        return cls.from_config(settings, "rerank_scorer", cache)

    def _messages(self, item: JudgeItem, use_json: bool) -> list[dict[str, Any]]:
        text = prompts.render(
            self.template, question=quote_data(item.question), response=quote_data(item.response), json_mode=use_json
        )
        image = getattr(item, "image", None)
        if image is None:
            return [{"role": "user", "content": text}]
        url = "data:image/png;base64," + base64.b64encode(image).decode("ascii")
        return [
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": text}],
            }
        ]

    def _read(self, reply: str) -> float | None:
        return parse_score(reply)
