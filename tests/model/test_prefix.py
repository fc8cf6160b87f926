"""A group's prompt computed once (``chartrl.model.prefix``): the same logits and gradients as the whole sequences run
one by one through the decoder, on groups whose samples took different turns (some called a tool, so their own
tokens hold an edited chart), prompts of different lengths (the heads left-padded) and a row that shares its prompt
with no other."""

from __future__ import annotations

import json

import torch

from chartrl.model.batching import TokenSequence, collate, logits_at
from chartrl.model.prefix import shared_heads, shared_prefix_logits_at
from chartrl.rollout.episodes import apply_pass, start_episodes
from chartrl.rollout.sampling import Sampled
from chartrl.train.batch import group_micro_batches, update_batch


def _episodes(policy, rows, config, n):
    """``n`` episodes per row with a written first pass: every other sample calls the mask tool on the asked
    label (a real tool turn with the edited chart), then all answer."""
    episodes = start_episodes(policy, rows, with_tools=True, n=n, prompt_config=config.prompts, tools=config.tools)
    encode = policy.tokenizer.encode
    for k, episode in enumerate(episodes):
        about = episode.row.extra["about"]
        if k % 2 == 0:
            call = json.dumps({"name": "focus_on_x_values_with_mask", "arguments": {"x_values": about}})
            ids = encode(f"<tool_call>\n{call}\n", add_special_tokens=False) + [policy.ids.tool_call_end]
            apply_pass(policy, episode, Sampled(ids, [-1.0] * len(ids), "tool_call"), last_pass=False, tools=config.tools)
        answer = encode(f"<answer>{episode.row.answer}</answer>", add_special_tokens=False) + [policy.ids.eos]
        apply_pass(policy, episode, Sampled(answer, [-1.0] * len(answer), "eos"), last_pass=True, tools=config.tools)
    return episodes


def _rows(synth_rows):
    rows = [r for r in synth_rows["val"] if r.chart_type == "v_bar" and r.extra.get("about")]
    lengths = {}
    for row in rows:  # questions of different lengths, so the heads are left-padded
        lengths.setdefault(len(row.extra["question"]), row)
    return list(lengths.values())[:3]


def _inputs(policy, episodes):
    batch = update_batch(episodes)
    rows, offsets = batch.response_mask.nonzero(as_tuple=True)
    positions = torch.tensor(batch.prompt_lengths)[rows] + offsets - 1  # each response token's predecessor
    return batch, rows, positions


def test_a_shared_prompt_gives_the_logits_and_gradients_of_the_whole_sequences(
    tiny_policy, synth_rows, default_config
):
    rows = _rows(synth_rows)
    episodes = _episodes(tiny_policy, rows, default_config, n=3) + _episodes(tiny_policy, rows[:1], default_config, 1)
    assert any(len(e.images) == 2 for e in episodes) and any(len(e.images) == 1 for e in episodes)
    assert len({len(e.prompt_ids) for e in episodes}) > 1
    batch, picked, positions = _inputs(tiny_policy, episodes)
    groups, _ = shared_heads(batch.sequences, batch.prompt_lengths, tiny_policy.ids.image_pad)
    assert groups == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3]  # the last row's chart is another image object

    results = []
    for compute in (
        lambda: shared_prefix_logits_at(
            tiny_policy.model, tiny_policy, batch.sequences, batch.prompt_lengths, picked, positions
        ),
        lambda: logits_at(
            tiny_policy.model, collate(tiny_policy, batch.sequences, padding_side="right"), picked, positions
        ),
    ):
        tiny_policy.model.zero_grad(set_to_none=True)
        logits = compute()
        (logits.float().log_softmax(-1)[:, :50].sum() + logits.square().mean()).backward()
        grads = {n: p.grad.clone() for n, p in tiny_policy.model.named_parameters() if p.grad is not None}
        results.append((logits.detach(), grads))
    tiny_policy.model.zero_grad(set_to_none=True)
    (shared, shared_grads), (whole, whole_grads) = results
    torch.testing.assert_close(shared, whole, rtol=1e-5, atol=1e-5)
    assert shared_grads.keys() == whole_grads.keys()
    assert any(".visual." in f".{name}" for name in shared_grads)  # the shared charts' tower is trained too
    for name in whole_grads:
        # the same up to the order of floating-point sums (the vision tower's gradients are the largest, ~1e2)
        relative = (shared_grads[name] - whole_grads[name]).norm() / whole_grads[name].norm().clamp_min(1e-12)
        assert relative < 1e-5, (name, float(relative))


def test_no_backward_step_adds_rows_that_share_an_index(tiny_policy, synth_rows, default_config):
    """A group's rows share their head's keys and values, so its gradient sums over the rows. Indexing's backward
    (``keys[index]``) adds rows that repeat an index with atomic adds on two or more torch threads, in whatever
    order they land: training at two threads gave other bits now and then. ``index_select``'s backward adds them in
    row order. No indexing step of the backward graph holds a repeated index."""
    episodes = _episodes(tiny_policy, _rows(synth_rows), default_config, n=3)
    batch, picked, positions = _inputs(tiny_policy, episodes)
    logits = shared_prefix_logits_at(tiny_policy.model, tiny_policy, batch.sequences, batch.prompt_lengths, picked, positions)
    seen, stack, indexing, repeated = set(), [logits.grad_fn], 0, []
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if type(node).__name__ == "IndexBackward0":
            indexing += 1
            indices = torch.broadcast_tensors(*(i for i in node._saved_indices if i is not None))
            addressed = torch.stack(indices, -1).reshape(-1, len(indices))
            if len(torch.unique(addressed, dim=0)) < len(addressed):
                repeated.append(tuple(addressed.shape))
        stack.extend(fn for fn, _ in node.next_functions)
    assert indexing >= 1  # the logits' positions are picked by indexing, each once
    assert repeated == [], repeated


def test_heads_are_shared_by_content_and_image_identity():
    chart, other = object(), object()
    sequences = [
        TokenSequence([1, 9, 9, 2, 3, 4], [chart]),
        TokenSequence([1, 9, 9, 2, 3, 5, 9, 9], [chart, other]),  # the same prompt, then an image of its own
        TokenSequence([1, 9, 9, 2, 3, 4], [other]),  # the same ids on another chart
        TokenSequence([1, 9, 9, 7, 3, 4], [chart]),  # another prompt
    ]
    groups, heads = shared_heads(sequences, [5, 5, 5, 5], image_pad=9)
    assert groups == [0, 0, 1, 2]
    assert heads == [4, 4, 4, 4]


def test_micro_batches_keep_groups_whole_and_hold_every_row_once(tiny_policy, synth_rows, default_config):
    episodes = _episodes(tiny_policy, _rows(synth_rows), default_config, n=3)
    batch = update_batch(episodes)
    for size in (1, 3, 4, 6, 100):
        micro = group_micro_batches(batch, size, tiny_policy.ids.image_pad)
        assert sorted(r for rows in micro for r in rows) == list(range(len(episodes)))
        assert all(len(rows) <= max(size, 3) for rows in micro)
        for rows in micro:  # whole groups of three: episodes 3g, 3g+1, 3g+2
            assert {r // 3 for r in rows} == {r // 3 for r in rows if r % 3 == 0}
            assert len(rows) % 3 == 0
