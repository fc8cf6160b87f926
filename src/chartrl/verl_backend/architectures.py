"""The sizes of a policy model that its memory, time and disk depend on, before any weight is downloaded.

A hub id is looked up in :data:`KNOWN_ARCHITECTURES` (the study's models, numbers from each model's ``config.json``
on the Hugging Face hub, parameters counted from it); a local folder is read (its ``config.json``, and its
safetensors for the parameter count); ``model.path: null`` is the embedded default's tiny model, sized from
``model.tiny``. Anything else is unknown: the budget then says which file would make it known, instead of guessing.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chartrl.config import ModelConfig, TinyModelConfig

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "BF16": 2, "F16": 2, "F32": 4}


@dataclass(frozen=True)
class Architecture:
    """What the budget reads of a model (the names of its ``config.json``)."""

    name: str
    parameters: int
    """Every parameter, the vision tower included."""
    hidden_size: int
    num_hidden_layers: int
    vocab_size: int
    intermediate_size: int
    key_value_size: int
    """num_key_value_heads x head_dim: the width of the k and v projections (LoRA adapters on them)."""
    tie_word_embeddings: bool
    vision_hidden_size: int
    vision_depth: int
    image_token_pixels: int
    """Pixels per image token after the vision tower's patch merger: (patch_size x spatial_merge_size)^2."""
    source: str

    @property
    def embedding_parameters(self) -> int:
        """The token embedding and, when untied, the output head: FSDP's root unit (the decoder layers are
        wrapped one by one), all-gathered whole for the forward."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)

    def lora_parameters(self, rank: int) -> int:
        """Parameters of rank-``rank`` adapters on every linear layer of the language model (q, k, v, o, gate, up,
        down: ``rank x (in + out)`` each), the vision tower left out as the recipes do. Exact for Qwen2-style
        layers; an approximation for hybrid layers (Qwen3.5's DeltaNet projections differ in shape)."""
        h, kv, f = self.hidden_size, self.key_value_size, self.intermediate_size
        per_layer = (h + h) + 2 * (h + kv) + (h + h) + 2 * (h + f) + (f + h)
        return rank * per_layer * self.num_hidden_layers


KNOWN_ARCHITECTURES = {
    # huggingface.co/Qwen/Qwen2.5-VL-3B-Instruct/blob/main/config.json; the parameter count is
    # qwen2_5_vl_parameters() of these sizes, the model page's "3.75B params"
    "Qwen/Qwen2.5-VL-3B-Instruct": Architecture(
        name="Qwen/Qwen2.5-VL-3B-Instruct",
        parameters=3_754_622_976,
        hidden_size=2048,
        num_hidden_layers=36,
        vocab_size=151_936,
        intermediate_size=11_008,
        key_value_size=2 * 128,
        tie_word_embeddings=True,
        vision_hidden_size=1280,
        vision_depth=32,
        image_token_pixels=28 * 28,
        source="config.json of Qwen/Qwen2.5-VL-3B-Instruct",
    ),
    # huggingface.co/Qwen/Qwen2.5-VL-7B-Instruct/blob/main/config.json; the model page's "8.29B params"
    "Qwen/Qwen2.5-VL-7B-Instruct": Architecture(
        name="Qwen/Qwen2.5-VL-7B-Instruct",
        parameters=8_292_166_656,
        hidden_size=3584,
        num_hidden_layers=28,
        vocab_size=152_064,
        intermediate_size=18_944,
        key_value_size=4 * 128,
        tie_word_embeddings=False,
        vision_hidden_size=1280,
        vision_depth=32,
        image_token_pixels=28 * 28,
        source="config.json of Qwen/Qwen2.5-VL-7B-Instruct",
    ),
    # The model card of huggingface.co/Qwen/Qwen3.5-4B: hidden 2560, 32 layers (8 x (3 Gated DeltaNet + 1 Gated
    # Attention)), FFN 9216, 16 query / 4 key-value heads of 256, vocabulary 248,320 (padded). Not stated there,
    # assumed as the family's Qwen3.5-9B config.json has them: untied embeddings (the larger, safer count) and the
    # vision tower of transformers' Qwen3_5VisionConfig (27 blocks of 1152, 16 px patches merged 2 x 2). The count is
    # transformers' Qwen3_5ForConditionalGeneration built from these sizes on the meta device.
    "Qwen/Qwen3.5-4B": Architecture(
        name="Qwen/Qwen3.5-4B",
        parameters=5_290_381_552,
        hidden_size=2560,
        num_hidden_layers=32,
        vocab_size=248_320,
        intermediate_size=9216,
        key_value_size=4 * 256,
        tie_word_embeddings=False,
        vision_hidden_size=1152,
        vision_depth=27,
        image_token_pixels=32 * 32,
        source="the model card of Qwen/Qwen3.5-4B, untied embeddings and vision tower assumed",
    ),
}
"""Hub id -> sizes, for the models the shipped overlays name (a hub id cannot be read here: no hub access)."""


def qwen2_5_vl_parameters(
    *,
    vocab: int,
    hidden: int,
    layers: int,
    intermediate: int,
    key_value: int,
    tied: bool,
    vision_hidden: int,
    vision_depth: int,
    vision_intermediate: int,
    patch: int = 14,
    temporal_patch: int = 2,
    merge: int = 2,
) -> int:
    """Every parameter of a Qwen2.5-VL (transformers' ``Qwen2_5_VLForConditionalGeneration``).

    Language model: embedding ``V h``; per layer q ``h h + h``, k and v ``h kv + kv`` each, o ``h h``, the gated MLP
    ``3 h f``, two RMSNorms ``2 h``; a final norm ``h``; the head ``V h`` unless tied. Vision tower (hidden ``vh``,
    MLP ``vf``): the patch embedding ``3 t p^2 vh`` (no bias); per block qkv ``3 vh^2 + 3 vh``, proj ``vh^2 + vh``,
    the gated MLP ``3 vh vf + 2 vf + vh``, two norms ``2 vh``; the merger's norm ``vh``, ``(m^2 vh)^2 + m^2 vh`` and
    ``m^2 vh h + h``. Checked against the model pages (3,754,622,976 for the 3B, 8,292,166,656 for the 7B)."""
    h, kv, f = hidden, key_value, intermediate
    layer = (h * h + h) + 2 * (h * kv + kv) + h * h + 3 * h * f + 2 * h
    language = vocab * h + layers * layer + h + (0 if tied else vocab * h)
    vh, vf, merged = vision_hidden, vision_intermediate, merge * merge * vision_hidden
    block = (3 * vh * vh + 3 * vh) + (vh * vh + vh) + (3 * vh * vf + 2 * vf + vh) + 2 * vh
    merger = vh + (merged * merged + merged) + (merged * h + h)
    vision = 3 * temporal_patch * patch * patch * vh + vision_depth * block + merger
    return language + vision


def tiny_architecture(tiny: TinyModelConfig) -> Architecture:
    """The embedded default's tiny Qwen2.5-VL, from ``model.tiny`` (its vocabulary before the few special
    tokens the tokenizer adds: a handful of parameters short)."""
    head_dim = tiny.hidden_size // tiny.num_attention_heads
    sizes = {
        "vocab": tiny.vocab_size,
        "hidden": tiny.hidden_size,
        "layers": tiny.num_hidden_layers,
        "intermediate": tiny.intermediate_size,
        "key_value": tiny.num_key_value_heads * head_dim,
        "tied": False,
        "vision_hidden": tiny.vision_hidden_size,
        "vision_depth": tiny.vision_depth,
        "vision_intermediate": tiny.vision_intermediate_size,
    }
    return Architecture(
        name="the tiny model (model.tiny)",
        parameters=qwen2_5_vl_parameters(**sizes),
        hidden_size=tiny.hidden_size,
        num_hidden_layers=tiny.num_hidden_layers,
        vocab_size=tiny.vocab_size,
        intermediate_size=tiny.intermediate_size,
        key_value_size=sizes["key_value"],
        tie_word_embeddings=False,
        vision_hidden_size=tiny.vision_hidden_size,
        vision_depth=tiny.vision_depth,
        image_token_pixels=28 * 28,
        source="model.tiny",
    )


def folder_architecture(folder: Path) -> Architecture | None:
    """A local Hugging Face folder's sizes: ``config.json`` (its ``text_config`` when nested) and the parameter
    count of its safetensors; None when it has no ``config.json`` or no safetensors to count."""
    config_file = folder / "config.json"
    if not config_file.is_file():
        return None
    config = json.loads(config_file.read_text())
    parameters = safetensors_parameters(folder, config)
    if parameters is None:
        return None
    text = config.get("text_config") or config
    vision = config.get("vision_config") or {}
    heads = text["num_attention_heads"]
    head_dim = text.get("head_dim") or text["hidden_size"] // heads
    patch, merge = vision.get("patch_size", 14), vision.get("spatial_merge_size", 2)
    return Architecture(
        name=str(folder),
        parameters=parameters,
        hidden_size=text["hidden_size"],
        num_hidden_layers=text["num_hidden_layers"],
        vocab_size=text["vocab_size"],
        intermediate_size=text["intermediate_size"],
        key_value_size=text.get("num_key_value_heads", heads) * head_dim,
        tie_word_embeddings=bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings", False))),
        vision_hidden_size=vision.get("hidden_size", vision.get("embed_dim", 0)),
        vision_depth=vision.get("depth", 0),
        image_token_pixels=(patch * merge) ** 2,
        source=f"{config_file} and its safetensors",
    )


def safetensors_parameters(folder: Path, config: dict[str, Any]) -> int | None:
    """Parameters stored in ``folder``: the sharded index's ``total_size`` over the bytes of the config's dtype,
    else the sum of the tensor shapes in each ``*.safetensors`` header (8 bytes of length, then JSON)."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        total = json.loads(index.read_text()).get("metadata", {}).get("total_size")
        dtype = config.get("torch_dtype") or config.get("dtype") or "bfloat16"
        if total is not None:
            return int(total) // DTYPE_BYTES.get(dtype, 2)
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    return sum(_header_parameters(path) for path in files)


def _header_parameters(path: Path) -> int:
    with path.open("rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
    count = 0
    for name, tensor in header.items():
        if name == "__metadata__":
            continue
        size = 1
        for dim in tensor["shape"]:
            size *= dim
        count += size
    return count


def model_architecture(model: ModelConfig, root: Path = Path(".")) -> Architecture | None:
    """The policy's sizes: the tiny model's (``model.path`` null), a local folder's, a known hub id's; None when
    none of these knows them."""
    if model.path is None:
        return tiny_architecture(model.tiny)
    local = root / model.path
    if local.is_dir():
        return folder_architecture(local)
    return KNOWN_ARCHITECTURES.get(model.path)


def unknown_architecture_note(model: ModelConfig) -> str:
    known = ", ".join(KNOWN_ARCHITECTURES)
    return (
        f"model.path '{model.path}' is neither a local folder with config.json and safetensors nor a model whose "
        f"sizes chartrl knows ({known}): its memory, checkpoint size and time are not estimated; download it and "
        "set model.path to the folder, or add its sizes to chartrl.verl_backend.architectures.KNOWN_ARCHITECTURES"
    )
