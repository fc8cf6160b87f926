"""One generation pass over a batch of sequences, on transformers ``generate``, with the sampled tokens'
log-probabilities (the "old" log-probs of the PPO ratio)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chartrl.model.batching import TokenSequence, collate

STOPS = ("eos", "tool_call", "length", "vision_token")


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 48
    greedy: bool = False
    """Greedy decoding (evaluation); log-probs are then those of the temperature-1 distribution."""


@dataclass
class Sampled:
    ids: list[int]
    """The completion, ending with its stop token when it stopped on one."""
    logprobs: list[float]
    """log pi(token | prefix) of each completion token under logits / temperature."""
    stop: str
    """One of STOPS: eos (end of turn), tool_call (``</tool_call>``), length (max_new_tokens), vision_token (a
    sampled vision special token, cut off before it: it would desynchronise images and tokens)."""


def sample(
    policy,
    sequences: Sequence[TokenSequence],
    params: SamplingParams,
    stop_ids: Sequence[int],
    batch_size: int,
) -> list[Sampled]:
    """Continue every sequence by one generation pass, ``batch_size`` sequences per ``generate`` call."""
    out: list[Sampled] = []
    for start in range(0, len(sequences), batch_size):
        out.extend(_sample_batch(policy, sequences[start : start + batch_size], params, stop_ids))
    return out


def _sample_batch(policy, sequences: Sequence[TokenSequence], params: SamplingParams, stop_ids) -> list[Sampled]:
    import torch

    batch = collate(policy, sequences, padding_side="left")
    prompt_length = batch["input_ids"].shape[1]
    sampling = (
        {"do_sample": False}
        if params.greedy
        else {"do_sample": True, "temperature": params.temperature, "top_p": params.top_p, "top_k": 0}
    )
    with torch.no_grad():
        generated = policy.model.generate(
            **batch,
            **sampling,
            max_new_tokens=params.max_new_tokens,
            eos_token_id=list(stop_ids),
            pad_token_id=policy.ids.pad,
            output_logits=True,
            return_dict_in_generate=True,
        )
    completions = generated.sequences[:, prompt_length:]  # (B, T_new)
    temperature = 1.0 if params.greedy else params.temperature
    logits = torch.stack(generated.logits, dim=1).float() / temperature  # (B, T_new, V)
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
        results.append(Sampled(ids=ids[:end], logprobs=logprobs[row, :end].tolist(), stop=stop))
    return results
