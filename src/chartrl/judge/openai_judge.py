"""The ``openai`` judge backend: any OpenAI-compatible chat-completions endpoint (OpenRouter, vLLM, SGLang, Ollama)
through the ``openai`` SDK's ``AsyncOpenAI``.

- Base URL, model and the NAME of the key's environment variable come from config; the key is read from the
  environment when requests are about to be made, handed to the SDK, and never stored, logged or cached.
- Bounded concurrency (a semaphore per batch); identical items in a batch are asked once.
- Retries with exponential backoff and jitter on 429, 408/409, 5xx, timeouts and connection errors (a server's
  Retry-After is honoured up to ``backoff_max_s``); the SDK's own retries are off so this policy is the only one.
- An unreadable reply (truncated JSON, a reply that never concludes) is retried, then counted as a judge failure
  (``Verdict.score is None``), never as "incorrect".
- JSON mode (``response_format: json_object``) when the endpoint offers it; ``json_mode: auto`` falls back to a
  final verdict line on the first 400 and stays there.
- When the transport retries run out, or the endpoint refuses us (401/403/404/other 4xx), the batch stops with
  :class:`JudgeUnavailable` naming the base URL and the key variable, after every verdict obtained so far has
  been flushed to the cache.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chartrl.judge.base import (
    LENGTH_LIMIT_VERDICT,
    JudgeConfigError,
    JudgeItem,
    JudgeUnavailable,
    JudgeUsage,
    Verdict,
    over_length,
)
from chartrl.judge.cache import VerdictCache, cache_key
from chartrl.judge.prompt import judge_prompt, template_digest
from chartrl.judge.verdict import parse_verdict

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

KIND = "LLM judge"
RETRYABLE_STATUS = frozenset({408, 409, 429})


def transient_errors() -> tuple[type[Exception], ...]:
    """APIConnectionError includes APITimeoutError; InternalServerError is every 5xx."""
    import openai

    return (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)


def malformed_body_errors() -> tuple[type[Exception], ...]:
    """A 200 whose body is not a chat completion (truncated JSON): retried like an unreadable reply."""
    import openai

    return (json.JSONDecodeError, openai.APIResponseValidationError)

DETAIL_CHARS = 300


@dataclass(frozen=True)
class _Outcome:
    """What one request came to (see :meth:`OpenAIJudge._attempt`)."""

    kind: str
    reply: str = ""
    error: Exception | None = None
    score: float | None = None


class OpenAIJudge:
    kind = KIND
    backend = "openai"

    def __init__(
        self,
        name: str,
        *,
        base_url: str,
        model: str,
        api_key_env: str,
        template: str = "judge_equivalence",
        json_mode: str = "auto",
        temperature: float = 0.0,
        max_tokens: int = 256,
        max_response_chars: int = 1000,
        max_concurrency: int = 8,
        max_retries: int = 5,
        backoff_initial_s: float = 1.0,
        backoff_max_s: float = 30.0,
        timeout_s: float = 60.0,
        cache: VerdictCache | None = None,
        rng: random.Random | None = None,
    ):
        self.name, self.base_url, self.model, self.api_key_env = name, base_url, model, api_key_env
        self.template, self.template_digest = template, template_digest(template)
        self.json_mode, self.temperature, self.max_tokens = json_mode, temperature, max_tokens
        self.max_response_chars, self.max_concurrency, self.max_retries = (
            max_response_chars,
            max_concurrency,
            max_retries,
        )
        self.backoff_initial_s, self.backoff_max_s, self.timeout_s = backoff_initial_s, backoff_max_s, timeout_s
        self.cache = cache if cache is not None else VerdictCache(None)
        self.rng = rng or random.Random()
        self.usage = JudgeUsage()
        self._json_supported = json_mode != "never"

    @classmethod
    def from_config(cls, settings, name: str = "judge", cache: VerdictCache | None = None) -> OpenAIJudge:
        return cls(
            name,
            base_url=settings.base_url,
            model=settings.model,
            api_key_env=settings.api_key_env,
            template=settings.template,
            json_mode=settings.json_mode,
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
            max_response_chars=settings.max_response_chars,
            max_concurrency=settings.max_concurrency,
            max_retries=settings.max_retries,
            backoff_initial_s=settings.backoff_initial_s,
            backoff_max_s=settings.backoff_max_s,
            timeout_s=settings.timeout_s,
            cache=cache if cache is not None else VerdictCache(settings.cache_path),
        )

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "backend": self.backend,
            "model": self.model,
            "base_url": self.base_url,
            "template": self.template,
            "template_digest": self.template_digest[:12],
        }

    # ----------------------------------------------------------------------------------------------------------

    def _key(self, item: JudgeItem) -> str:
        return cache_key(self.backend, self.model, self.template_digest, item.question, item.reference, item.response)

    async def judge_many(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        results: list[Verdict | None] = [None] * len(items)
        pending: dict[str, list[int]] = {}
        for i, item in enumerate(items):
            self.usage.verdicts += 1
            if over_length(item, self.max_response_chars):
                self.usage.length_rejections += 1
                results[i] = LENGTH_LIMIT_VERDICT
                continue
            key = self._key(item)
            if key in pending:
                pending[key].append(i)
                continue
            cached = self.cache.get(key)
            if cached is not None:
                self.usage.cache_hits += 1
                results[i] = Verdict(cached.score, "cache", cached.reply[:DETAIL_CHARS])
            else:
                pending[key] = [i]
        if pending:
            verdicts = await self._ask_all({key: items[indices[0]] for key, indices in pending.items()})
            for key, indices in pending.items():
                for i in indices:
                    results[i] = verdicts[key]
        return results  # type: ignore[return-value]  # every slot is filled above

    async def _ask_all(self, unique: dict[str, JudgeItem]) -> dict[str, Verdict]:
        import openai

        api_key = os.environ.get(self.api_key_env)
        if api_key is None:
            raise JudgeConfigError(
                f"the judge at {self.base_url} needs its key in the environment variable {self.api_key_env}, which is "
                "not set (export it; for a server without authentication set it to any value, e.g. EMPTY)"
            )
        semaphore = asyncio.Semaphore(self.max_concurrency)
        client = openai.AsyncOpenAI(base_url=self.base_url, api_key=api_key, max_retries=0, timeout=self.timeout_s)
        del api_key
        tasks = {key: asyncio.create_task(self._ask(client, semaphore, key, item)) for key, item in unique.items()}
        try:
            await asyncio.gather(*tasks.values())
        except BaseException:
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)
            raise
        finally:
            self.cache.flush()
            await client.close()
        return {key: task.result() for key, task in tasks.items()}

    async def _ask(
        self, client: openai.AsyncOpenAI, semaphore: asyncio.Semaphore, key: str, item: JudgeItem
    ) -> Verdict:
        """Ask until a verdict comes back, applying the retry policy to each failed attempt."""
        async with semaphore:
            attempt = 0
            while True:
                outcome = await self._attempt(client, item)
                if outcome.kind == "scored":
                    self._remember(key, item, outcome.score, outcome.reply)
                    return Verdict(outcome.score, "request", outcome.reply[:DETAIL_CHARS])
                if outcome.kind == "json_rejected":
                    continue  # a capability probe, not an attempt
                if outcome.kind == "refused":
                    raise self._unavailable(_describe(outcome.error), attempt) from outcome.error
                if attempt >= self.max_retries:
                    if outcome.kind == "unreadable":
                        self.usage.failures += 1
                        log.warning("judge %s: no readable verdict after %d attempts", self.name, attempt + 1)
                        return Verdict(None, "failure", f"unreadable reply: {outcome.reply[:DETAIL_CHARS]}")
                    raise self._unavailable(_describe(outcome.error), attempt) from outcome.error
                await asyncio.sleep(self._backoff(attempt, outcome.error))
                attempt += 1
                self.usage.retries += 1

    async def _attempt(self, client: openai.AsyncOpenAI, item: JudgeItem) -> _Outcome:
        """One request, classified: ``scored`` (a verdict read by :meth:`_read`), ``unreadable`` (retry, then a
        failure), ``transient`` (retry, then JudgeUnavailable), ``refused`` (JudgeUnavailable now),
        ``json_rejected``."""
        import openai

        use_json = self._json_supported
        try:
            reply = await self._request(client, self._messages(item, use_json), use_json)
        except openai.BadRequestError as err:
            if use_json and self.json_mode == "auto":
                log.info("judge %s: %s rejected JSON mode; using a verdict line", self.name, self.base_url)
                self._json_supported = False
                return _Outcome("json_rejected", error=err)
            return _Outcome("refused", error=err)
        except malformed_body_errors() as err:
            self.usage.unparseable += 1
            return _Outcome("unreadable", reply=f"malformed response body ({type(err).__name__})", error=err)
        except transient_errors() as err:
            return _Outcome("transient", error=err)
        except openai.APIStatusError as err:
            return _Outcome("transient" if err.status_code in RETRYABLE_STATUS else "refused", error=err)
        score = self._read(reply)
        if score is None:
            self.usage.unparseable += 1
            return _Outcome("unreadable", reply=reply)
        return _Outcome("scored", reply=reply, score=score)

    def _messages(self, item: JudgeItem, use_json: bool) -> list[dict[str, Any]]:
        """The chat messages of one request: the judge prompt as the user's message."""
        return [{"role": "user", "content": judge_prompt(self.template, item, use_json)}]

    def _read(self, reply: str) -> float | None:
        """The score a reply gives: 1.0 (correct), 0.0 (incorrect) or None (unreadable)."""
        correct = parse_verdict(reply)
        return None if correct is None else float(correct)

    def _remember(self, key: str, item: JudgeItem, score: float, reply: str) -> None:
        self.cache.put(
            key,
            score,
            backend=self.backend,
            model=self.model,
            template_digest=self.template_digest,
            question=item.question,
            reference=item.reference,
            response=item.response,
            reply=reply,
        )

    async def _request(self, client: openai.AsyncOpenAI, messages: list[dict[str, Any]], use_json: bool) -> str:
        extra: dict[str, Any] = {"response_format": {"type": "json_object"}} if use_json else {}
        self.usage.requests += 1
        completion = await client.chat.completions.create(
            model=self.model,
            messages=messages,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            **extra,
        )
        if completion.usage is not None:
            self.usage.prompt_tokens += completion.usage.prompt_tokens or 0
            self.usage.completion_tokens += completion.usage.completion_tokens or 0
        if not completion.choices:
            return ""
        return completion.choices[0].message.content or ""

    def _backoff(self, attempt: int, err: Exception | None) -> float:
        """Exponential backoff with "equal jitter" (half fixed, half random; Brooker, "Exponential Backoff And
        Jitter", AWS Architecture Blog, 2015), at least the server's Retry-After, capped at backoff_max_s."""
        ceiling = min(self.backoff_max_s, self.backoff_initial_s * 2**attempt)
        delay = ceiling * (0.5 + 0.5 * self.rng.random())
        retry_after = _retry_after(err)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.backoff_max_s))
        return delay

    def _unavailable(self, reason: str, attempt: int) -> JudgeUnavailable:
        cached = f"verdicts obtained so far are kept in the cache ({self.cache.path or 'in memory'})"
        return JudgeUnavailable(
            f"judge '{self.name}' at {self.base_url} (model {self.model}) failed after {attempt + 1} attempt(s): "
            f"{reason}. Check that the endpoint is up and reachable, and that the environment variable "
            f"{self.api_key_env} holds a valid key; {cached}, so a rerun resumes from them."
        )


def _describe(err: Exception) -> str:
    """The kind of failure, without the server's message (which could echo request details)."""
    status = getattr(err, "status_code", None)
    return f"{type(err).__name__}" + (f" (HTTP {status})" if status is not None else "")


def _retry_after(err: Exception | None) -> float | None:
    response = getattr(err, "response", None)
    if response is None:
        return None
    value = response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: ignore, the backoff applies
