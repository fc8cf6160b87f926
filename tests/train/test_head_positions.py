"""The losses run the output head only on the positions they read: the same log-probs and losses as a head over
every position (up to float rounding: the head's matrix product over fewer rows may take another kernel, which
with one thread differs in the last bits), on real episodes (with and without a tool turn, right padding) and real
demonstrations. Each check runs with one and with two threads."""

from __future__ import annotations

import random

import pytest
import torch

from chartrl.model.batching import TokenSequence, collate, logits_at
from chartrl.rollout.episodes import run_episodes
from chartrl.rollout.sampling import SamplingParams
from chartrl.train.batch import response_logprobs, update_batch
from chartrl.warmstart.supervised import build_demonstration, supervised_loss


def _full_head_logprobs(policy, batch, temperature):
    """The reference: logits at every position, then the sampled tokens' log-probs (B, R)."""
    tensors = collate(policy, batch.sequences, padding_side="right")
    logprobs = torch.log_softmax(policy.model(**tensors).logits.float() / temperature, dim=-1)  # (B, T, V)
    out = torch.zeros_like(batch.response_mask)
    for row, start in enumerate(batch.prompt_lengths):
        for k in batch.response_mask[row].nonzero().flatten().tolist():
            token = tensors["input_ids"][row, start + k]
            out[row, k] = logprobs[row, start + k - 1, token]
    return out


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


def test_logits_at_equal_the_full_head(tiny_policy, synth_rows, threads):
    rows = synth_rows["val"][:3]
    ids = [tiny_policy.tokenizer.encode(r.answer + " " + r.id, add_special_tokens=False) for r in rows]
    tensors = collate(tiny_policy, [TokenSequence(i) for i in ids], padding_side="right")
    with torch.no_grad():
        full = tiny_policy.model(**tensors).logits
        picked_rows, positions = torch.tensor([0, 1, 2, 2]), torch.tensor([0, len(ids[1]) - 1, 1, 0])
        picked = logits_at(tiny_policy.model, tensors, picked_rows, positions)
        torch.testing.assert_close(picked, full[picked_rows, positions], rtol=1e-5, atol=1e-6)
        assert not torch.allclose(picked[0], full[1, 0], rtol=1e-3)  # another position's logits are far off


def test_response_logprobs_match_a_head_over_every_position(tiny_policy, synth_rows, default_config, threads):
    torch.manual_seed(3)
    rows = [r for r in synth_rows["val"] if r.chart_type in ("v_bar", "h_bar") and r.extra.get("about")][:3]
    episodes = run_episodes(
        tiny_policy,
        rows,
        with_tools=True,
        n=3,
        params=SamplingParams(max_new_tokens=24, temperature=1.0),
        prompt_config=default_config.prompts,
        tools=default_config.tools,
        batch_size=9,
    )
    assert len({len(e.runtime_ids) for e in episodes}) > 1  # right padding is exercised
    batch = update_batch(episodes)
    with torch.no_grad():
        ours = response_logprobs(tiny_policy.model, tiny_policy, batch, 0.7)
        reference = _full_head_logprobs(tiny_policy, batch, 0.7)
    torch.testing.assert_close(ours, reference, rtol=1e-5, atol=1e-6)
    assert bool((ours[batch.response_mask == 0] == 0).all())


def test_response_logprobs_carry_gradients_to_every_parameter_the_full_head_does(
    tiny_policy, synth_rows, default_config
):
    torch.manual_seed(4)
    episodes = run_episodes(
        tiny_policy,
        synth_rows["val"][:2],
        with_tools=True,
        n=2,
        params=SamplingParams(max_new_tokens=16, temperature=1.0),
        prompt_config=default_config.prompts,
        tools=default_config.tools,
        batch_size=4,
    )
    batch = update_batch(episodes)
    grads = []
    for compute in (
        lambda: response_logprobs(tiny_policy.model, tiny_policy, batch, 1.0),
        lambda: _full_head_logprobs(tiny_policy, batch, 1.0),
    ):
        tiny_policy.model.zero_grad(set_to_none=True)
        compute().sum().backward()
        grads.append({n: p.grad.clone() for n, p in tiny_policy.model.named_parameters() if p.grad is not None})
    tiny_policy.model.zero_grad(set_to_none=True)
    ours, reference = grads
    assert ours.keys() == reference.keys()
    for name in reference:
        torch.testing.assert_close(ours[name], reference[name], rtol=1e-4, atol=1e-6, msg=name)


def test_supervised_loss_matches_a_head_over_every_position(tiny_policy, synth_rows, default_config):
    cfg = default_config.warmstart
    rng = random.Random(0)
    demos = [
        build_demonstration(tiny_policy, row, rng, cfg, default_config.prompts, default_config.tools)
        for row in synth_rows["train"][:6]
    ]
    tensors = collate(tiny_policy, [TokenSequence(d.ids, d.images) for d in demos], padding_side="right")
    mask = torch.zeros_like(tensors["input_ids"])
    for row, demo in enumerate(demos):
        mask[row, : len(demo.mask)] = torch.tensor(demo.mask)
    with torch.no_grad():
        logits = tiny_policy.model(**tensors).logits[:, :-1].float()
        token_loss = torch.nn.functional.cross_entropy(
            logits.transpose(1, 2), tensors["input_ids"][:, 1:], reduction="none"
        )
        weights = mask[:, 1:].float()
        reference = (token_loss * weights).sum() / weights.sum()
        assert supervised_loss(tiny_policy, demos).item() == pytest.approx(reference.item(), rel=1e-6)


def test_supervised_loss_in_length_ordered_micro_batches_is_the_whole_batch_loss(
    tiny_policy, synth_rows, default_config
):
    """Groups of demonstrations in length order (warmstart.micro_batch_size) pad less and give the whole batch's
    loss and gradient, up to the order of floating-point sums."""
    cfg = default_config.warmstart
    rng = random.Random(1)
    demos = [
        build_demonstration(tiny_policy, row, rng, cfg, default_config.prompts, default_config.tools)
        for row in synth_rows["train"][:7]
    ]
    assert len({len(d.ids) for d in demos}) > 1  # lengths differ, so the groups pad differently

    whole, whole_grads = _loss_and_grads(tiny_policy, demos, None)
    for size in (1, 3, 7):
        loss, grads = _loss_and_grads(tiny_policy, demos, size)
        assert loss == pytest.approx(whole, rel=1e-6)
        assert grads.keys() == whole_grads.keys()
        for name in whole_grads:
            torch.testing.assert_close(grads[name], whole_grads[name], rtol=1e-4, atol=1e-6, msg=name)


def test_a_batch_that_fits_in_one_micro_batch_runs_as_it_is(tiny_policy, synth_rows, default_config):
    """warmstart.micro_batch_size at or above the batch (the embedded default's 16 under an overlay's batch of 8)
    changes nothing: the same loss and gradient to the bit, not a reordered batch."""
    cfg = default_config.warmstart
    rng = random.Random(2)
    demos = [
        build_demonstration(tiny_policy, row, rng, cfg, default_config.prompts, default_config.tools)
        for row in synth_rows["train"][:5]
    ]
    assert sorted(len(d.ids) for d in demos) != [len(d.ids) for d in demos]  # length order would reorder them

    whole, whole_grads = _loss_and_grads(tiny_policy, demos, None)
    for size in (5, 16):
        loss, grads = _loss_and_grads(tiny_policy, demos, size)
        assert loss == whole
        assert all(torch.equal(grads[name], whole_grads[name]) for name in whole_grads)


def _loss_and_grads(policy, demos, micro_batch_size):
    policy.model.zero_grad(set_to_none=True)
    loss = supervised_loss(policy, demos, micro_batch_size)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in policy.model.named_parameters() if p.grad is not None}
    policy.model.zero_grad(set_to_none=True)
    return loss.item(), grads
