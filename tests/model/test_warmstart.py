"""Warm start: demonstrations have the rollout's layout and masks, and training lowers their loss."""

from __future__ import annotations

import dataclasses
import random

import torch

from chartrl.model.warmstart import build_demonstration, lr_at, supervised_loss, train_warmstart


def _cfg(default_config, **changes):
    return dataclasses.replace(default_config.warmstart, **changes)


def test_tool_demonstration_trains_only_the_assistant_tokens(tiny_policy, synth_rows, default_config):
    cfg = _cfg(default_config, tool_rate=1.0, correct_label_rate=1.0, no_tool_rate=0.0)
    row = next(r for r in synth_rows["train"] if r.chart_type == "v_bar" and r.extra.get("about"))
    demo = build_demonstration(tiny_policy, row, random.Random(0), cfg, default_config.prompts, default_config.tools)
    assert demo.kind == "tool_correct" and len(demo.images) == 2
    tok = tiny_policy.tokenizer
    trained = tok.decode([t for t, m in zip(demo.ids, demo.mask, strict=True) if m])
    assert trained.startswith('<tool_call>\n{"name": "focus_on_x_values_with_')
    assert f'"x_values": {str(row.extra["about"]).replace(chr(39), chr(34))}' in trained
    assert trained.endswith(f"</tool_call><|im_end|><answer>{row.answer}</answer><|im_end|>")
    image_tokens = sum(1 for t in demo.ids if t == tiny_policy.ids.image_pad)
    assert image_tokens > 0 and not any(
        m for t, m in zip(demo.ids, demo.mask, strict=True) if t == tiny_policy.ids.image_pad
    )


def test_label_choice_follows_correct_label_rate(tiny_policy, synth_rows, default_config):
    def axis(r):
        return "x_values" if r.chart_type == "v_bar" else "y_values"

    # rows with enough other labels to keep instead (otherwise a demonstration keeps the asked ones)
    rows = [
        r
        for r in synth_rows["train"]
        if r.chart_type in ("v_bar", "h_bar")
        and r.extra.get("about")
        and len(r.bboxes[axis(r)]) >= 2 * len(r.extra["about"])
    ]
    assert rows
    for rate, expected in ((0.0, "tool_other"), (1.0, "tool_correct")):
        cfg = _cfg(default_config, tool_rate=1.0, correct_label_rate=rate, no_tool_rate=0.0)
        kinds = {
            build_demonstration(
                tiny_policy, r, random.Random(1), cfg, default_config.prompts, default_config.tools
            ).kind
            for r in rows
        }
        assert kinds == {expected}, kinds


def test_training_lowers_the_loss_and_moves_every_parameter(tiny_model_dir, synth_rows, default_config):
    from chartrl.model.policy import load_policy

    policy = load_policy(tiny_model_dir, threads=2, train=True)
    before = {name: p.detach().clone() for name, p in policy.model.named_parameters()}
    cfg = _cfg(default_config, steps=12, batch_size=4, warmup_steps=2, lr=3e-3)
    rng = random.Random(5)
    probe = [
        build_demonstration(policy, r, rng, cfg, default_config.prompts, default_config.tools)
        for r in synth_rows["train"][:6]
    ]
    with torch.no_grad():
        start = supervised_loss(policy, probe).item()
    history = train_warmstart(policy, synth_rows["train"], cfg, default_config.prompts, default_config.tools)
    with torch.no_grad():
        end = supervised_loss(policy, probe).item()
    assert len(history) == 12 and all("warmstart/loss" in m for m in history)
    assert end < start
    unchanged = [n for n, p in policy.model.named_parameters() if torch.equal(p, before[n])]
    assert unchanged == []


def test_learning_rate_schedule(default_config):
    cfg = _cfg(default_config, steps=100, warmup_steps=10, lr=1e-3, min_lr_ratio=0.1)
    assert lr_at(0, cfg) == 1e-4 and lr_at(9, cfg) == 1e-3
    assert lr_at(10, cfg) == 1e-3 and abs(lr_at(100, cfg) - 1e-4) < 1e-12
