"""GRPO and Dr.GRPO on a toy batch, against docs/training.md's formulas computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from chartrl.train.algorithms import ALGORITHMS, get_algorithm, group_advantages, policy_loss, policy_loss_config

# Two prompts, two responses each. Rewards: group 0 = (1, 0), group 1 = (0.5, 0.5) (degenerate).
SCORES = [1.0, 0.0, 0.5, 0.5]
GROUPS = np.array([0, 0, 1, 1])
# Response masks: 3, 1, 2 and 4 sampled tokens (R = 4).
MASK = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.float32)
LENGTHS = [3, 1, 2, 4]


def test_grpo_advantage_is_normalised_by_the_group_std():
    adv = group_advantages(SCORES, MASK, GROUPS, ALGORITHMS["grpo"])
    # group 0: mean 0.5, unbiased std sqrt(0.5) = 0.7071 -> +-0.5 / 0.7071 = +-0.7071 (eps 1e-6)
    expected = 0.5 / (math.sqrt(0.5) + 1e-6)
    assert adv[0, :3].tolist() == pytest.approx([expected] * 3) and adv[0, 3] == 0
    assert adv[1, 0].item() == pytest.approx(-expected) and adv[1, 1:].abs().sum() == 0
    assert adv[2:].abs().sum() == 0  # degenerate group: std 0 -> (0.5 - 0.5) / eps = 0


def test_drgrpo_advantage_is_mean_centred_only():
    adv = group_advantages(SCORES, MASK, GROUPS, ALGORITHMS["drgrpo"])
    assert adv[0, :3].tolist() == pytest.approx([0.5] * 3) and adv[1, 0].item() == pytest.approx(-0.5)
    assert adv[2:].abs().sum() == 0


def _loss(name, scale):
    algorithm = get_algorithm(name)
    adv = group_advantages(SCORES, MASK, GROUPS, algorithm)
    logprob = torch.full_like(MASK, -1.0)  # on-policy: ratio 1, nothing clipped
    config = policy_loss_config(0.2, int(MASK.sum()), 4, scale)
    loss, metrics = policy_loss(logprob.clone(), logprob, adv, MASK, algorithm, config)
    return loss.item(), metrics, adv


def test_grpo_loss_is_the_token_mean():
    loss, metrics, adv = _loss("grpo", 8)
    a = adv[0, 0].item()
    # -(3 tokens x a + 1 token x (-a) + 0 + 0) / 10 tokens
    assert loss == pytest.approx(-(3 * a - a) / 10)
    assert metrics["actor/pg_clipfrac"] == 0.0


def test_drgrpo_loss_sums_tokens_and_divides_by_the_constant():
    loss, _, _ = _loss("drgrpo", 8)
    # per sequence: -(len x adv); mean over the 4 sequences; / loss_scale_factor 8
    expected = -((3 * 0.5) + (1 * -0.5) + 0 + 0) / 4 / 8
    assert loss == pytest.approx(expected)


def test_drgrpo_weighs_every_token_the_same_whatever_its_response_length():
    """Two right answers, 1 and 4 tokens long: each token's gradient is -adv / (sequences x constant), the same in
    both responses (a per-response mean would give the short one's token 4x the weight; arXiv 2503.20783)."""
    mask = torch.tensor([[1, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.float32)
    adv = torch.ones_like(mask) * mask
    logprob = torch.zeros_like(mask, requires_grad=True)
    config = policy_loss_config(0.2, 5, 2, 4)
    loss, _ = policy_loss(logprob.detach(), logprob, adv, mask, get_algorithm("drgrpo"), config)
    loss.backward()
    grads = logprob.grad[mask.bool()]
    assert torch.allclose(grads, grads[0].expand_as(grads))  # every token: -1 / 2 sequences / 4


def test_micro_batches_add_up_to_the_batch_loss():
    algorithm = get_algorithm("grpo")
    adv = group_advantages(SCORES, MASK, GROUPS, algorithm)
    logprob = torch.full_like(MASK, -1.0)
    old = logprob - 0.1  # ratio e^0.1: within the clip range
    config = policy_loss_config(0.2, int(MASK.sum()), 4, 8)
    whole, _ = policy_loss(old, logprob, adv, MASK, algorithm, config)
    parts = sum(
        policy_loss(old[i : i + 2], logprob[i : i + 2], adv[i : i + 2], MASK[i : i + 2], algorithm, config)[0]
        for i in (0, 2)
    )
    assert parts.item() == pytest.approx(whole.item())


def test_unknown_algorithm_names_the_valid_ones():
    with pytest.raises(KeyError, match="drgrpo, grpo"):
        get_algorithm("ppo")


@pytest.mark.parametrize(
    ("clip_high", "clipped"),
    [
        (None, 1.0),  # symmetric 0.2: a ratio of 1.25 on a positive advantage is clipped
        (0.3, 0.0),  # clip-higher 0.3 (EasyR1's 0.2 / 0.3): 1.25 is inside the range, the token still learns
    ],
)
def test_the_upper_clip_is_its_own_setting(clip_high, clipped):
    mask = torch.ones(1, 2)
    adv = torch.ones(1, 2)  # a right answer: the ratio is pushed up, the upper clip decides
    old = torch.zeros(1, 2)
    logprob = torch.full((1, 2), math.log(1.25))
    config = policy_loss_config(0.2, 2, 1, 2, clip_ratio_high=clip_high)
    _, metrics = policy_loss(old, logprob, adv, mask, get_algorithm("grpo"), config)
    assert metrics["actor/pg_clipfrac"] == pytest.approx(clipped)
