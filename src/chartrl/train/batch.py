"""Episodes -> the tensors of a policy update, and the current policy's log-probs of the response tokens.

Response tensors are (B, R): row b holds episode b's response (everything after its prompt: assistant passes,
tool turns, boundary tokens), right-padded to the longest response R; the loss mask is 1 only on sampled tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chartrl.model.batching import TokenSequence, collate, logits_at
from chartrl.model.prefix import shared_heads, shared_prefix_logits_at


@dataclass
class UpdateBatch:
    sequences: list[TokenSequence]
    prompt_lengths: list[int]
    response_mask: Any
    """(B, R) 1 on tokens the policy sampled."""
    old_logprobs: Any
    """(B, R) the sampler's log-probs (0 where the mask is 0)."""
    advantages: Any = None
    """(B, R)"""

    def __len__(self) -> int:
        return len(self.sequences)

    def select(self, rows: Sequence[int]) -> UpdateBatch:
        rows = list(rows)
        return UpdateBatch(
            sequences=[self.sequences[i] for i in rows],
            prompt_lengths=[self.prompt_lengths[i] for i in rows],
            response_mask=self.response_mask[rows],
            old_logprobs=self.old_logprobs[rows],
            advantages=None if self.advantages is None else self.advantages[rows],
        )


def update_batch(episodes: Sequence[Any]) -> UpdateBatch:
    import torch

    length = max(1, max(len(e.response_ids) for e in episodes))
    mask = torch.zeros((len(episodes), length), dtype=torch.float32)  # (B, R)
    old = torch.zeros((len(episodes), length), dtype=torch.float32)  # (B, R)
    for row, episode in enumerate(episodes):
        n = len(episode.response_ids)
        mask[row, :n] = torch.tensor(episode.response_mask, dtype=torch.float32)
        old[row, :n] = torch.tensor(episode.response_logprobs, dtype=torch.float32)
    return UpdateBatch(
        sequences=[TokenSequence(e.runtime_ids, e.images) for e in episodes],
        prompt_lengths=[len(e.prompt_ids) for e in episodes],
        response_mask=mask,
        old_logprobs=old,
    )


def response_logprobs(model, policy, batch: UpdateBatch, temperature: float):
    """log pi(token | prefix) of every sampled response token under ``model`` (B, R), with gradients, 0 where the
    response mask is 0 (the output head runs on the sampled tokens' positions only). ``model`` is the policy's
    model or a frozen reference of the same architecture. Rows that share their prompt (a group's samples) run it
    through the decoder once (``chartrl.model.prefix``)."""
    import torch

    rows, offsets = batch.response_mask.nonzero(as_tuple=True)  # (N,): response token `offset` of row `row`
    positions = torch.tensor(batch.prompt_lengths, dtype=torch.long)[rows] + offsets  # (N,): where it sits
    groups, _ = shared_heads(batch.sequences, batch.prompt_lengths, policy.ids.image_pad)
    if len(set(groups)) < len(groups):
        logits = shared_prefix_logits_at(model, policy, batch.sequences, batch.prompt_lengths, rows, positions - 1)
        ids = [sequence.ids for sequence in batch.sequences]
        tokens = torch.tensor([ids[r][p] for r, p in zip(rows.tolist(), positions.tolist(), strict=True)])  # (N,)
    else:
        tensors = collate(policy, batch.sequences, padding_side="right")
        logits = logits_at(model, tensors, rows, positions - 1)  # (N, V): t predicts t + 1
        tokens = tensors["input_ids"][rows, positions]  # (N,)
    logprobs = torch.log_softmax(logits.float() / temperature, dim=-1)  # (N, V)
    picked = logprobs.gather(1, tokens.unsqueeze(1)).squeeze(1)  # (N,)
    return torch.zeros_like(batch.response_mask).index_put((rows, offsets), picked)  # (B, R)


def group_micro_batches(batch: UpdateBatch, size: int, image_pad: int) -> list[list[int]]:
    """Row indices in micro-batches of at most ``size`` rows (more only where one group has more rows), whole groups
    of rows sharing a prompt kept together (so each micro-batch computes a prompt once) and groups in order of their
    longest row (micro-batches of similar lengths pad less)."""
    groups, _ = shared_heads(batch.sequences, batch.prompt_lengths, image_pad)
    members: dict[int, list[int]] = {}
    for row, group in enumerate(groups):
        members.setdefault(group, []).append(row)
    ordered = sorted(members.values(), key=lambda rows: max(len(batch.sequences[r].ids) for r in rows))
    out: list[list[int]] = []
    for rows in ordered:
        if out and len(out[-1]) + len(rows) <= size:
            out[-1].extend(rows)
        else:
            out.append(list(rows))
    return out
