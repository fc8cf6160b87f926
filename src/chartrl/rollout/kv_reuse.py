"""Key/value reuse across generation passes: a pass continues from the previous pass's cache and computes only the
tokens the tool turn added (the observation text, the edited image's tokens, the next generation prompt).

After a pass, each sequence keeps a ``RowCache``: the token ids whose keys/values the pass computed (its input and
every sampled token but the last, which was never fed back), those keys/values per layer, and the tokens' 3D
M-RoPE positions. The next pass of that sequence reuses the longest common prefix of its token ids and the cached
ids (cut back to the start of an image when it would end inside one, and leaving at least one token to feed), and
prefills the rest:

- positions: the new tokens get the positions ``get_rope_index`` would give them in the whole sequence, namely their
  own ``get_rope_index`` (text from 0, each image's t/h/w grid) shifted by the cached prefix's largest position + 1;
- images: pixel values and grid sizes of the images whose tokens lie in the new part only;
- padding: a batch lays each row out as ``[pad][cached prefix][pad][new tokens]`` in the cache and the input, so
  every row's new tokens end at the same column and decoding appends uniformly; the attention mask is 0 on pads.

Decoding then follows transformers' own greedy / multinomial loop (the same logits warpers, one ``multinomial``
draw per step over the whole batch, finished rows padded), so greedy tokens equal those of a full re-prefill
through ``generate`` up to float noise, and a fixed seed draws the same random numbers. Rows that have stopped
leave the model's batch once enough have (:data:`DROP_SHARE`, never below :data:`MIN_ROWS` rows): their draws
are still taken, on zero logits, and thrown away for pads, so the other rows' draws do not move.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chartrl.model.batching import TokenSequence, collate, image_pixels
from chartrl.model.positions import image_runs, images_before, rope_positions, vl_model
from chartrl.rollout.cache import appending_cache


@dataclass
class RowCache:
    ids: list[int]
    """Tokens whose keys/values are held, in order."""
    keys: list[Any]
    """Per layer, (kv_heads, len(ids), head_dim)."""
    values: list[Any]
    positions: Any
    """(3, len(ids)) M-RoPE positions (temporal, height, width) the keys were rotated with."""
    images: list[Any]
    """The images whose pad runs ``ids`` holds, in order (image pad ids alone do not tell two images apart)."""


def reusable_prefix(cache: RowCache | None, sequence: TokenSequence, image_pad: int) -> int:
    """How many leading tokens of ``sequence`` can be taken from ``cache``: their common prefix, cut back to the
    start of an image that it would split or that is not the same image object, leaving one token to feed."""
    if cache is None:
        return 0
    ids = sequence.ids
    common = 0
    for a, b in zip(cache.ids, ids, strict=False):
        if a != b:
            break
        common += 1
    common = min(common, len(ids) - 1)  # the last token is fed: its logits start the pass
    cached_runs = image_runs(cache.ids, image_pad)
    for k, (start, end) in enumerate(image_runs(ids, image_pad)):
        if start >= common:
            break
        whole = end <= common and k < len(cached_runs) and cached_runs[k] == (start, end)
        same = k < len(cache.images) and k < len(sequence.images) and cache.images[k] is sequence.images[k]
        if not (whole and same):
            return start
    return max(common, 0)


PLAIN_GENERATION = {
    "repetition_penalty": (None, 1.0),
    "encoder_repetition_penalty": (None, 1.0),
    "no_repeat_ngram_size": (None, 0),
    "min_length": (None, 0),
    "min_new_tokens": (None, 0),
    "min_p": (None,),
    "typical_p": (None, 1.0),
    "epsilon_cutoff": (None, 0.0),
    "eta_cutoff": (None, 0.0),
    "bad_words_ids": (None,),
    "suppress_tokens": (None,),
    "begin_suppress_tokens": (None,),
    "sequence_bias": (None,),
    "forced_bos_token_id": (None,),
    "forced_eos_token_id": (None,),
    "renormalize_logits": (None, False),
}
"""Generation settings under which ``generate`` applies no logits processor beyond temperature / top-p (top-k is
always passed as 0). A model whose ``generation_config`` sets any other (Qwen2.5-VL-Instruct's ships
``repetition_penalty: 1.05``) is sampled through ``generate`` with a full re-prefill, so its tokens never change."""


def plain_generation(model) -> list[str]:
    """The settings of ``model.generation_config`` the reuse loop does not apply (empty: it may be used)."""
    config = getattr(model, "generation_config", None)
    return [key for key, plain in PLAIN_GENERATION.items() if getattr(config, key, None) not in plain]


def _warpers(params):
    from transformers.generation.logits_process import (
        LogitsProcessorList,
        TemperatureLogitsWarper,
        TopPLogitsWarper,
    )

    warpers = LogitsProcessorList()
    if params.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(params.temperature))
    if params.top_p < 1.0:
        warpers.append(TopPLogitsWarper(params.top_p))
    return warpers


def continue_batch(
    policy,
    sequences: Sequence[TokenSequence],
    caches: Sequence[RowCache | None],
    params,
    stop_ids: Sequence[int],
    keep_cache: bool,
):
    """Generate one pass for ``sequences``, reusing ``caches``. Returns (completions (B, T) long, raw logits
    (B, T, V) float, reused prefix length per row, RowCache per row or None)."""
    import torch

    pad = policy.ids.pad
    batch = len(sequences)
    prefix = [reusable_prefix(c, s, policy.ids.image_pad) for c, s in zip(caches, sequences, strict=True)]
    suffixes, suffix_images = [], []
    for seq, p in zip(sequences, prefix, strict=True):
        before = images_before(seq.ids, policy.ids.image_pad, p)
        suffixes.append(seq.ids[p:])
        suffix_images.append(list(seq.images[before:]))
    inputs: dict[str, Any] = {}
    images = [image for group in suffix_images for image in group]
    grids = []
    if images:
        inputs["pixel_values"], inputs["image_grid_thw"] = image_pixels(policy, images)
        grids = list(torch.split(inputs["image_grid_thw"], [len(group) for group in suffix_images]))
    suffix_positions = []
    for row, (ids, cache, p) in enumerate(zip(suffixes, caches, prefix, strict=True)):
        offset = int(cache.positions[:, :p].max()) + 1 if p else 0
        grid = grids[row] if grids and len(suffix_images[row]) else None
        suffix_positions.append(rope_positions(policy, ids, grid) + offset)
    cached_len, new_len = max(prefix), max(len(s) for s in suffixes)

    layers = None
    if cached_len:
        reference = next(c for c, p in zip(caches, prefix, strict=True) if p)
        heads, _, dim = reference.keys[0].shape
        dtype = reference.keys[0].dtype
        layers = []
        for layer in range(len(reference.keys)):
            k = torch.zeros((batch, heads, cached_len, dim), dtype=dtype)
            v = torch.zeros((batch, heads, cached_len, dim), dtype=dtype)
            for row, (cache, p) in enumerate(zip(caches, prefix, strict=True)):
                if p:
                    k[row, :, cached_len - p :] = cache.keys[layer][:, :p]
                    v[row, :, cached_len - p :] = cache.values[layer][:, :p]
            layers.append((k, v))
    model_cache = appending_cache(vl_model(policy).config, reserve=new_len + params.max_new_tokens, data=layers)

    input_ids = torch.full((batch, new_len), pad, dtype=torch.long)
    mask = torch.zeros((batch, cached_len + new_len), dtype=torch.long)
    positions = torch.zeros((3, batch, new_len), dtype=torch.long)
    for row, (ids, p, pos) in enumerate(zip(suffixes, prefix, suffix_positions, strict=True)):
        input_ids[row, new_len - len(ids) :] = torch.tensor(ids, dtype=torch.long)
        mask[row, cached_len - p : cached_len] = 1
        mask[row, cached_len + new_len - len(ids) :] = 1
        positions[:, row, new_len - len(ids) :] = pos

    greedy = params.greedy
    warpers = None if greedy else _warpers(params)
    stops = torch.tensor(list(stop_ids), dtype=torch.long)
    unfinished = torch.ones(batch, dtype=torch.long)
    next_position = positions.amax(dim=(0, 2)) + 1  # (B,): text continues from the largest position + 1
    head = cached_len + new_len  # the cache's columns before the first sampled token
    running = torch.arange(batch)  # the batch row of each row the model runs (the cache's and mask's rows)
    dropped: dict[int, tuple[list[Any], list[Any]]] = {}  # batch row -> its keys, values (per layer) when dropped
    tokens, logits_steps = [], []
    with torch.inference_mode():  # no autograd bookkeeping: the same numbers, less work per operation
        out = policy.model(
            input_ids=input_ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=model_cache,
            use_cache=True,
            logits_to_keep=1,
            **inputs,
        )
        generated = input_ids
        for step in range(params.max_new_tokens):
            last = out.logits[:, -1, :]
            if len(running) == batch:
                logits = last.to(copy=True, dtype=torch.float32)
            else:  # rows that stopped before get zeros: their draws are thrown away for pads
                logits = last.new_zeros((batch, last.shape[-1]), dtype=torch.float32)
                logits[running] = last.float()
            logits_steps.append(logits)
            if greedy:
                next_tokens = torch.argmax(logits, dim=-1)
            else:
                scores = warpers(generated, logits)
                next_tokens = torch.multinomial(torch.softmax(scores, dim=-1), num_samples=1).squeeze(1)
            next_tokens = next_tokens * unfinished + pad * (1 - unfinished)
            tokens.append(next_tokens)
            generated = torch.cat([generated, next_tokens[:, None]], dim=1)
            feed = unfinished.bool()  # a row's stop token is fed too: the next pass reuses its keys/values
            unfinished = unfinished & ~torch.isin(next_tokens, stops)
            if unfinished.max() == 0 or step == params.max_new_tokens - 1:
                break
            keep = _rows_to_run(running, feed)
            if keep is not None:
                if keep_cache:
                    for k in sorted(set(range(len(running))) - set(keep.tolist())):
                        row = int(running[k])
                        fed = fed_tokens([int(t[row]) for t in tokens], stop_ids, step + 1)
                        dropped[row] = _kept(model_cache, k, mask[k], head + fed)
                model_cache.reorder_cache(keep)
                running, mask = running[keep], mask[keep]
            mask = torch.cat([mask, torch.ones((len(running), 1), dtype=torch.long)], dim=1)
            step_positions = next_position[running].view(1, -1, 1).expand(3, -1, 1)
            next_position = next_position + 1
            out = policy.model(
                input_ids=next_tokens[running, None],
                attention_mask=mask,
                position_ids=step_positions,
                past_key_values=model_cache,
                use_cache=True,
                logits_to_keep=1,
            )
    completions = torch.stack(tokens, dim=1)  # (B, T)
    logits = torch.stack(logits_steps, dim=1)  # (B, T, V)
    row_caches: list[RowCache | None] = [None] * batch
    if keep_cache:
        steps = completions.shape[1]
        where = {int(row): k for k, row in enumerate(running)}
        for row, (seq, cache, p, pos) in enumerate(zip(sequences, caches, prefix, suffix_positions, strict=True)):
            fed = fed_tokens(completions[row].tolist(), stop_ids, steps)
            if row in dropped:
                keys, values = dropped[row]
            else:
                keys, values = _kept(model_cache, where[row], mask[where[row]], head + fed)
            start = int(pos.max()) + 1
            gen_positions = (torch.arange(fed) + start).view(1, -1).expand(3, -1)
            parts = [cache.positions[:, :p]] if p else []
            row_caches[row] = RowCache(
                ids=list(seq.ids) + completions[row, :fed].tolist(),
                keys=keys,
                values=values,
                positions=torch.cat([*parts, pos, gen_positions], dim=1),
                images=list(seq.images),
            )
    return completions, logits, prefix, row_caches


MIN_ROWS = 4
"""The fewest rows a decoding step runs once rows are dropped. At one thread, a decoding step on 4 or more rows of a
batch gives those rows the logits the whole batch gives them, to the bit (``bench/bench_step.py`` checks it); below
that the matrix kernels may sum in another order."""

DROP_SHARE = 0.75
"""Finished rows leave the decoding batch when the rows still to feed are at most this share of the rows it runs:
each drop copies the cache of the rows that stay, so it waits until it saves more than it copies."""


def _rows_to_run(running, feed):
    """Which of the rows the model runs (``running``: their batch rows) to keep running, as indices into them, or
    None to keep all: the rows whose last token must be fed, topped up to :data:`MIN_ROWS` with stopped ones."""
    import torch

    needed = feed[running]
    count = int(needed.sum())
    if len(running) <= MIN_ROWS or count > DROP_SHARE * len(running):
        return None
    keep = torch.nonzero(needed).flatten()
    if len(keep) < MIN_ROWS:
        spare = torch.nonzero(~needed).flatten()[: MIN_ROWS - len(keep)]
        keep = torch.sort(torch.cat([keep, spare])).values
    return keep


def _kept(model_cache, k, mask_row, columns):
    """Row ``k``'s keys and values per layer in ``model_cache``: the columns its attention mask holds, of the first
    ``columns`` (the pads it was fed after it stopped left out)."""
    keep = mask_row.bool().clone()
    keep[columns:] = False
    return _row_keys_values(model_cache, k, keep)


def _row_keys_values(model_cache, row, columns):
    """Per layer, the keys and the values of batch row ``row`` in ``model_cache`` at ``columns`` (a boolean mask)."""
    return (
        [layer.keys[row][:, columns] for layer in model_cache.layers],
        [layer.values[row][:, columns] for layer in model_cache.layers],
    )


def fed_tokens(completion: list[int], stop_ids: Sequence[int], steps: int) -> int:
    """How many of a row's sampled tokens were fed back (and so are in the cache): up to its stop, never the
    batch's last step."""
    stops = set(stop_ids)
    length = next((k + 1 for k, t in enumerate(completion) if t in stops), len(completion))
    return min(length, steps - 1)


def caches_after_generate(
    policy, sequences: Sequence[TokenSequence], batch: dict[str, Any], completions, past_key_values, stop_ids
) -> list[RowCache]:
    """Per-row caches from a left-padded ``generate`` call on ``sequences`` (``batch`` as ``collate`` built it)."""
    steps = completions.shape[1]
    fed = [fed_tokens(completions[row].tolist(), stop_ids, steps) for row in range(completions.shape[0])]
    return _row_caches(policy, sequences, batch, past_key_values, completions, fed)


def _row_caches(policy, sequences, batch, past_key_values, completions=None, fed=None) -> list[RowCache]:
    """Per-row caches of a left-padded forward of ``sequences`` (``batch`` as ``collate`` built it) whose keys and
    values ``past_key_values`` holds, with each row's first ``fed[row]`` tokens of ``completions`` after it."""
    import torch

    mask = batch["attention_mask"]
    positions, _ = vl_model(policy).get_rope_index(
        batch["input_ids"],
        mm_token_type_ids=batch["mm_token_type_ids"],
        image_grid_thw=batch.get("image_grid_thw"),
        attention_mask=mask,
    )
    steps = 0 if completions is None else completions.shape[1]
    out = []
    for row in range(mask.shape[0]):
        row_fed = fed[row] if fed is not None else 0
        real = mask[row].bool()
        keep = torch.cat([real, torch.arange(max(steps - 1, 0)) < row_fed])
        prompt_positions = positions[:, row, real]
        start = int(prompt_positions.max()) + 1
        gen_positions = (torch.arange(row_fed) + start).view(1, -1).expand(3, -1)
        sampled = completions[row, :row_fed].tolist() if row_fed else []
        keys, values = _row_keys_values(past_key_values, row, keep)
        out.append(
            RowCache(
                ids=batch["input_ids"][row, real].tolist() + sampled,
                keys=keys,
                values=values,
                positions=torch.cat([prompt_positions, gen_positions], dim=1),
                images=list(sequences[row].images),
            )
        )
    return out


def shared_prompt_caches(policy, sequences: Sequence[TokenSequence]) -> list[RowCache] | None:
    """When some of ``sequences`` repeat (a GRPO group's ``rollout.n`` samples of one prompt, the same token ids and
    the same image objects): the keys/values of each distinct sequence but its last token, computed once, and per
    sequence its distinct sequence's cache, for :func:`continue_batch` to prefill only the last token of each row
    and decode. None when no sequence repeats, or one ends inside an image's tokens."""
    import torch

    keys = [(tuple(s.ids), tuple(id(image) for image in s.images)) for s in sequences]
    distinct: dict[tuple, int] = {}
    for key in keys:
        distinct.setdefault(key, len(distinct))
    if len(distinct) == len(sequences) or any(s.ids[-1] == policy.ids.image_pad for s in sequences):
        return None
    firsts = [keys.index(key) for key in distinct]
    heads = [TokenSequence(sequences[i].ids[:-1], sequences[i].images) for i in firsts]
    batch = collate(policy, heads, padding_side="left")
    cache = appending_cache(vl_model(policy).config, reserve=0)
    with torch.inference_mode():
        vl_model(policy)(**batch, past_key_values=cache, use_cache=True)
    caches = _row_caches(policy, heads, batch, cache)
    return [caches[distinct[key]] for key in keys]
