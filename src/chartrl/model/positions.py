"""Qwen2.5-VL's 3D (M-RoPE) positions of a piece of a sequence, and where its images sit.

``get_rope_index`` numbers a sequence's text tokens one after another and each image's tokens by their (t, h, w)
grid offsets from the image's start; whatever follows an image continues from the largest position so far + 1.
So the positions of a sequence's tail are the tail's own positions (as a sequence of its own, from 0) shifted by the
head's largest position + 1: what lets a forward pass continue from keys/values computed for the head, whether a
generation pass continues from the previous one's cache or a batch computes a prompt its rows share once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def vl_model(policy) -> Any:
    """The Qwen2.5-VL inner model (the one holding ``get_rope_index``), through a PEFT wrapper if there is one."""
    model = policy.model
    if hasattr(model, "get_base_model"):
        model = model.get_base_model()
    return model.model


def rope_positions(policy, ids: list[int], grid=None):
    """(3, len(ids)) positions ``get_rope_index`` gives ``ids`` as a sequence of its own (text from 0); ``grid``:
    (images, 3) grid sizes of the images whose pad runs ``ids`` holds."""
    import torch

    tokens = torch.tensor([ids], dtype=torch.long)
    mm = (tokens == policy.ids.image_pad).long()
    positions, _ = vl_model(policy).get_rope_index(tokens, mm_token_type_ids=mm, image_grid_thw=grid)
    return positions[:, 0]


def image_runs(ids: Sequence[int], image_pad: int) -> list[tuple[int, int]]:
    """``(start, end)`` of each run of image pad tokens in ``ids``: one run per image, in order."""
    runs, start = [], None
    for k, token in enumerate(ids):
        if token == image_pad and start is None:
            start = k
        elif token != image_pad and start is not None:
            runs.append((start, k))
            start = None
    if start is not None:
        runs.append((start, len(ids)))
    return runs


def images_before(ids: Sequence[int], image_pad: int, position: int) -> int:
    """How many images of ``ids`` end at or before ``position`` (those a cut there leaves in the head)."""
    return sum(1 for _, end in image_runs(ids, image_pad) if end <= position)
