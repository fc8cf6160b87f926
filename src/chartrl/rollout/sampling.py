"""One generation pass over a batch of sequences, with the sampled tokens' log-probabilities (the "old" log-probs of
the PPO ratio).

With ``rollout.kv_reuse`` (the default) every pass runs chartrl's own decoding loop
(:func:`chartrl.rollout.kv_reuse.continue_batch`): a pass with nothing cached prefills its whole sequences, as
``generate`` would, and gets the same tokens and log-probs to the bit (``tests/rollout/test_kv_reuse.py``), while
rows that have stopped leave the batch. Without it, or for a model whose ``generation_config`` asks for logits
processors the loop does not apply, every pass runs transformers' ``generate``."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chartrl.model.batching import TokenSequence, collate
from chartrl.model.positions import vl_model

log = logging.getLogger(__name__)

STOPS = ("eos", "tool_call", "length", "vision_token")


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 48
    greedy: bool = False
    """Greedy decoding (evaluation); log-probs are then those of the temperature-1 distribution."""
    kv_reuse: bool = True
    """A pass after a tool turn continues from the previous pass's keys/values and computes only the new tokens
    (``rollout.kv_reuse``; see chartrl.rollout.kv_reuse). Off: every pass re-prefills its whole sequence."""


@dataclass
class Sampled:
    ids: list[int]
    """The completion, ending with its stop token when it stopped on one."""
    logprobs: list[float]
    """log pi(token | prefix) of each completion token under logits / temperature."""
    stop: str
    """One of STOPS: eos (end of turn), tool_call (``</tool_call>``), length (max_new_tokens), vision_token (a
    sampled vision special token, cut off before it: it would desynchronise images and tokens)."""
    fed: int = 0
    """Sampled tokens fed back into the model (their keys/values computed): up to the stop token, never the last
    step of the batch (a row that stopped early had its stop token fed while the others went on)."""
    reused: int = 0
    """Leading input tokens whose keys/values came from the previous pass's cache (not computed again)."""
    cache: Any = None
    """The keys/values this pass computed (a chartrl.rollout.kv_reuse.RowCache), when a next pass may reuse them."""


def sample(
    policy,
    sequences: Sequence[TokenSequence],
    params: SamplingParams,
    stop_ids: Sequence[int],
    batch_size: int,
    caches: Sequence[Any] | None = None,
    keep_cache: bool = False,
) -> list[Sampled]:
    """Continue every sequence by one generation pass, ``batch_size`` sequences per ``generate`` call.

    With ``params.kv_reuse``: ``caches`` (one per sequence, None where there is none) are the previous pass's
    keys/values, reused for the common prefix; ``keep_cache`` keeps this pass's on each ``Sampled`` for the next."""
    out: list[Sampled] = []
    caches = list(caches) if caches is not None and params.kv_reuse else [None] * len(sequences)
    keep_cache = keep_cache and params.kv_reuse
    for start in range(0, len(sequences), batch_size):
        chunk = slice(start, start + batch_size)
        out.extend(_sample_batch(policy, sequences[chunk], params, stop_ids, caches[chunk], keep_cache))
    return out


def _sample_batch(
    policy, sequences: Sequence[TokenSequence], params: SamplingParams, stop_ids, caches, keep_cache: bool
) -> list[Sampled]:
    import torch

    from chartrl.rollout import kv_reuse
    from chartrl.rollout.cache import appending_cache

    temperature = 1.0 if params.greedy else params.temperature
    if params.kv_reuse and _reuse_allowed(policy):
        if all(cache is None for cache in caches):
            caches = kv_reuse.shared_prompt_caches(policy, sequences) or caches  # a group's prompt prefilled once
        completions, logits, reused, row_caches = kv_reuse.continue_batch(
            policy, sequences, caches, params, stop_ids, keep_cache
        )
        return _results(policy, completions, logits / temperature, stop_ids, reused, row_caches)
    batch = collate(policy, sequences, padding_side="left")
    prompt_length = batch["input_ids"].shape[1]
    sampling = (
        {"do_sample": False}
        if params.greedy
        else {"do_sample": True, "temperature": params.temperature, "top_p": params.top_p, "top_k": 0}
    )
    cache = appending_cache(vl_model(policy).config, reserve=params.max_new_tokens)
    with torch.inference_mode():
        generated = policy.model.generate(
            **batch,
            **sampling,
            past_key_values=cache,
            max_new_tokens=params.max_new_tokens,
            eos_token_id=list(stop_ids),
            pad_token_id=policy.ids.pad,
            output_logits=True,
            return_dict_in_generate=True,
        )
    completions = generated.sequences[:, prompt_length:]  # (B, T_new)
    logits = torch.stack(generated.logits, dim=1).float() / temperature  # (B, T_new, V)
    row_caches = (
        kv_reuse.caches_after_generate(policy, sequences, batch, completions, generated.past_key_values, stop_ids)
        if keep_cache
        else [None] * len(sequences)
    )
    return _results(policy, completions, logits, stop_ids, [0] * len(sequences), row_caches)


def _reuse_allowed(policy) -> bool:
    from chartrl.rollout import kv_reuse

    extra = kv_reuse.plain_generation(policy.model)
    if extra and not getattr(policy, "_warned_kv_reuse", False):
        log.warning(
            "rollout.kv_reuse: the model's generation_config sets %s, which the reuse loop does not apply; "
            "passes after a tool turn re-prefill through generate instead (set them to their defaults to reuse)",
            ", ".join(extra),
        )
        policy._warned_kv_reuse = True
    return not extra


def _results(policy, completions, logits, stop_ids, reused, row_caches) -> list[Sampled]:
    """Cut each completion at its stop; log-probs of its tokens under ``logits`` (B, T_new, V), already divided
    by the temperature."""
    import torch

    from chartrl.rollout import kv_reuse

    logprobs = torch.log_softmax(logits, dim=-1).gather(-1, completions.unsqueeze(-1)).squeeze(-1)  # (B, T_new)
    stops = set(stop_ids)
    results = []
    for row in range(completions.shape[0]):
        ids = completions[row].tolist()
        end, stop = len(ids), "length"
        for position, token in enumerate(ids):
            if token in policy.ids.vision:
                end, stop = position, "vision_token"
                break
            if token in stops:
                end = position + 1
                stop = "tool_call" if token == policy.ids.tool_call_end else "eos"
                break
        results.append(
            Sampled(
                ids=ids[:end],
                logprobs=logprobs[row, :end].tolist(),
                stop=stop,
                fed=kv_reuse.fed_tokens(ids, stop_ids, len(ids)),
                reused=reused[row],
                cache=row_caches[row],
            )
        )
    return results
