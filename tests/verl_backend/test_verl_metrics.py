"""verl's metric names, kept, and the ones the report reads added under the local trainer's names; the keys come
from verl 0.9.1's own code (``compute_data_metrics`` for a training step, ``_val_metrics_update`` for a
validation of our reward's extra info), so a renamed key in verl fails here."""

from __future__ import annotations

import json

import pytest

from chartrl.verl_backend import rewards as verl_rewards
from chartrl.verl_backend.metrics import ALIASES, measured_figures, replan_arguments, with_aliases

from verl_standin import step_metrics

BBOXES = json.dumps({"x_values": {"2019": [0.1, 0.1, 0.4, 0.9], "2020": [0.5, 0.1, 0.9, 0.9]}, "y_values": {}})
TOOLS = ["focus_on_x_values_with_mask"]


def response(labels: list[str] | None, answer: str | None) -> str:
    """A call keeping ``labels`` (None: no call) and the answer (None: no answer tag, out of format)."""
    final = "I do not know" if answer is None else f"<answer>{answer}</answer>"
    if labels is None:
        return final
    call = json.dumps({"name": "focus_on_x_values_with_mask", "arguments": {"x_values": labels}})
    tool = "\nuser\n<tool_response>\nMasked.\n</tool_response>\nassistant\n"
    return f"<tool_call>\n{call}\n</tool_call>{tool}{final}"


def verl_validation(samples: list[tuple[str, str, list[str] | None, str | None]]) -> dict[str, float]:
    """verl's validation metrics (as MLflow stores them: '@' -> '_at_') of our v3_gra reward on ``samples``
    (data source, question uid, labels the call keeps or None, answer; the truth is 4, the question asks 2019)."""
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    infos: dict[str, list] = {"reward": []}
    for source, _, labels, answer in samples:
        extra = {"bboxes": BBOXES, "about": json.dumps(["2019"])}
        result = verl_rewards.v3_gra(
            source, response(labels, answer), "4", extra, tools=TOOLS, params={"d_format": 0.1, "d_length": 0}
        )
        infos["reward"].append(result["score"])
        for key, value in result.items():
            infos.setdefault(key, []).append(value)
    sources, uids = [s[0] for s in samples], [s[1] for s in samples]
    metrics = PPOTrainer._val_metrics_update(None, sources, uids, infos, [2] * len(samples))
    return {key.replace("@", "_at_"): float(value) for key, value in metrics.items()}


def test_a_validation_of_our_reward_translates_to_the_local_names():
    metrics = verl_validation(
        [
            # source a, two samples per question: q1 a right call and a wrong one; q2 no call, right
            ("a", "q1", ["2019"], "4"),
            ("a", "q1", ["2020"], "0"),
            ("a", "q2", None, "4"),
            ("a", "q2", None, "4"),
            # source b: a failing call (a label the chart lacks) and a wrong answer in no format
            ("b", "q3", ["1999"], "4"),
            ("b", "q3", None, None),
        ]
    )
    assert "val-aux/a/protocol_tool_call/mean_at_2" in metrics and "val-aux/b/accuracy/mean_at_2" in metrics
    out = with_aliases(metrics)
    # per source: accuracy a (1 + 0 + 1 + 1)/4 = 0.75, b 1/2 -> mean over sources 0.625
    assert out["val/accuracy"] == pytest.approx(0.625)
    assert out["val/tool_call_ratio"] == pytest.approx((0.5 + 0.5) / 2)  # a: 2 of 4, b: 1 of 2
    assert out["val/tool_success"] == pytest.approx((0.5 + 0.0) / 2 / 0.5)  # executed: a 2 of 4, b none
    assert out["val/correct_label_ratio"] == pytest.approx((0.25 + 0.0) / 2 / 0.5)
    assert out["val/format_rate"] == pytest.approx((1.0 + 0.5) / 2)
    assert out["val_reward/accuracy"] == out["val/accuracy"] and "val_reward/format" in out
    assert not any(k.startswith("val_reward/protocol") or k in ("val_reward/score", "val_reward/reward") for k in out)
    assert {k: out[k] for k in metrics} == metrics  # verl's keys kept


def test_a_training_step_translates_to_the_local_names():
    metrics = step_metrics(
        scores=[1.0, 0.0, 0.5, 0.5], lengths=[10, 20, 30, 40], turns=[4, 2, 2, 2], groups=list("aabb"), width=64
    )
    out = with_aliases(metrics)
    assert out["reward/overall"] == pytest.approx(0.5) == metrics["critic/score/mean"]
    assert out["rollout/response_length"] == pytest.approx(25.0) == metrics["response_length/mean"]
    for ours, alias in ALIASES.items():  # every training-step alias names a key verl logs
        if alias.step is not None:
            assert alias.step in metrics, (ours, alias.step)
    assert not any(k.startswith("val/") for k in out)  # no validation in a plain step


@pytest.mark.parametrize(
    "logged, added",
    [
        ({"critic/score/mean": 0.4}, {"reward/overall": 0.4}),
        # MLflow keys carry '@' as '_at_' (verl's logger sanitises them); the largest N wins
        ({"val-aux/chartqa_human/accuracy/mean_at_1": 0.2, "val-aux/chartqa_human/accuracy/mean_at_4": 0.3},
         {"val/accuracy": 0.3, "val_reward/accuracy": 0.3}),
        # several data sources: their mean
        ({"val-aux/chartqa_human/accuracy/mean@1": 0.2, "val-core/chartqa_augmented/accuracy/mean@1": 0.6},
         {"val/accuracy": 0.4, "val_reward/accuracy": 0.4}),
        ({"val-core/x/reward/mean@1": 0.9, "actor/pg_loss": 0.1}, {}),  # verl's own reward is not a part
        # no calls at all: tool success 0, as the local trainer logs it
        ({"val-aux/x/protocol_tool_call/mean@1": 0.0, "val-aux/x/protocol_tool_executed/mean@1": 0.0},
         {"val/tool_call_ratio": 0.0, "val/tool_success": 0.0}),
    ],
)  # fmt: skip
def test_aliases(logged, added):
    out = with_aliases(logged)
    assert {k: v for k, v in out.items() if k not in logged} == pytest.approx(added)
    assert {k: out[k] for k in logged} == logged


def verl_step(step: int, seconds: float, prompt: int, lengths: list[int], gpus: int, memory_gb: float):
    """One training step's metrics as verl 0.9.1 computes them: the batch's (``compute_data_metrics``), the step's
    timings and throughput (``compute_timing_metrics``, ``compute_throughout_metrics``) and the actor's memory."""
    import torch
    from tensordict import TensorDict
    from verl import DataProto
    from verl.trainer.ppo.metric_utils import compute_throughout_metrics, compute_timing_metrics

    width = max(lengths)
    metrics = step_metrics([1.0] * len(lengths), lengths, [2] * len(lengths), ["0"] * len(lengths), width, prompt)
    response_mask = (torch.arange(width)[None] < torch.tensor(lengths)[:, None]).long()
    size = len(lengths)
    batch = TensorDict(
        {
            "responses": torch.zeros(size, width, dtype=torch.long),
            "response_mask": response_mask,
            "attention_mask": torch.cat([torch.ones(size, prompt, dtype=torch.long), response_mask], dim=1),
        },
        batch_size=size,
    )
    data = DataProto(batch=batch, meta_info={"global_token_num": [prompt + n for n in lengths]})
    metrics.update(compute_timing_metrics(data, {"step": seconds}))
    metrics.update(compute_throughout_metrics(data, {"step": seconds}, gpus))
    metrics["actor/perf/max_memory_allocated_gb"] = memory_gb  # engine_workers.py, prefixed "actor/" by the trainer
    return {"step": step, **metrics}


def test_a_runs_measured_figures_are_what_chartrl_plan_takes():
    # four steps of two 100-token prompts with answers of 50 and 150 tokens (mean sequence 200) on 4 GPUs; the first
    # step (vLLM warming up) is left out of the medians, not of the memory peak
    lines = [
        verl_step(1, 60.0, 100, [50, 150], 4, 30.0),
        verl_step(2, 10.0, 100, [50, 150], 4, 20.0),
        verl_step(3, 20.0, 100, [50, 150], 4, 20.0),
        verl_step(4, 10.0, 100, [50, 150], 4, 25.0),
    ]
    figures = measured_figures(lines, longest=400)
    assert figures["seconds_per_step"] == 10.0
    assert figures["tokens_per_gpu_second"] == pytest.approx(400 / (10.0 * 4))  # verl's tokens / (seconds x GPUs)
    assert figures["fill"] == pytest.approx(200 / 400) and figures["max_memory_allocated_gb"] == 30.0
    assert replan_arguments(figures) == "--fill 0.50 --tokens-per-gpu-second 10"
    assert measured_figures([{"step": 0, "val/accuracy": 0.5}], longest=400) is None  # a validation only
