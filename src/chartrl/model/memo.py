"""verl's token builder with its two conversation renders remembered: ``build_initial_tokens`` and
``merge_context_tokens`` each run the Hugging Face processor over a whole conversation (the chart included), and
the warm start asks for the same few thousand conversations again and again (700 steps x 32 demonstrations drawn
from 1,500 rows).

A call is looked up by its content: every message's role, text and tool calls, and each image's mode, size and a
digest of its pixels, so two conversations share an entry only when the builder would see the same thing. What
comes back is what the builder returned the first time (the token ids copied, so a caller may change its own).
Everything else passes through to the builder.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any


def content_key(value: Any):
    """A hashable stand-in for ``value`` (messages, token ids, PIL images), equal for equal content."""
    if hasattr(value, "tobytes") and hasattr(value, "size") and hasattr(value, "mode"):  # a PIL image
        return ("image", value.mode, value.size, hashlib.blake2b(value.tobytes(), digest_size=16).digest())
    if isinstance(value, dict):
        return ("dict", tuple((key, content_key(item)) for key, item in value.items()))
    if isinstance(value, list | tuple):
        return ("list", tuple(content_key(item) for item in value))
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"no content key for a {type(value).__name__}")


class RememberingBuilder:
    """Wraps a verl Continuous Token builder; ``hits`` / ``misses`` count the lookups."""

    def __init__(self, builder):
        self._builder = builder
        self._initial: dict[Any, list[int]] = {}
        self._merges: dict[Any, Any] = {}
        self.hits = self.misses = 0

    @property
    def wrapped(self):
        """The builder whose renders are remembered."""
        return self._builder

    def __getattr__(self, name: str):
        return getattr(self._builder, name)

    def build_initial_tokens(self, messages, **kwargs) -> list[int]:
        if kwargs.get("mm_inputs_out") is not None:  # the caller wants the processor's tensors: nothing to remember
            return self._builder.build_initial_tokens(messages, **kwargs)
        key = content_key([messages, sorted(kwargs.items())])
        if key in self._initial:
            self.hits += 1
        else:
            self.misses += 1
            self._initial[key] = list(self._builder.build_initial_tokens(messages, **kwargs))
        return list(self._initial[key])

    def merge_context_tokens(self, previous_messages, updated_messages, runtime_token_ids, **kwargs):
        key = content_key([previous_messages, updated_messages, runtime_token_ids, sorted(kwargs.items())])
        if key in self._merges:
            self.hits += 1
        else:
            self.misses += 1
            self._merges[key] = self._builder.merge_context_tokens(
                previous_messages, updated_messages, runtime_token_ids, **kwargs
            )
        merge = self._merges[key]
        return dataclasses.replace(
            merge, token_ids=list(merge.token_ids), inserted_token_ids=list(merge.inserted_token_ids)
        )
