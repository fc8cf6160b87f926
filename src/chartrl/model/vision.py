"""One vision-tower pass per distinct image in a batch.

A rollout batch holds each prompt ``rollout.n`` times, and an evaluation batch holds every question asked of a
chart, so the same chart reaches Qwen2.5-VL's vision tower several times in one forward. The tower's output for
an image depends on that image alone (its attention windows and positions are per image), so computing it once
and handing the same features to every copy changes nothing but the time.

This is done only where no gradient is recorded (generation, evaluation). On the CPU the features are then the same
to the bit as the tower's on the whole batch (tested; a GPU's matrix kernels may round a smaller batch otherwise,
as they may for any change of batch size). Under autograd the tower still runs on every copy, because the gradient of
features shared by several copies is summed in another order than the tower's own backward pass sums them, and
the trained weights would differ from the undeduplicated pass in their last bits.
"""

from __future__ import annotations

from typing import Any


def distinct_images(chunks, grids) -> tuple[list[int], list[int]]:
    """``(unique, source)``: the indices of the first copy of each distinct image, and for every image the index of
    its first copy. ``chunks`` are the images' patch rows (``pixel_values`` split by ``grid_thw.prod(-1)``),
    ``grids`` their ``(t, h, w)``; two images are the same when their grids and their pixels are equal."""
    import torch

    firsts: dict[tuple[int, ...], list[int]] = {}
    source: list[int] = []
    for index, (chunk, grid) in enumerate(zip(chunks, grids, strict=True)):
        candidates = firsts.setdefault(tuple(grid), [])
        match = next((first for first in candidates if torch.equal(chunks[first], chunk)), None)
        if match is None:
            candidates.append(index)
            match = index
        source.append(match)
    return sorted(set(source)), source


_SHARING: dict[type, type] = {}


def share_image_features(model: Any) -> None:
    """Make ``model`` (a Qwen2.5-VL, through a PEFT wrapper if there is one) run its vision tower once per distinct
    image of a batch when no gradient is recorded. Idempotent.

    The inner model's class is swapped for a subclass (not an attribute patched on the instance), so a copy of the
    model (the trainer's reference model is a ``deepcopy``) runs its own tower."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    vl = getattr(inner, "model", None)
    if vl is None or not hasattr(vl, "get_image_features") or type(vl) in _SHARING.values():
        return
    base = type(vl)
    if base not in _SHARING:
        _SHARING[base] = type(base.__name__, (_SharedImageFeatures, base), {"__module__": base.__module__})
    vl.__class__ = _SHARING[base]


class _SharedImageFeatures:
    """Mixed in before a Qwen2.5-VL model class: ``get_image_features`` on each distinct image once."""

    def get_image_features(self, pixel_values, image_grid_thw=None, **kwargs):
        import torch

        compute = super().get_image_features
        if image_grid_thw is None or torch.is_grad_enabled() or len(image_grid_thw) < 2:
            return compute(pixel_values, image_grid_thw, **kwargs)
        chunks = torch.split(pixel_values, image_grid_thw.prod(-1).tolist())
        unique, source = distinct_images(chunks, image_grid_thw.tolist())
        if len(unique) == len(source):
            return compute(pixel_values, image_grid_thw, **kwargs)
        outputs = compute(torch.cat([chunks[i] for i in unique]), image_grid_thw[unique], **kwargs)
        features = dict(zip(unique, outputs.pooler_output, strict=True))
        outputs.pooler_output = tuple(features[first] for first in source)  # the only field the model reads
        return outputs
