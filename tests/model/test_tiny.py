"""The tiny model: a real Qwen2.5-VL-architecture folder that the stock Auto classes and verl's token builder load."""

from __future__ import annotations

import json

import torch

from chartrl.model.tokenizer import PROTOCOL_TOKENS, SPECIAL_TOKENS


def test_the_folder_loads_with_the_stock_auto_classes(tiny_model_dir):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    model = AutoModelForImageTextToText.from_pretrained(tiny_model_dir)
    assert type(model).__name__ == "Qwen2_5_VLForConditionalGeneration"
    assert type(processor).__name__ == "Qwen2_5_VLProcessor"
    summary = json.loads((tiny_model_dir / "chartrl_model.json").read_text())
    assert 1_000_000 < summary["parameters"] < 5_000_000  # 2.4 M learned the mini task in 10 CPU-minutes


def test_protocol_tags_and_special_tokens_are_single_tokens(tiny_policy):
    tokenizer = tiny_policy.tokenizer
    for token in SPECIAL_TOKENS + PROTOCOL_TOKENS:
        assert len(tokenizer.encode(token, add_special_tokens=False)) == 1, token
    assert len(tokenizer.encode("\n", add_special_tokens=False)) == 1  # verl's Qwen builder requires it
    # protocol tags survive skip_special_tokens (they are added, not special)
    text = "<tool_call>\n{}\n</tool_call><|im_end|>"
    assert (
        tokenizer.decode(tokenizer.encode(text, add_special_tokens=False), skip_special_tokens=True)
        == "<tool_call>\n{}\n</tool_call>"
    )
    # digits split one per token, as Qwen2's pre-tokenizer does
    assert len(tokenizer.encode("2019", add_special_tokens=False)) == 4


def test_verl_builds_its_qwen_vl_token_builder_for_it(tiny_policy):
    from chartrl.model.memo import RememberingBuilder

    assert isinstance(tiny_policy.builder, RememberingBuilder)  # renders remembered, verl's builder underneath
    assert type(tiny_policy.builder.wrapped).__name__ == "QwenVLContinuousTokenBuilder"


def test_image_tokens_follow_the_processor_bounds(tiny_policy, default_config):
    from PIL import Image

    from chartrl.model.batching import image_token_count

    big = Image.new("RGB", (1600, 1200), "white")
    assert image_token_count(tiny_policy, big) <= default_config.model.max_pixels // 784
    small = Image.new("RGB", (168, 56), "white")
    assert image_token_count(tiny_policy, small) == (168 // 28) * (56 // 28)


def test_building_is_deterministic_by_seed(tmp_path, default_config):
    from safetensors.torch import load_file

    from chartrl.model.tiny import build_tiny_model

    names = list(default_config.tools.names)
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        build_tiny_model(tmp_path / name, default_config.model, names, seed=seed)
    a, b, c = (load_file(tmp_path / n / "model.safetensors") for n in "abc")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a)
    assert (tmp_path / "a/tokenizer.json").read_text() == (tmp_path / "b/tokenizer.json").read_text()
