"""Token sequences with images -> the padded tensors a Qwen2.5-VL forward or ``generate`` takes.

A sequence's ``<|image_pad|>`` runs must match its images in order and size; the images' pixel values are
computed once per distinct image object (the n samples of a prompt share one chart), and the vision tower runs once
per distinct image where no gradient is recorded (chartrl.model.vision).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TokenSequence:
    ids: list[int]
    images: list[Any] = field(default_factory=list)
    """PIL images, in the order their pad runs appear in ``ids``."""


class ImageTokenMismatch(RuntimeError):
    """A sequence's image pad tokens do not match its images: a bug in sequence building, not model data."""


def collate(policy, sequences: Sequence[TokenSequence], padding_side: str = "left") -> dict[str, Any]:
    """Pad ``sequences`` into one batch: input_ids, attention_mask, mm_token_type_ids (B, T), and the pixel
    values and grid sizes of all images, in batch order."""
    import torch

    ids = policy.ids
    length = max(len(s.ids) for s in sequences)
    input_ids = torch.full((len(sequences), length), ids.pad, dtype=torch.long)  # (B, T)
    attention_mask = torch.zeros((len(sequences), length), dtype=torch.long)  # (B, T)
    for row, seq in enumerate(sequences):
        tokens = torch.tensor(seq.ids, dtype=torch.long)
        if padding_side == "left":
            input_ids[row, length - len(seq.ids) :] = tokens
            attention_mask[row, length - len(seq.ids) :] = 1
        else:
            input_ids[row, : len(seq.ids)] = tokens
            attention_mask[row, : len(seq.ids)] = 1
    mm_token_type_ids = (input_ids == ids.image_pad).long() * attention_mask  # 1 on image tokens
    batch: dict[str, Any] = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "mm_token_type_ids": mm_token_type_ids,
    }
    images = [image for seq in sequences for image in seq.images]
    if images:
        pixel_values, grid = image_pixels(policy, images)
        merge = policy.processor.image_processor.merge_size**2
        expected = int((grid.prod(dim=-1) // merge).sum())
        found = int(mm_token_type_ids.sum())
        if expected != found:
            raise ImageTokenMismatch(
                f"batch holds {found} image tokens but its {len(images)} images need {expected}; "
                "a sequence was built with the wrong images"
            )
        batch["pixel_values"] = pixel_values
        batch["image_grid_thw"] = grid
    return batch


def image_pixels(policy, images: list[Any]):
    """Pixel values of ``images`` (each distinct object processed once), concatenated in order."""
    import torch

    unique: dict[int, int] = {}
    distinct = []
    for image in images:
        if id(image) not in unique:
            unique[id(image)] = len(distinct)
            distinct.append(image)
    processed = policy.processor.image_processor(images=distinct, return_tensors="pt")
    grid = processed["image_grid_thw"]  # (n_distinct, 3)
    patches_per_image = grid.prod(dim=-1).tolist()
    chunks = torch.split(processed["pixel_values"], patches_per_image)
    order = [unique[id(image)] for image in images]
    return torch.cat([chunks[i] for i in order]), grid[order]


def image_token_count(policy, image) -> int:
    """How many ``<|image_pad|>`` tokens ``image`` expands into."""
    _, grid = image_pixels(policy, [image])
    return int(grid.prod() // policy.processor.image_processor.merge_size**2)


def logits_at(model, tensors: dict[str, Any], rows, positions):
    """``model``'s logits at the batch positions ``(rows[i], positions[i])`` only, (N, V): the decoder runs on the
    whole batch and the output head only where a loss reads it, instead of a (B, T, V) tensor of every position.

    The values are ``model(**tensors).logits[rows, positions]`` up to float rounding: the head is a per-position
    linear, but the matrix product over N rows may take another kernel than over B x T rows (measured on this CPU:
    equal bit for bit with 2 threads, differing in the last bits with 1). What changes is the work: on the
    miniature a loss reads 10-30% of a batch's positions. ``model`` is a
    Qwen2.5-VL model or a LoRA (peft) wrapper of one, whose adapters sit inside the decoder's layers."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    hidden = base.model(**tensors).last_hidden_state  # (B, T, H)
    return base.lm_head(hidden[rows, positions])  # (N, V)


def length_groups(lengths: Sequence[int], size: int) -> list[list[int]]:
    """Indices of ``lengths`` in groups of at most ``size``, shortest first (a stable sort): micro-batches of
    similar lengths pad less, and the sum of their losses or gradients is the whole batch's, up to the order of
    floating-point sums."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return [order[start : start + size] for start in range(0, len(order), size)]
