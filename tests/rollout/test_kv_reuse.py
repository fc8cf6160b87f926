"""Key/value reuse across generation passes: pass 2 continuing from pass 1's cache generates the same tokens as
re-prefilling the whole conversation, greedy and sampled, on a left-padded batch where some rows call a tool
(and get a second pass) and some do not.

The tiny model's weights are random, so it does not write tool calls itself: pass 1 is its real generation, then
the rows chosen to call a tool get a call written after what it sampled (``<tool_call>...</tool_call>``), run on
the chart, and the tool turn (observation text and the edited image's tokens) appended by the rollout's own
``apply_pass``. Pass 2 then has what reuse is about: a prefix pass 1 computed and new tokens with an image.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json

import pytest
import torch

from chartrl.model import positions
from chartrl.model.batching import TokenSequence, collate
from chartrl.rollout import kv_reuse
from chartrl.rollout.episodes import apply_pass, run_episodes, start_episodes
from chartrl.rollout.sampling import Sampled, SamplingParams, sample


def _call(row) -> str:
    axis = "x_values" if row.chart_type == "v_bar" else "y_values"
    name = f"focus_on_{axis[0]}_values_with_mask"
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": {axis: row.extra["about"]}}) + "\n"


def _stop_ids(policy):
    return [policy.ids.eos, policy.ids.tool_call_end]


def _many_stops(policy):
    """The stop ids and a seventh of the vocabulary: the random tiny model rarely samples a stop token, and with
    these its rows stop at different steps."""
    return [*_stop_ids(policy), *range(200, policy.tokenizer.vocab_size, 7)]


def _episodes(policy, rows, config):
    return start_episodes(policy, rows, with_tools=True, n=1, prompt_config=config.prompts, tools=config.tools)


@contextlib.contextmanager
def _one_thread():
    """torch at one thread, as the miniature's jobs run (at two, the kernels may split the work by the batch's size
    and move the last bits)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _two_passes(policy, rows, config, params, *, seed, pass_one=None):
    """Pass 1 on every row (caches kept), a tool turn on the bar-chart rows, and pass 2 on those with and without
    reuse. Returns (pass-2 sequences, pass-2 results without reuse, with reuse, pass-1 results, the pass-1 caches
    of the calling rows)."""
    episodes = _episodes(policy, rows, config)
    first = [TokenSequence(e.runtime_ids, e.images) for e in episodes]
    torch.manual_seed(seed)
    sampled = pass_one or sample(policy, first, params, _stop_ids(policy), batch_size=8, keep_cache=True)
    callers, caches = [], []
    for row, episode, s in zip(rows, episodes, sampled, strict=True):
        if row.chart_type not in ("v_bar", "h_bar") or not row.extra.get("about"):
            continue  # no tool call: the row is done after pass 1
        call = policy.tokenizer.encode(_call(row), add_special_tokens=False) + [policy.ids.tool_call_end]
        ids = s.ids[: s.fed] if s.stop in ("length", "vision_token") else s.ids
        written = Sampled(ids=ids + call, logprobs=[-1.0] * len(ids + call), stop="tool_call")
        apply_pass(policy, episode, written, last_pass=False, tools=config.tools)
        callers.append(episode)
        caches.append(s.cache)
    second = [TokenSequence(e.runtime_ids, e.images) for e in callers]
    torch.manual_seed(seed + 1)
    old = sample(policy, second, dataclasses.replace(params, kv_reuse=False), _stop_ids(policy), batch_size=8)
    torch.manual_seed(seed + 1)
    new = sample(policy, second, params, _stop_ids(policy), batch_size=8, caches=caches)
    return second, old, new, sampled, caches


@pytest.fixture(scope="module")
def greedy(tiny_policy, synth_rows, default_config):
    rows = synth_rows["val"][:8]
    return _two_passes(tiny_policy, rows, default_config, SamplingParams(max_new_tokens=24, greedy=True), seed=0)


def test_greedy_pass_two_is_token_for_token_the_full_reprefill(greedy, synth_rows):
    second, old, new, first, _ = greedy
    assert 0 < len(second) < len(first)  # rows with and without a tool call
    assert len({len(s.ids) for s in second}) > 1  # left padding in pass 2
    assert any(len(s.images) == 2 for s in second)  # an edited image among the new tokens
    assert [s.ids for s in new] == [s.ids for s in old]
    assert [s.stop for s in new] == [s.stop for s in old]
    worst = max(abs(a - b) for o, n in zip(old, new, strict=True) for a, b in zip(o.logprobs, n.logprobs, strict=True))
    assert worst < 1e-4, worst


def test_pass_two_reuses_what_pass_one_computed(greedy):
    """Everything pass 1 computed for a calling row (its prompt and each sampled token it fed back) is reused; only
    the written call and the tool turn are prefilled."""
    second, old, new, _, caches = greedy
    assert all(s.reused == 0 for s in old)
    for sequence, s, cache in zip(second, new, caches, strict=True):
        assert s.reused == len(cache.ids) < len(sequence.ids)
        assert sequence.ids[: s.reused] == cache.ids


def test_new_tokens_get_the_positions_of_the_whole_sequence(tiny_policy, greedy):
    """Positions built as the cached prefix's + the new part's own shifted == get_rope_index over the whole."""
    second, _, new, _, _ = greedy
    k = next(i for i, s in enumerate(second) if len(s.images) == 2)
    ids, images = second[k].ids, second[k].images
    batch = collate(tiny_policy, [TokenSequence(ids, images)])
    whole, _ = positions.vl_model(tiny_policy).get_rope_index(
        batch["input_ids"], mm_token_type_ids=batch["mm_token_type_ids"], image_grid_thw=batch["image_grid_thw"]
    )
    cut = new[k].reused
    assert tiny_policy.ids.image_pad in ids[cut:]  # the edited image is among the new tokens
    tail = positions.rope_positions(tiny_policy, ids[cut:], batch["image_grid_thw"][1:])
    rebuilt = torch.cat([whole[:, 0, :cut], tail + int(whole[:, 0, :cut].max()) + 1], dim=1)
    assert torch.equal(rebuilt, whole[:, 0])


def test_sampled_pass_two_with_reuse_is_reproducible_and_draws_as_before(tiny_policy, synth_rows, default_config):
    rows = synth_rows["val"][:8]
    params = SamplingParams(max_new_tokens=16, temperature=0.8, top_p=0.95)
    second, old, new, first, _ = _two_passes(tiny_policy, rows, default_config, params, seed=3)
    _, _, again, _, _ = _two_passes(tiny_policy, rows, default_config, params, seed=3)
    assert all(s.reused > 0 for s in new)
    assert [s.ids for s in new] == [s.ids for s in again]
    # the same random draws in the same order; float noise this small leaves the same tokens
    assert [s.ids for s in new] == [s.ids for s in old]


def test_run_episodes_reports_reuse_and_switching_it_off_changes_no_token(tiny_policy, synth_rows, default_config):
    rows = synth_rows["val"][:4]
    results = {}
    for reuse in (True, False):
        torch.manual_seed(0)
        stats: list[dict] = []
        episodes = run_episodes(
            tiny_policy,
            rows,
            with_tools=True,
            n=2,
            params=SamplingParams(max_new_tokens=12, greedy=True, kv_reuse=reuse),
            prompt_config=default_config.prompts,
            tools=default_config.tools,
            batch_size=8,
            stats=stats,
        )
        results[reuse] = ([e.response_ids for e in episodes], stats, [len(e.prompt_ids) for e in episodes])
    assert results[True][0] == results[False][0]
    # pass 1: the two samples of a prompt share one prefill of the prompt but its last token
    prompt_lengths = results[True][2]
    assert results[True][1][0]["reused_prefix_tokens"] == sum(length - 1 for length in prompt_lengths)
    assert results[False][1][0]["reused_prefix_tokens"] == 0


def test_reusable_prefix_never_splits_or_swaps_an_image_and_leaves_a_token_to_feed():
    chart, edited = object(), object()
    cache = kv_reuse.RowCache(ids=[1, 2, 9, 9, 9, 3], keys=[], values=[], positions=None, images=[chart])

    def reusable(ids, images):
        return kv_reuse.reusable_prefix(cache, TokenSequence(ids, images), image_pad=9)

    assert reusable([1, 2, 9, 9, 9, 3, 4], [chart]) == 6
    assert reusable([1, 2, 9, 9, 9, 3], [chart]) == 5  # one token left to feed
    assert reusable([1, 2, 9, 9, 7], [chart]) == 2  # never half an image
    assert reusable([1, 2, 9, 9, 9, 3, 4], [edited]) == 2  # the same pad ids, another image
    assert kv_reuse.reusable_prefix(None, TokenSequence([1, 2], []), image_pad=9) == 0


def test_a_model_with_other_logits_processors_falls_back_to_the_full_reprefill():
    from transformers import GenerationConfig

    class Model:
        generation_config = GenerationConfig(temperature=0.1, top_k=1, top_p=0.001, repetition_penalty=1.05)

    assert kv_reuse.plain_generation(Model()) == ["repetition_penalty"]
    Model.generation_config = GenerationConfig(do_sample=True)
    assert kv_reuse.plain_generation(Model()) == []


def test_the_appending_cache_changes_no_bit_of_either_pass(tiny_policy, synth_rows, default_config, monkeypatch):
    """Both passes (pass 1 through ``generate``, pass 2 through the reuse loop), sampled: the same tokens, the same
    log-probs and the same kept keys/values, to the last bit, as with transformers' own ``DynamicCache``; 6 new
    tokens of reserve make the buffers grow during decoding."""
    from transformers import DynamicCache

    from chartrl.rollout import cache

    rows = synth_rows["val"][:8]
    params = SamplingParams(max_new_tokens=16, temperature=0.8, top_p=0.95)
    small = cache.appending_cache
    monkeypatch.setattr(cache, "appending_cache", lambda config, reserve, data=None: small(config, 6, data))
    appending = _two_passes(tiny_policy, rows, default_config, params, seed=5)
    assert any(isinstance(layer, cache.AppendingLayer) for layer in small(tiny_policy.model.config, 1).layers)

    def dynamic(config, reserve, data=None):
        return DynamicCache(ddp_cache_data=data, config=config)

    monkeypatch.setattr(cache, "appending_cache", dynamic)
    plain = _two_passes(tiny_policy, rows, default_config, params, seed=5)
    for results in (1, 2, 3):  # pass 2 without reuse, with reuse, pass 1
        for a, b in zip(appending[results], plain[results], strict=True):
            assert (a.ids, a.logprobs, a.stop, a.reused) == (b.ids, b.logprobs, b.stop, b.reused)
    for a, b in zip(appending[4], plain[4], strict=True):  # what pass 1 kept for pass 2
        assert a.ids == b.ids and torch.equal(a.positions, b.positions)
        assert all(torch.equal(x, y) for x, y in zip(a.keys + a.values, b.keys + b.values, strict=True))


def test_an_appending_layer_holds_what_concatenation_would():
    from chartrl.rollout.cache import AppendingLayer

    layer, chunks = AppendingLayer(reserve=2), [torch.randn(3, 2, n, 4) for n in (5, 1, 1, 1, 7, 1)]
    for k, chunk in enumerate(chunks):
        keys, values = layer.update(chunk, -chunk)
        expected = torch.cat(chunks[: k + 1], dim=-2)
        assert torch.equal(keys, expected) and torch.equal(values, -expected)
        assert layer.get_seq_length() == expected.shape[-2]
    assert layer._key_buffer.shape[-2] >= 16  # it grew past its first buffer (5 + 2) twice


def test_samples_of_one_prompt_prefilled_once_draw_what_generate_draws(tiny_policy, synth_rows, default_config):
    """Pass 1 with rollout.n > 1: each prompt's keys/values computed once and copied to its samples' rows give the
    tokens (sampled, one seed) and log-probs of generate on every row's whole prompt."""
    rows = synth_rows["val"][:3]
    results = {}
    for reuse in (True, False):
        torch.manual_seed(5)
        episodes = run_episodes(
            tiny_policy,
            rows,
            with_tools=False,
            n=3,
            params=SamplingParams(max_new_tokens=12, temperature=1.0, kv_reuse=reuse),
            prompt_config=default_config.prompts,
            tools=default_config.tools,
            batch_size=9,
        )
        results[reuse] = episodes
    shared, whole = results[True], results[False]
    assert [e.response_ids for e in shared] == [e.response_ids for e in whole]
    assert len({tuple(e.response_ids) for e in whole}) > 3  # the samples of a prompt differ: a real draw
    for a, b in zip(shared, whole, strict=True):
        assert (
            max((abs(x - y) for x, y in zip(a.response_logprobs, b.response_logprobs, strict=True)), default=0) < 1e-4
        )


def test_rows_that_stopped_leave_the_decoding_batch_and_change_no_bit(tiny_policy, synth_rows, default_config):
    """Two sampled passes (the first from a group's shared prompt, the second continuing from the first's kept
    keys/values), with rows that stop at different steps: dropping the stopped rows from the model's batch gives
    the tokens, log-probs and kept keys/values of decoding every row to the end, to the last bit, and the model
    runs fewer rows. At one thread (``_one_thread``), with the wide stop set (``_many_stops``)."""
    from chartrl.rollout import kv_reuse

    policy = tiny_policy
    stops = _many_stops(policy)
    episodes = _episodes(policy, synth_rows["val"][:4], default_config)
    first = [TokenSequence(e.runtime_ids, e.images) for e in episodes for _ in range(2)]  # two samples a prompt
    params = SamplingParams(max_new_tokens=20, temperature=1.0)
    text = policy.tokenizer.encode(" the answer", add_special_tokens=False)
    runs, rows = {}, []
    hook = policy.model.register_forward_pre_hook(
        lambda module, args, kwargs: rows.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    try:
        with _one_thread():
            for floor in (kv_reuse.MIN_ROWS, 10**6):  # dropping rows, and never dropping (a floor above the batch)
                rows.clear()
                original, kv_reuse.MIN_ROWS = kv_reuse.MIN_ROWS, floor
                try:
                    torch.manual_seed(11)
                    one = sample(policy, first, params, stops, batch_size=8, keep_cache=True)
                    second = [
                        TokenSequence(s.ids + o.ids[: o.fed] + text, s.images) for s, o in zip(first, one, strict=True)
                    ]
                    two = sample(
                        policy, second, params, stops, batch_size=8, caches=[o.cache for o in one], keep_cache=True
                    )
                finally:
                    kv_reuse.MIN_ROWS = original
                runs[floor] = (one, two, sum(rows))
    finally:
        hook.remove()
    dropping, whole = runs[kv_reuse.MIN_ROWS], runs[10**6]
    assert len({len(s.ids) for s in whole[0]}) > 2  # rows stop at different steps
    assert all(s.reused > 0 for s in whole[1])
    for a_pass, b_pass in zip(dropping[:2], whole[:2], strict=True):
        for a, b in zip(a_pass, b_pass, strict=True):
            assert (a.ids, a.logprobs, a.stop, a.fed, a.reused) == (b.ids, b.logprobs, b.stop, b.fed, b.reused)
            assert a.cache.ids == b.cache.ids and torch.equal(a.cache.positions, b.cache.positions)
            pairs = zip(a.cache.keys + a.cache.values, b.cache.keys + b.cache.values, strict=True)
            assert all(torch.equal(x, y) for x, y in pairs)
    assert dropping[2] < whole[2]  # row-steps the model ran


def test_a_pass_with_nothing_cached_draws_what_generate_draws_to_the_bit(tiny_policy, synth_rows, default_config):
    """A first pass of distinct prompts (no group to share a prompt) runs the reuse loop from an empty cache:
    greedy and sampled, the tokens, log-probs and stops of transformers' ``generate``, to the last bit. At one
    thread (``_one_thread``); sampled, with the wide stop set (``_many_stops``) so that rows stop at different
    steps (greedy, the random model repeats one token)."""
    policy = tiny_policy
    sequences = [
        TokenSequence(e.runtime_ids, e.images) for e in _episodes(policy, synth_rows["val"][:8], default_config)
    ]
    cases = [
        (SamplingParams(max_new_tokens=20, greedy=True), _stop_ids(policy)),
        (SamplingParams(max_new_tokens=20, top_p=0.9), _many_stops(policy)),
    ]
    with _one_thread():
        for params, stop_ids in cases:
            results = {}
            for reuse in (True, False):
                torch.manual_seed(13)
                results[reuse] = sample(policy, sequences, dataclasses.replace(params, kv_reuse=reuse), stop_ids, 8)
            for a, b in zip(results[True], results[False], strict=True):
                assert (a.ids, a.logprobs, a.stop, a.fed) == (b.ids, b.logprobs, b.stop, b.fed)
    assert len({len(s.ids) for s in results[False]}) > 2  # sampled: rows stop at different steps
