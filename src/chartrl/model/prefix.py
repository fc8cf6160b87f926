"""A forward pass over sequences that share their prompts (a GRPO group's ``rollout.n`` samples): each distinct prompt
through the decoder once, its keys and values handed to every sequence that shares it, and each sequence's own
tokens after it.

A sequence is cut after its prompt's last token but one: the *head* (the prompt without its last token: the chart's
tokens among it) is what the group's sequences share, and the *tail* (the prompt's last token, whose logits predict
the first response token, then the response with its tool turns and edited charts) is each one's own. Heads run
left-padded in one batch; their keys/values are indexed out to the tails' rows (under autograd, so the gradient
of every tail flows back into its head, summed over the group), and the tails run right-padded after them with
positions continuing the head's (``chartrl.model.positions``). The hidden states are those of the whole sequences
up to the order of floating-point sums; the decoder and the vision tower run on a group's prompt once instead of
``rollout.n`` times (on the miniature the prompt is about four fifths of a sequence's tokens).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chartrl.model.batching import TokenSequence, collate, image_pixels
from chartrl.model.positions import images_before, rope_positions


def shared_heads(
    sequences: Sequence[TokenSequence], prompt_lengths: Sequence[int], image_pad: int
) -> tuple[list[int], list[int]]:
    """``(group, head_length)`` per sequence: sequences whose heads (the prompt but its last token) hold the same
    token ids and the same image objects get the same group index, numbered in order of first appearance."""
    groups: dict[tuple, int] = {}
    out, heads = [], []
    for sequence, length in zip(sequences, prompt_lengths, strict=True):
        head = max(length - 1, 0)
        images = sequence.images[: images_before(sequence.ids, image_pad, head)]
        key = (tuple(sequence.ids[:head]), tuple(id(image) for image in images))
        out.append(groups.setdefault(key, len(groups)))
        heads.append(head)
    return out, heads


def shared_prefix_logits_at(model, policy, sequences: Sequence[TokenSequence], prompt_lengths: Sequence[int], rows, positions):
    """``model``'s logits at the positions ``(rows[i], positions[i])`` of ``sequences`` (N, V), as
    ``chartrl.model.batching.logits_at`` gives them for the collated sequences, with each distinct head computed
    once. Every requested position lies at or after its sequence's head (a response token's predecessor does)."""
    import torch
    from transformers.cache_utils import DynamicCache

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    inner = base.model
    pad = policy.ids.image_pad
    group_of, head_of = shared_heads(sequences, prompt_lengths, pad)
    firsts = [group_of.index(g) for g in range(max(group_of) + 1)]

    # heads: one row per group, left-padded, so each ends where the tails begin
    heads = []
    for row in firsts:
        length = head_of[row]
        ids = sequences[row].ids
        heads.append(TokenSequence(ids[:length], sequences[row].images[: images_before(ids, pad, length)]))
    head_batch = collate(policy, heads, padding_side="left")
    head_positions, _ = inner.get_rope_index(
        head_batch["input_ids"],
        mm_token_type_ids=head_batch["mm_token_type_ids"],
        image_grid_thw=head_batch.get("image_grid_thw"),
        attention_mask=head_batch["attention_mask"],
    )  # (3, G, H)
    real = head_batch["attention_mask"].bool()  # (G, H)
    offsets = [int(head_positions[:, g, real[g]].max()) + 1 if real[g].any() else 0 for g in range(len(firsts))]
    cache = DynamicCache(config=inner.config)
    inner(
        input_ids=head_batch["input_ids"],
        attention_mask=head_batch["attention_mask"],
        position_ids=head_positions,
        pixel_values=head_batch.get("pixel_values"),
        image_grid_thw=head_batch.get("image_grid_thw"),
        past_key_values=cache,
        use_cache=True,
    )

    # tails: each sequence's own tokens, right-padded, after its group's head
    index = torch.tensor(group_of, dtype=torch.long)
    shared = DynamicCache(config=inner.config)
    for layer, held in enumerate(cache.layers):
        # (B, kv_heads, H, head_dim), the gradient summed over a group's rows. index_select, not held.keys[index]:
        # indexing's backward adds the rows with atomic adds on two or more threads, in whatever order they land,
        # where index_select's adds them in row order, as indexing does on one thread
        shared.update(held.keys.index_select(0, index), held.values.index_select(0, index), layer)
    tails, tail_images = [], []
    for sequence, head in zip(sequences, head_of, strict=True):
        tails.append(sequence.ids[head:])
        tail_images.append(list(sequence.images[images_before(sequence.ids, pad, head) :]))
    width = max(len(t) for t in tails)
    batch = len(sequences)
    input_ids = torch.full((batch, width), policy.ids.pad, dtype=torch.long)  # (B, S)
    tail_mask = torch.zeros((batch, width), dtype=torch.long)  # (B, S)
    tail_positions = torch.zeros((3, batch, width), dtype=torch.long)  # (3, B, S)
    images = [image for group in tail_images for image in group]
    extra: dict[str, Any] = {}
    grids: list[Any] = []
    if images:
        extra["pixel_values"], extra["image_grid_thw"] = image_pixels(policy, images)
        grids = list(torch.split(extra["image_grid_thw"], [len(group) for group in tail_images]))
    for row, ids in enumerate(tails):
        input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        tail_mask[row, : len(ids)] = 1
        grid = grids[row] if grids and tail_images[row] else None
        tail_positions[:, row, : len(ids)] = rope_positions(policy, ids, grid) + offsets[group_of[row]]
    hidden = inner(
        input_ids=input_ids,
        attention_mask=torch.cat([head_batch["attention_mask"][index], tail_mask], dim=1),
        position_ids=tail_positions,
        past_key_values=shared,
        use_cache=True,
        **extra,
    ).last_hidden_state  # (B, S, hidden)
    local = positions - torch.tensor(head_of, dtype=torch.long)[rows]  # (N,): the position in the tail
    return base.lm_head(hidden[rows, local])  # (N, V)
