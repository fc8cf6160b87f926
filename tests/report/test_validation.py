"""Validation read question by question (chartrl.report.validation), and what the report concludes from it: the
paired intervals of a generation's gain (series of different lengths, so the part from training longer is not 0),
"reward rose" only beyond its window noise, validation's peak and final steps."""

from __future__ import annotations

import json
import math
import random

import pytest

from chartrl.config import load_config
from chartrl.report.collect import reward_change, val_change
from chartrl.report.comparisons import INDEPENDENT, PAIRED, across_generations
from chartrl.report.validation import combined_gap, independent_gap, read_val_items

from conftest import REPO

BOOT = {"samples": 2000, "confidence": 0.95, "seed": 0}


@pytest.fixture(scope="module")
def config():
    return load_config(root=REPO)


@pytest.mark.parametrize(
    "plus,minus,mean,n",
    [
        # two accuracies on the same 4 questions: the mean of the per-question differences
        ([{"a": 1, "b": 1, "c": 0, "d": 0}], [{"a": 1, "b": 0, "c": 0, "d": 0}], 0.25, 4),
        # questions only one term scored are left out (paired over the shared ones)
        ([{"a": 1, "b": 1, "x": 1}], [{"a": 0, "b": 1, "y": 0}], 0.5, 2),
        # four terms: (c_final - c_matched) - (p_final - p_matched), question by question
        ([{"a": 1, "b": 1}, {"a": 0, "b": 0}], [{"a": 0, "b": 1}, {"a": 0, "b": 0}], 0.5, 2),
    ],
)
def test_a_combined_gap_is_paired_over_the_shared_questions(plus, minus, mean, n):
    gap = combined_gap(plus, minus, **BOOT)
    assert gap["mean"] == pytest.approx(mean) and gap["n"] == n and gap["low"] <= mean <= gap["high"]


@pytest.mark.parametrize(
    "plus,minus",
    [
        ([{"a": 1}], [{}]),  # a term without results
        ([{"a": 1}], [{"b": 1}]),  # no shared question
        ([], []),
    ],
)
def test_no_combined_gap_without_shared_questions(plus, minus):
    assert combined_gap(plus, minus, **BOOT) is None


def test_the_paired_interval_is_narrower_than_the_independent_one():
    rng = random.Random(0)
    before = {f"q{i}": float(rng.random() < 0.6) for i in range(150)}
    after = {q: 1.0 if v or rng.random() < 0.2 else 0.0 for q, v in before.items()}  # a few more right answers
    paired = combined_gap([after], [before], **BOOT)
    a, b = sum(after.values()) / 150, sum(before.values()) / 150
    independent = independent_gap(a, b, 150, 0.95)
    assert paired["mean"] == pytest.approx(independent["mean"])
    assert paired["high"] - paired["low"] < independent["high"] - independent["low"]
    assert paired["low"] > 0 > independent["low"]  # the same change: seen paired, not seen independently
    z = 1.959963984540054
    half = z * math.sqrt(a * (1 - a) / 150 + b * (1 - b) / 150)
    assert independent["high"] - independent["mean"] == pytest.approx(half)


@pytest.mark.parametrize(
    "rewards,window,rose,held",
    [
        # a steady climb: the change (0.10) is far above the windows' noise
        ([0.30 + 0.01 * i for i in range(20)], 10, True, True),
        # the same climb run backwards: it fell by more than its noise
        ([0.49 - 0.01 * i for i in range(20)], 10, False, False),
        # alternating draws, no trend: neither rose nor fell
        ([0.5, 0.6] * 10, 10, False, True),
        # a last window 0.02 higher, but the per-step spread (sd ~0.1 per window) hides it: not "rose"
        ([0.4, 0.6] * 5 + [0.42, 0.62] * 5, 10, False, True),
        # one step per window: no spread to measure noise against, nothing claimed
        ([0.3, 0.9], 1, False, False),
    ],
)
def test_reward_rose_only_beyond_its_window_noise(rewards, window, rose, held):
    result = reward_change(rewards, window, 0.95)
    assert (result["reward_rose"], result["reward_held"]) == (rose, held)
    if window > 1:
        first, last = rewards[:window], rewards[-window:]

        def var(values):
            mean = sum(values) / len(values)
            return sum((v - mean) ** 2 for v in values) / (len(values) - 1)

        se = math.sqrt(var(first) / window + var(last) / window)
        assert result["reward_se"] == pytest.approx(se)
        assert result["reward_noise"] == pytest.approx(1.959963984540054 * se)


def _items(n, right):
    """n validation questions q0..q{n-1}, the first ``right`` of them answered right."""
    return {f"q{i}": float(i < right) for i in range(n)}


def test_validation_reports_its_peak_and_final_steps_with_a_paired_change(config):
    val = [(0, 0.50), (10, 0.70), (20, 0.70), (30, 0.60)]
    items = {step: _items(150, round(value * 150)) for step, value in val}
    result = val_change(val, items, 150, config)
    assert (result["val_peak"], result["val_peak_step"]) == (0.70, 10)  # the earliest step of the peak
    assert (result["val_end"], result["val_end_step"]) == (0.60, 30)
    change = result["val_change"]
    assert change["mean"] == pytest.approx(0.10) and change["n"] == 150 and change["low"] > 0
    assert result["val_verdict"] == "rose" and result["val_paired"]
    # without per-question results: the start's binomial interval decides "kept"
    unpaired = val_change(val, {}, 150, config)
    assert unpaired["val_change"] is None and unpaired["val_verdict"] == "kept" and not unpaired["val_paired"]


def _write_run(results, sid, curve):
    folder = results / "runs" / sid
    folder.mkdir(parents=True, exist_ok=True)
    lines = [{"step": step, "val/accuracy": right / 150} for step, right in curve]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    items = [{"step": step, "scores": _items(150, right)} for step, right in curve]
    (folder / "val_items.jsonl").write_text("".join(json.dumps(line) + "\n" for line in items))


def test_series_of_different_lengths_split_a_gain_with_paired_intervals(config, tmp_path):
    """The seed study's lengths in proportion: v1 trained to 65 of 215, v2 to 80. e1 (v1) validates to step 13,
    e6 (v2) to 16: they are compared at step 13, and the rest of e6's gain comes from training longer."""
    results = tmp_path / "results"
    _write_run(results, "e1", [(0, 75), (5, 90), (10, 96), (13, 99)])
    _write_run(results, "e6", [(0, 75), (5, 93), (10, 99), (13, 105), (16, 120)])
    train = {
        sid: {"curves": {"val/accuracy": [[m["step"], m["val/accuracy"]] for m in map(json.loads, lines)]}}
        for sid in ("e1", "e6")
        for lines in [(results / "runs" / sid / "metrics.jsonl").read_text().splitlines()]
    }
    result = across_generations(config, train, results)
    assert result["step"] == 13 and result["without_validation"] == [
        s.id for s in config.train_series if s.id not in ("e1", "e6")
    ]
    gain = next(g for g in result["gains"] if (g["from"], g["to"]) == ("e1", "e6"))
    assert gain["matched_step"] == 13 and (gain["previous_final_step"], gain["current_final_step"]) == (13, 16)
    assert gain["at_matched_steps"] == pytest.approx(6 / 150)
    assert gain["from_training_longer"] == pytest.approx(15 / 150)  # e6's steps 13 -> 16; e1 stopped at 13
    assert gain["total"] == pytest.approx(21 / 150)
    assert gain["interval_kind"] == PAIRED and gain["val_n"] == 150
    low, high = gain["longer_interval"]
    assert 0 < low < 15 / 150 < high  # the 15 questions e6 gained after step 13: a paired change that excludes 0
    assert result["rows"]["e6"]["val_accuracy"]["n"] == 150

    # the same curves without per-question results: independent proportions, no interval for training longer
    for sid in ("e1", "e6"):
        (results / "runs" / sid / "val_items.jsonl").unlink()
    unpaired = next(g for g in across_generations(config, train, results)["gains"] if g["to"] == "e6")
    assert unpaired["interval_kind"] == INDEPENDENT and unpaired["longer_interval"] is None
    assert unpaired["matched_interval"][1] - unpaired["matched_interval"][0] > high - low


def test_val_items_are_read_by_step(tmp_path):
    path = tmp_path / "val_items.jsonl"
    path.write_text('{"step": 0, "scores": {"a": 1.0}}\n{"step": 5, "scores": {"a": 0.0, "b": 1.0}}\n')
    assert read_val_items(path) == {0: {"a": 1.0}, 5: {"a": 0.0, "b": 1.0}}
    assert read_val_items(tmp_path / "absent.jsonl") == {}
