"""Loading a policy (model + processor) and the token ids the rollout and trainer need.

The token layout of a conversation is built with verl's own Continuous Token builder for Qwen-VL
(``verl.utils.tokenizer.continuous_token_wiring.create_continuous_token_builder``), the code verl's
``tool_agent`` loop uses, so a policy trained by the local backend sees the tokens it would see under verl.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chartrl.model.memo import RememberingBuilder
from chartrl.model.vision import share_image_features
from chartrl.threads import use_threads

log = logging.getLogger(__name__)

VISION_SPECIAL_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")


@dataclass(frozen=True)
class TokenIds:
    eos: int
    """``<|im_end|>``: the end of a turn."""
    pad: int
    image_pad: int
    tool_call_end: int | None
    """``</tool_call>`` when it is a single token (it is for the tiny model and Qwen2.5)."""
    vision: frozenset[int]
    """Vision special tokens a completion must never contain (they would desynchronise images and tokens)."""


@dataclass
class Policy:
    model: Any
    processor: Any
    builder: Any
    ids: TokenIds
    path: str

    @property
    def tokenizer(self):
        return self.processor.tokenizer


def _single_token(tokenizer, text: str) -> int | None:
    ids = tokenizer.encode(text, add_special_tokens=False)
    return ids[0] if len(ids) == 1 else None


def token_ids(tokenizer) -> TokenIds:
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    vision = frozenset(
        i for i in (tokenizer.convert_tokens_to_ids(t) for t in VISION_SPECIAL_TOKENS) if i is not None and i >= 0
    )
    return TokenIds(
        eos=eos,
        pad=pad,
        image_pad=tokenizer.convert_tokens_to_ids("<|image_pad|>"),
        tool_call_end=_single_token(tokenizer, "</tool_call>"),
        vision=vision,
    )


def load_policy(path: str | Path, *, threads: int | None = None, train: bool = False) -> Policy:
    """Load a Qwen2.5-VL folder (or hub id) with its processor and verl's Qwen-VL token builder."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor
    from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

    if threads:
        use_threads(threads)
    processor = AutoProcessor.from_pretrained(str(path))
    adapter = Path(path) / "adapter_config.json"
    if adapter.exists():  # a LoRA checkpoint: the base model it was trained on, plus the adapter
        import json

        from peft import PeftModel

        base_path = json.loads(adapter.read_text())["base_model_name_or_path"]
        base = AutoModelForImageTextToText.from_pretrained(base_path, dtype=torch.float32)
        model = PeftModel.from_pretrained(base, str(path), is_trainable=train)
    else:
        model = AutoModelForImageTextToText.from_pretrained(str(path), dtype=torch.float32)
    model.train(train)
    share_image_features(model)
    builder = create_continuous_token_builder(
        processor.tokenizer, processor=processor, hf_model_type=model.config.model_type
    )
    builder = RememberingBuilder(builder)  # validation and evaluation render the same conversations again
    return Policy(model=model, processor=processor, builder=builder, ids=token_ids(processor.tokenizer), path=str(path))
