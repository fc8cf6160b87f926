"""The embedded default's policy: a tiny Qwen2.5-VL-architecture model built offline.

Same architecture class, processor and chat layout as Qwen2.5-VL-3B-Instruct (so verl's Qwen-VL token builder,
``AutoModelForImageTextToText`` and ``AutoProcessor`` treat it like the real one), at about 2 M parameters: the
size measured learnable from scratch on a 2-core CPU (a 2.38 M-parameter model read bar values off masked
168 x 56 charts after 600 s of supervised training). Weights are random (seeded); the warm start teaches the
protocol.
"""

from __future__ import annotations

import json
import logging
from importlib import resources
from pathlib import Path
from typing import Any

from chartrl.config import ModelConfig

log = logging.getLogger(__name__)

PATCH_SIZE = 14
MERGE_SIZE = 2  # 2x2 patches merge into one image token: 28 x 28 pixels per token


def chat_template() -> str:
    return resources.files("chartrl.model").joinpath("chat_template.jinja").read_text()


def build_processor(tokenizer, model: ModelConfig):
    from transformers import Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLVideoProcessor

    image_processor = Qwen2VLImageProcessor(
        min_pixels=model.min_pixels,
        max_pixels=model.max_pixels,
        patch_size=PATCH_SIZE,
        merge_size=MERGE_SIZE,
        temporal_patch_size=2,
    )
    # The video processor is unused but required: transformers' Qwen2.5-VL processor cannot be built without one
    # (construction fails unless it is passed explicitly), and it needs torchvision installed.
    return Qwen2_5_VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=Qwen2VLVideoProcessor(),
        chat_template=chat_template(),
    )


def model_config(tokenizer, tiny) -> Any:
    from transformers import Qwen2_5_VLConfig

    head_dim = tiny.hidden_size // tiny.num_attention_heads
    # M-RoPE splits head_dim / 2 rotary frequencies over (time, height, width); the sections must add up.
    half = head_dim // 2
    mrope_section = [half - 2 * (half * 3 // 8), half * 3 // 8, half * 3 // 8]
    ids = {name: tokenizer.convert_tokens_to_ids(token) for name, token in _SPECIAL_IDS.items()}
    text = {
        "vocab_size": len(tokenizer),
        "hidden_size": tiny.hidden_size,
        "intermediate_size": tiny.intermediate_size,
        "num_hidden_layers": tiny.num_hidden_layers,
        "num_attention_heads": tiny.num_attention_heads,
        "num_key_value_heads": tiny.num_key_value_heads,
        "max_position_embeddings": 8192,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": mrope_section},
        "tie_word_embeddings": True,
        "bos_token_id": None,
        "eos_token_id": ids["eos"],
        "pad_token_id": ids["pad"],
    }
    vision = {
        "depth": tiny.vision_depth,
        "hidden_size": tiny.vision_hidden_size,
        "intermediate_size": tiny.vision_intermediate_size,
        "num_heads": tiny.vision_num_heads,
        "out_hidden_size": tiny.hidden_size,
        "patch_size": PATCH_SIZE,
        "spatial_merge_size": MERGE_SIZE,
        "temporal_patch_size": 2,
        "window_size": 112,
        # every block full attention: windows buy nothing on images this small (a 168 x 56 chart is 12 merged tokens)
        "fullatt_block_indexes": list(range(tiny.vision_depth)),
    }
    return Qwen2_5_VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["image"],
        video_token_id=ids["video"],
        vision_start_token_id=ids["vision_start"],
        vision_end_token_id=ids["vision_end"],
        tie_word_embeddings=True,
    )


_SPECIAL_IDS = {
    "eos": "<|im_end|>",
    "pad": "<|endoftext|>",
    "image": "<|image_pad|>",
    "video": "<|video_pad|>",
    "vision_start": "<|vision_start|>",
    "vision_end": "<|vision_end|>",
}


def build_tiny_model(out: Path, model: ModelConfig, tool_names: list[str], seed: int | None = None) -> dict[str, Any]:
    """Train the tokenizer, build the processor and a seeded random model, save all as one HF folder."""
    import torch
    from transformers import GenerationConfig, Qwen2_5_VLForConditionalGeneration

    from chartrl.files import atomic_dir
    from chartrl.model.tokenizer import train_tokenizer

    tiny = model.tiny
    seed = tiny.seed if seed is None else seed
    tokenizer = train_tokenizer(seed, tiny.vocab_size, tool_names)
    processor = build_processor(tokenizer, model)
    config = model_config(tokenizer, tiny)
    torch.manual_seed(seed)
    policy = Qwen2_5_VLForConditionalGeneration(config)
    policy.generation_config = GenerationConfig(
        eos_token_id=config.text_config.eos_token_id, pad_token_id=config.text_config.pad_token_id, do_sample=True
    )
    n_params = sum(p.numel() for p in policy.parameters())
    summary = {
        "parameters": n_params,
        "vocab_size": len(tokenizer),
        "seed": seed,
        "max_image_tokens": model.max_pixels // (PATCH_SIZE * MERGE_SIZE) ** 2,
    }
    with atomic_dir(out) as tmp:
        policy.save_pretrained(tmp)
        processor.save_pretrained(tmp)
        (tmp / "chartrl_model.json").write_text(json.dumps(summary, indent=2) + "\n")
    log.info("tiny Qwen2.5-VL: %d parameters, vocabulary %d, saved to %s", n_params, len(tokenizer), out)
    return summary
