"""A verl job's GPU-hours from the tokens its trajectories hold: the constants against the real ChartQA sample they
come from, each trajectory's tokens by hand, the rates against EasyR1's published step, the range's order for every
shipped GPU overlay."""

from __future__ import annotations

import json
import statistics

import pytest

from chartrl.config import load_config
from chartrl.verl_backend import gpu_hours
from chartrl.verl_backend.architectures import KNOWN_ARCHITECTURES
from chartrl.verl_backend.budget import plan_budget
from chartrl.verl_backend.gpu_hours import Rates, Trajectory, TrainingShape

from conftest import REPO

CHARTQA_REAL = REPO / "tests" / "fixtures" / "chartqa_real"

ARCH = KNOWN_ARCHITECTURES["Qwen/Qwen2.5-VL-3B-Instruct"]


def test_the_chart_sizes_are_the_real_samples():
    charts = json.loads((CHARTQA_REAL / "MANIFEST.json").read_text())["charts"]
    pixels = sorted(chart["png"]["width"] * chart["png"]["height"] for chart in charts)
    assert gpu_hours.CHARTQA_CHART_PIXELS == {"low": pixels[0], "central": pixels[len(pixels) // 2], "high": pixels[-1]}


def test_the_question_and_label_lengths_are_the_real_samples():
    records = [
        record
        for name in ("test_human.json", "test_augmented.json")
        for record in json.loads((CHARTQA_REAL / "test" / name).read_text())
    ]
    assert round(statistics.median(len(r["query"]) for r in records)) == gpu_hours.CHARTQA_QUESTION_CHARS
    lines = (CHARTQA_REAL / "test" / "refocus_chartqa_vcot_test.jsonl").read_text().splitlines()
    labels = [", ".join(row["x_values"] or row["y_values"]) for row in map(json.loads, lines)]
    assert round(statistics.median(len(text) for text in labels)) == gpu_hours.CHARTQA_LABEL_CHARS


@pytest.mark.parametrize(
    "estimate, tokens",
    [
        ("low", 334),  # the smallest chart (59,984 pixels) is scaled up to min_pixels 262,144: 334 tokens
        ("central", 568),  # the median chart, 445,600 pixels / 784
        ("high", 844),  # the largest, 661,920 / 784
    ],
)
def test_a_charts_image_tokens(gpu_config, estimate, tokens):
    assert gpu_hours.image_tokens(gpu_config, ARCH, estimate) == tokens


def test_a_tool_series_trajectory_by_hand(gpu_config):
    e1 = gpu_config.series["e1"]
    text = gpu_hours.prompt_text_tokens(gpu_config, True, "central")
    assert 900 < text < 1100  # the six tools' descriptions and JSON schemas, the question, the labels
    central = gpu_hours.trajectory(gpu_config, ARCH, e1, "central")
    assert central == Trajectory(prompt=text + 568, decoded=2 * 256, observation=568 + 64)
    low = gpu_hours.trajectory(gpu_config, ARCH, e1, "low")
    assert low.decoded == 64 and low.observation == 0  # one short pass, no tool call
    high = gpu_hours.trajectory(gpu_config, ARCH, e1, "high")
    assert high.decoded == 2 * 512 and high.tokens <= 2048 + 3136  # within verl's budget (the memory plan's longest)


def test_a_no_tool_trajectory_has_one_pass_and_no_tool_list(gpu_config):
    e3 = gpu_config.series["e3"]
    central = gpu_hours.trajectory(gpu_config, ARCH, e3, "central")
    assert central.decoded == 256 and central.observation == 0 and central.prompt < 700


@pytest.mark.parametrize(
    "reference, epochs, checkpointing, forwards",
    [
        (True, 1, True, 6),  # the study: old, reference, update forward + backward (2) + recomputation
        (False, 1, True, 5),  # LoRA or no KL: no reference pass
        (True, 2, False, 8),  # two PPO epochs, no gradient checkpointing
    ],
)
def test_the_passes_of_a_training_step(reference, epochs, checkpointing, forwards):
    assert gpu_hours.forward_passes(reference, epochs, checkpointing) == forwards


def test_the_padded_path_computes_at_the_longest():
    path, rates = Trajectory(1000, 500, 0), Rates(1, 1, 0.1)
    unpadded = TrainingShape(1_000_000_000, True, 1, True, None)
    padded = TrainingShape(1_000_000_000, True, 1, True, 3000)
    assert gpu_hours.training_seconds(path, unpadded, rates) == pytest.approx(1500 * 6 * 2e9 / (989e12 * 0.1))
    assert gpu_hours.training_seconds(path, padded, rates) == pytest.approx(3000 * 6 * 2e9 / (989e12 * 0.1))
    # a micro-batch longer than the budget's longest is computed at its own length
    assert gpu_hours.training_seconds(Trajectory(4000, 0, 0), padded, rates) == pytest.approx(
        4000 * 6 * 2e9 / (989e12 * 0.1)
    )


def test_the_central_rates_reproduce_easyr1s_published_step():
    """EasyR1 v0.3.0 (assets/baselines.md): Qwen2.5-VL-3B, GRPO on Geometry3k, 8 x H100, remove-padding, 180 s a
    step at 1,200 tokens per GPU-second, so 1,200 x 8 x 180 / (512 x 5) = 675 tokens a sequence on average. Its
    split between prompt and answer is not published; at 375 + 300 the central rates give its step within 10%."""
    sequences, gpus = 512 * 5, 8
    assert 1200 * gpus * 180 / sequences == 675
    path, rates = Trajectory(375, 300, 0), gpu_hours.RATES["central"]
    shape = TrainingShape(ARCH.parameters, reference=True, ppo_epochs=1, checkpointing=True, padded_tokens=None)
    step = sequences * (gpu_hours.rollout_seconds(path, rates) + gpu_hours.training_seconds(path, shape, rates))
    assert step / gpus == pytest.approx(180, rel=0.10)


SHIPPED = [["gpu.yaml"], ["gpu.yaml", "gpu_smoke.yaml"], ["deepeyes.yaml"], ["geoqa_mc.yaml"], ["geoqa_r1v.yaml"]]


@pytest.mark.parametrize("overlays", SHIPPED, ids=["+".join(o) for o in SHIPPED])
def test_every_jobs_range_holds_its_central_estimate(overlays):
    config = load_config([REPO / "config" / name for name in overlays], root=REPO)
    for job in plan_budget(config):
        if job.gpu_hours is not None:
            hours = job.gpu_hours
            assert 0 < hours.low < hours.central < hours.high, job.job
