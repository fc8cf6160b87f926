"""A key/value cache that appends in place: transformers' ``DynamicCache`` with each layer's keys and values kept in
a buffer that has room for the tokens still to come.

``DynamicLayer.update`` concatenates the new keys/values onto the old ones, which copies the whole cache at every
decoded token (on the miniature, a quarter of a decode step's time at 32 rows and 300 tokens of context). Here the
new tokens are written into the buffer's next free columns and the layer's ``keys`` / ``values`` are views of the
filled part, so attention reads exactly the tensors it read before (same values, same shapes, other strides) and the
logits are the same bit for bit (``tests/rollout/test_kv_reuse.py`` compares them with ``DynamicCache``'s). A buffer
that fills up is replaced by one twice as large, as a list grows.
"""

from __future__ import annotations

from typing import Any

from transformers.cache_utils import DynamicCache, DynamicLayer

RESERVE = 64
"""Columns a new buffer leaves free beyond what it holds (callers pass the tokens they will decode)."""


class AppendingLayer(DynamicLayer):
    """A ``DynamicLayer`` whose ``keys`` / ``values`` are views into buffers with free columns after them."""

    def __init__(self, reserve: int = RESERVE):
        super().__init__()
        self.reserve = reserve
        self._key_buffer = self._value_buffer = None

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        held = self.get_seq_length()
        total = held + key_states.shape[-2]
        if self._key_buffer is None or total > self._key_buffer.shape[-2]:
            capacity = max(total + self.reserve, 2 * held)
            shape = (*key_states.shape[:-2], capacity, key_states.shape[-1])
            keys, values = key_states.new_empty(shape), value_states.new_empty(shape)
            if held:
                keys[..., :held, :] = self.keys
                values[..., :held, :] = self.values
            self._key_buffer, self._value_buffer = keys, values
        self._key_buffer[..., held:total, :] = key_states
        self._value_buffer[..., held:total, :] = value_states
        self.keys = self._key_buffer[..., :total, :]
        self.values = self._value_buffer[..., :total, :]
        return self.keys, self.values

    def reorder_cache(self, beam_idx) -> None:
        """Keep the rows ``beam_idx`` names, in that order, with the free columns after them."""
        if self._key_buffer is None:
            return super().reorder_cache(beam_idx)
        held = self.get_seq_length()
        self._key_buffer = self._key_buffer.index_select(0, beam_idx)
        self._value_buffer = self._value_buffer.index_select(0, beam_idx)
        self.keys = self._key_buffer[..., :held, :]
        self.values = self._value_buffer[..., :held, :]


def appending_cache(config, reserve: int = RESERVE, data: list[tuple[Any, Any]] | None = None) -> DynamicCache:
    """A ``DynamicCache`` for ``config``'s decoder whose layers append in place, optionally holding ``data`` (per layer,
    keys and values (B, kv_heads, T, head_dim)) already. A decoder with sliding-window or other special layers gets a
    plain ``DynamicCache``: only full-attention layers have this behaviour to keep."""
    cache = DynamicCache(config=config)
    if all(type(layer) is DynamicLayer for layer in cache.layers):
        cache.layers = [AppendingLayer(reserve) for _ in cache.layers]
    if data is not None:
        for layer, (keys, values) in zip(cache.layers, data, strict=True):
            layer.update(keys, values)
    return cache
