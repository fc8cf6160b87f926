"""GRPO and Dr.GRPO, as two settings of verl's own ``core_algos`` (not a reimplementation).

- ``grpo``: advantage = (reward - group mean) / (group std + eps); token losses averaged over all response tokens
  of the batch (``token-mean``).
- ``drgrpo`` (Liu et al. 2025, "Understanding R1-Zero-Like Training", arXiv 2503.20783): advantage = reward -
  group mean (no std division, ``norm_adv_by_std_in_grpo=False``); each response's token losses are summed and
  divided by a constant, the maximum response length, not by its own length (``seq-mean-token-sum-norm`` with
  ``loss_scale_factor``), which removes GRPO's length bias.

The policy loss is verl's PPO-clip (``get_policy_loss_fn("vanilla")``); the KL to a frozen reference is verl's
``kl_penalty(..., "low_var_kl")``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Algorithm:
    name: str
    norm_adv_by_std_in_grpo: bool
    loss_agg_mode: str


ALGORITHMS: dict[str, Algorithm] = {
    "grpo": Algorithm("grpo", norm_adv_by_std_in_grpo=True, loss_agg_mode="token-mean"),
    "drgrpo": Algorithm("drgrpo", norm_adv_by_std_in_grpo=False, loss_agg_mode="seq-mean-token-sum-norm"),
    # the multiple-choice GeoQA recipe's group-relative advantage without std normalisation, token-mean loss
    "grpo_mean": Algorithm("grpo_mean", norm_adv_by_std_in_grpo=False, loss_agg_mode="token-mean"),
}


def get_algorithm(name: str) -> Algorithm:
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise KeyError(f"unknown algorithm {name!r}; known: {', '.join(sorted(ALGORITHMS))}") from None


def group_advantages(scores, response_mask, group_index: np.ndarray, algorithm: Algorithm):
    """Per-token advantages (B, R) from one scalar score per response (B,), grouped by prompt."""
    import torch
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    token_level_rewards = torch.zeros_like(response_mask, dtype=torch.float32)  # (B, R)
    token_level_rewards[:, 0] = torch.as_tensor(scores, dtype=torch.float32)  # outcome reward: the sum is the score
    advantages, _ = compute_grpo_outcome_advantage(
        token_level_rewards=token_level_rewards,
        response_mask=response_mask.float(),
        index=group_index,
        norm_adv_by_std_in_grpo=algorithm.norm_adv_by_std_in_grpo,
    )
    return advantages  # (B, R)


def policy_loss_config(
    clip_ratio: float,
    batch_num_tokens: int,
    global_batch_size: int,
    loss_scale_factor: int,
    clip_ratio_high: float | None = None,
):
    """The actor config verl's policy loss reads: the clip range (``clip_ratio`` below 1, ``clip_ratio_high``
    above it, the same when not given) and the whole mini-batch's sizes, so micro-batch losses add up to the
    mini-batch loss (``agg_loss`` divides by these, not by the micro-batch's own)."""
    from omegaconf import OmegaConf

    return OmegaConf.create(
        {
            "clip_ratio": clip_ratio,
            "clip_ratio_low": clip_ratio,
            "clip_ratio_high": clip_ratio if clip_ratio_high is None else clip_ratio_high,
            "clip_ratio_c": 3.0,
            "global_batch_info": {
                "dp_size": 1,
                "batch_num_tokens": batch_num_tokens,
                "global_batch_size": global_batch_size,
                "loss_scale_factor": loss_scale_factor,
            },
        }
    )


def policy_loss(old_logprob, logprob, advantages, response_mask, algorithm: Algorithm, config) -> tuple[Any, dict]:
    """verl's PPO-clip loss, aggregated the algorithm's way. All tensors (B, R)."""
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    return get_policy_loss_fn("vanilla")(
        old_log_prob=old_logprob,
        log_prob=logprob,
        advantages=advantages,
        response_mask=response_mask,
        loss_agg_mode=algorithm.loss_agg_mode,
        config=config,
    )


def kl_loss(logprob, ref_logprob, response_mask, algorithm: Algorithm, config):
    """KL(pi || ref) with verl's low-variance estimator, aggregated like the policy loss."""
    from verl.trainer.ppo.core_algos import agg_loss, kl_penalty

    kl = kl_penalty(logprob, ref_logprob, "low_var_kl")  # (B, R)
    return agg_loss(
        loss_mat=kl, loss_mask=response_mask, loss_agg_mode=algorithm.loss_agg_mode, **config.global_batch_info
    )
