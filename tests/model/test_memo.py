"""The warm start's remembering token builder (chartrl.model.memo): what it returns is what verl's builder returns,
for every kind of demonstration, and two conversations share an entry only when their content is the same."""

from __future__ import annotations

import dataclasses
import random

import pytest
from PIL import Image

from chartrl.model.memo import RememberingBuilder, content_key
from chartrl.warmstart import supervised


def _demos(policy, rows, config, steps):
    """The demonstrations of ``steps`` warm-start steps, built by the warm start's own ``step_demonstrations``."""
    cfg = dataclasses.replace(config.warmstart, batch_size=8)
    rng, out = random.Random("memo"), []
    text_rows = [row for row in rows if supervised.call_target(row, config.tools)]
    for step in steps:
        demos = supervised.step_demonstrations(policy, rows, text_rows, rng, step, cfg, config.prompts, config.tools)
        out += [(d.ids, d.mask, d.kind, d.outcome, [image.tobytes() for image in d.images]) for d in demos]
    return out


def test_remembered_demonstrations_are_the_builders_own(tiny_policy, synth_rows, default_config):
    steps = [0, 1, 250, 251, *range(500, 508)] * 2  # every phase, each step twice: the second time from memory
    plain = _demos(tiny_policy, synth_rows["train"], default_config, steps)
    builder = RememberingBuilder(tiny_policy.builder)
    remembered = _demos(dataclasses.replace(tiny_policy, builder=builder), synth_rows["train"], default_config, steps)
    assert remembered == plain
    assert {kind for _, _, kind, _, _ in plain} >= {"perception", "tool_correct", "tool_other", "direct"}
    assert builder.hits > 0 and builder.misses > 0


def test_a_remembered_result_is_a_copy(tiny_policy, synth_rows):
    builder = RememberingBuilder(tiny_policy.builder)
    messages = [{"role": "user", "content": [{"type": "text", "text": "How many bars?"}]}]
    first = builder.build_initial_tokens(messages, images=[])
    first.append(-1)
    assert builder.build_initial_tokens(messages, images=[]) == tiny_policy.builder.build_initial_tokens(
        messages, images=[]
    )


def test_content_keys_tell_apart_what_the_builder_would():
    chart = Image.new("RGB", (56, 28), "white")
    dot = chart.copy()
    dot.putpixel((3, 4), (0, 0, 0))
    message = {"role": "user", "content": [{"type": "image", "image": chart}, {"type": "text", "text": "Q"}]}
    assert content_key([message]) == content_key(
        [{**message, "content": [{"type": "image", "image": chart.copy()}, {"type": "text", "text": "Q"}]}]
    )
    assert content_key([message]) != content_key(
        [{**message, "content": [{"type": "image", "image": dot}, {"type": "text", "text": "Q"}]}]
    )
    assert content_key([message]) != content_key([{**message, "role": "assistant"}])
    assert content_key([1, 2]) != content_key([2, 1])
    with pytest.raises(TypeError, match="no content key"):
        content_key(object())
