"""The vision tower runs once per distinct image of a batch where no gradient is recorded (chartrl.model.vision),
and the model's outputs are those of the tower run on every copy, to the bit."""

from __future__ import annotations

import copy

import pytest
import torch

from chartrl.model.batching import TokenSequence, collate
from chartrl.model.policy import load_policy
from chartrl.model.vision import distinct_images
from chartrl.rollout.episodes import start_episodes


@pytest.fixture(scope="module")
def batch_of_copies(tiny_policy, synth_rows, default_config):
    """8 sequences showing 2 distinct charts: the first three rows ask about one chart (each row loads its own
    image object), the fourth about another, and each row is sampled twice (as ``rollout.n`` does)."""
    rows = synth_rows["train"][:4]
    assert len({row.images[0] for row in rows[:3]}) == 1 and rows[3].images[0] != rows[0].images[0]
    episodes = start_episodes(
        tiny_policy, rows, with_tools=False, n=2, prompt_config=default_config.prompts, tools=default_config.tools
    )
    return collate(tiny_policy, [TokenSequence(e.prompt_ids, e.images) for e in episodes])


def _tower_images(model) -> list[int]:
    """Records, for every pass of ``model``'s vision tower, how many images it was given."""
    seen: list[int] = []
    model.model.visual.register_forward_pre_hook(
        lambda _, args, kwargs: seen.append(len(kwargs["grid_thw"])), with_kwargs=True
    )
    return seen


def test_distinct_images_are_found_by_their_pixels():
    a, b = torch.arange(8.0).reshape(4, 2), torch.ones(4, 2)
    unique, source = distinct_images([a, b, a.clone(), a, b], [[1, 2, 2]] * 5)
    assert (unique, source) == ([0, 1], [0, 1, 0, 0, 1])
    other_grid = [[1, 2, 2], [1, 1, 4]]  # same pixels, another shape: not the same image
    assert distinct_images([a, a], other_grid) == ([0, 1], [0, 1])


def test_without_gradient_the_tower_sees_each_chart_once_and_the_logits_are_the_same(tiny_model_dir, batch_of_copies):
    from transformers import AutoModelForImageTextToText

    plain = AutoModelForImageTextToText.from_pretrained(str(tiny_model_dir), dtype=torch.float32).eval()
    shared = load_policy(tiny_model_dir).model
    plain_images, shared_images = _tower_images(plain), _tower_images(shared)
    with torch.no_grad():
        expected = plain(**batch_of_copies).logits
        got = shared(**batch_of_copies).logits
    assert (plain_images, shared_images) == ([8], [2])
    assert torch.equal(got, expected)


def test_with_gradient_the_tower_sees_every_copy(tiny_model_dir, batch_of_copies):
    policy = load_policy(tiny_model_dir, train=True)
    images = _tower_images(policy.model)
    policy.model(**batch_of_copies).logits.float().mean().backward()
    assert images == [8]
    assert policy.model.model.visual.patch_embed.proj.weight.grad is not None


def test_a_copy_of_the_model_runs_its_own_tower(tiny_model_dir, batch_of_copies):
    """The trainer's reference model is a deepcopy of the policy: it must not borrow the policy's tower."""
    model = load_policy(tiny_model_dir).model
    reference = copy.deepcopy(model)
    with torch.no_grad():
        reference.model.visual.patch_embed.proj.weight.zero_()
        model_images, reference_images = _tower_images(model), _tower_images(reference)
        moved = reference(**batch_of_copies).logits
        kept = model(**batch_of_copies).logits
    assert (model_images, reference_images) == ([2], [2])
    assert not torch.equal(moved, kept)
