"""The two-pass rollout: token layout, loss masks, images and log-probs, on the tiny model."""

from __future__ import annotations

import json

import pytest
import torch

from chartrl.model.batching import TokenSequence, collate, image_token_count
from chartrl.rollout.episodes import apply_pass, run_episodes, start_episodes
from chartrl.rollout.sampling import Sampled, SamplingParams


def _bar_rows(rows, n):
    return [r for r in rows if r.chart_type in ("v_bar", "h_bar") and r.extra.get("about")][:n]


def _scripted(policy, text: str, stop: str) -> Sampled:
    """A pass whose completion is ``text`` (what a trained model would write), ending with its stop token."""
    ids = policy.tokenizer.encode(text, add_special_tokens=False)
    ids += [policy.ids.tool_call_end] if stop == "tool_call" else [policy.ids.eos] if stop == "eos" else []
    return Sampled(ids=ids, logprobs=[-0.5] * len(ids), stop=stop)


def _call(row) -> str:
    axis = "x_values" if row.chart_type == "v_bar" else "y_values"
    name = f"focus_on_{axis[0]}_values_with_mask"
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": {axis: row.extra["about"]}}) + "\n"


def scripted_tool_episode(policy, row, config, answer: str = "<answer>42</answer>"):
    (episode,) = start_episodes(policy, [row], with_tools=True, n=1, prompt_config=config.prompts, tools=config.tools)
    apply_pass(policy, episode, _scripted(policy, _call(row), "tool_call"), last_pass=False, tools=config.tools)
    apply_pass(policy, episode, _scripted(policy, answer, "eos"), last_pass=True, tools=config.tools)
    return episode


def check_episode(policy, episode):
    """Invariants every episode must satisfy."""
    assert len(episode.response_ids) == len(episode.response_mask) == len(episode.response_logprobs)
    sampled = sum(t["tokens"] for t in episode.turns if t["role"] == "assistant")
    assert episode.sampled_tokens == sampled  # mask 1 exactly on sampled tokens
    for mask, logprob in zip(episode.response_mask, episode.response_logprobs, strict=True):
        assert (logprob <= 0) if mask else (logprob == 0.0)
    image_tokens = sum(1 for t in episode.runtime_ids if t == policy.ids.image_pad)
    assert image_tokens == sum(image_token_count(policy, image) for image in episode.images)
    # no image token is ever trained on
    masked = [t for t, m in zip(episode.response_ids, episode.response_mask, strict=True) if m]
    assert not set(masked) & set(policy.ids.vision)


def test_scripted_two_pass_episode_layout(tiny_policy, synth_rows, default_config):
    row = _bar_rows(synth_rows["val"], 1)[0]
    episode = scripted_tool_episode(tiny_policy, row, default_config)
    check_episode(tiny_policy, episode)
    assert episode.tool_outcome == "executed" and len(episode.images) == 2
    assert [t["role"] for t in episode.turns] == ["assistant", "tool", "assistant"]
    tok = tiny_policy.tokenizer
    text = tok.decode(episode.response_ids)
    # the sampled call, the turn closed by a boundary <|im_end|>, the tool turn with the edited image, the answer
    assert text.startswith(_call(row) + "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n<|vision_start|>")
    assert text.endswith("</tool_response><|im_end|>\n<|im_start|>assistant\n<answer>42</answer><|im_end|>")
    trained = tok.decode([t for t, m in zip(episode.response_ids, episode.response_mask, strict=True) if m])
    assert trained == _call(row) + "</tool_call><answer>42</answer><|im_end|>"


def test_layout_equals_rendering_the_whole_conversation_at_once(tiny_policy, synth_rows, default_config):
    """Built turn by turn (as verl's Continuous Token does) == the chat template applied to the final messages."""
    row = _bar_rows(synth_rows["val"], 1)[0]
    episode = scripted_tool_episode(tiny_policy, row, default_config)
    messages = list(episode.messages)
    messages[1] = {"role": "assistant", "content": _call(row) + "</tool_call>"}  # the raw text the model wrote
    messages.append({"role": "assistant", "content": "<answer>42</answer>"})
    text = tiny_policy.processor.apply_chat_template(messages, tokenize=False)
    full = tiny_policy.processor(text=[text], images=episode.images, return_tensors="pt")["input_ids"][0].tolist()
    assert episode.runtime_ids == full[: len(episode.runtime_ids)]
    assert full[len(episode.runtime_ids) :] == tiny_policy.tokenizer.encode("\n", add_special_tokens=False)


def test_sampled_episodes_keep_every_invariant(tiny_policy, synth_rows, default_config):
    torch.manual_seed(0)
    rows = synth_rows["val"][:4]
    stats = []
    episodes = run_episodes(
        tiny_policy,
        rows,
        with_tools=True,
        n=2,
        params=SamplingParams(max_new_tokens=24),
        prompt_config=default_config.prompts,
        tools=default_config.tools,
        batch_size=8,
        stats=stats,
    )
    assert len(episodes) == 8 and [e.row.id for e in episodes[:2]] == [rows[0].id] * 2
    for episode in episodes:
        check_episode(tiny_policy, episode)
    assert stats[0]["sequences"] == 8 and stats[0]["recomputed_prefix_tokens"] == 0


def test_sampler_logprobs_are_the_policy_logprobs(tiny_policy, synth_rows, default_config):
    """The old log-probs of the PPO ratio: a training forward over the finished episode gives the same numbers."""
    torch.manual_seed(1)
    row = _bar_rows(synth_rows["val"], 1)[0]
    episodes = run_episodes(
        tiny_policy,
        [row],
        with_tools=True,
        n=3,
        params=SamplingParams(max_new_tokens=16, temperature=0.7),
        prompt_config=default_config.prompts,
        tools=default_config.tools,
        batch_size=3,
    )
    for episode in episodes:
        batch = collate(tiny_policy, [TokenSequence(episode.runtime_ids, episode.images)], padding_side="right")
        with torch.no_grad():
            logits = tiny_policy.model(**batch).logits[0].float() / 0.7  # (T, V)
        logprobs = torch.log_softmax(logits[:-1], dim=-1)  # position t predicts token t+1
        start = len(episode.prompt_ids)
        for k, (token, mask, old) in enumerate(
            zip(episode.response_ids, episode.response_mask, episode.response_logprobs, strict=True)
        ):
            if mask:
                assert logprobs[start + k - 1, token].item() == pytest.approx(old, abs=2e-4)


def test_a_sampled_vision_token_is_cut_off_and_counted(tiny_policy, synth_rows, default_config):
    row = synth_rows["val"][0]
    (episode,) = start_episodes(
        tiny_policy, [row], with_tools=True, n=1, prompt_config=default_config.prompts, tools=default_config.tools
    )
    ids = tiny_policy.tokenizer.encode("The value", add_special_tokens=False)
    apply_pass(
        tiny_policy,
        episode,
        Sampled(ids=ids, logprobs=[-1.0] * len(ids), stop="vision_token"),
        last_pass=False,
        tools=default_config.tools,
    )
    assert episode.done and episode.vision_tokens == 1 and episode.tool_outcome == "none"
    check_episode(tiny_policy, episode)


def test_malformed_and_refused_calls_are_data(tiny_policy, synth_rows, default_config):
    row = _bar_rows(synth_rows["val"], 1)[0]
    for call, outcome in (
        ('<tool_call>\n{"name": "focus_on_x_values_with_mask", "arguments": {"x_values": [\n', "malformed"),
        ('<tool_call>\n{"name": "focus_on_x_values_with_mask", "arguments": {"x_values": ["Atlantis"]}}\n', "failed"),
    ):
        (episode,) = start_episodes(
            tiny_policy, [row], with_tools=True, n=1, prompt_config=default_config.prompts, tools=default_config.tools
        )
        apply_pass(
            tiny_policy, episode, _scripted(tiny_policy, call, "tool_call"), last_pass=False, tools=default_config.tools
        )
        assert not episode.done and episode.tool_outcome == outcome
        assert episode.turns[-1]["role"] == "tool" and not episode.turns[-1]["image"]  # an error line, no image
        check_episode(tiny_policy, episode)


def _placebo_episode(policy, row, config, observation: str, call: str | None = None):
    (episode,) = start_episodes(policy, [row], with_tools=True, n=1, prompt_config=config.prompts, tools=config.tools)
    episode.observation = observation
    text = call if call is not None else _call(row)
    apply_pass(policy, episode, _scripted(policy, text, "tool_call"), last_pass=False, tools=config.tools)
    apply_pass(policy, episode, _scripted(policy, "<answer>42</answer>", "eos"), last_pass=True, tools=config.tools)
    return episode


def test_tool_placebo_shows_the_unedited_chart_and_nothing_else_changes(tiny_policy, synth_rows, default_config):
    """The tool-placebo control: the same call, outcome, observation line and token layout; only the image the
    tool turn shows is the original chart instead of the edited one."""
    import numpy as np

    row = _bar_rows(synth_rows["val"], 1)[0]
    edited = _placebo_episode(tiny_policy, row, default_config, "edited")
    placebo = _placebo_episode(tiny_policy, row, default_config, "unedited")
    check_episode(tiny_policy, placebo)
    original, shown_edited, shown_placebo = (
        np.asarray(image) for image in (edited.images[0], edited.images[1], placebo.images[1])
    )
    assert not np.array_equal(shown_edited, original)  # the mask changed the chart
    assert np.array_equal(shown_placebo, original)  # the placebo shows the chart as it was
    assert placebo.images[0] is not placebo.images[1]  # a copy, not the prompt's image object
    assert placebo.turns == edited.turns and placebo.tool_outcomes == edited.tool_outcomes == ["executed"]
    assert placebo.tool_call_texts == edited.tool_call_texts and placebo.messages[-1]["content"] is not None
    assert placebo.response_ids == edited.response_ids and placebo.response_mask == edited.response_mask
    # a call the tool refuses shows no image under either observation
    bad = "<tool_call>\n" + json.dumps({"name": "focus_on_x_values_with_mask", "arguments": {"x_values": ["?"]}}) + "\n"
    refused = _placebo_episode(tiny_policy, row, default_config, "unedited", bad)
    assert refused.tool_outcome == "failed" and len(refused.images) == 1


def test_unknown_observation_is_refused(tiny_policy, synth_rows, default_config):
    with pytest.raises(ValueError, match="valid observations: edited, unedited"):
        run_episodes(
            tiny_policy,
            synth_rows["val"][:1],
            with_tools=True,
            n=1,
            params=SamplingParams(max_new_tokens=4, greedy=True),
            prompt_config=default_config.prompts,
            tools=default_config.tools,
            batch_size=1,
            observation="blank",
        )
