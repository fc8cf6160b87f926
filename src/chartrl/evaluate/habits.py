"""What the reward generations' shaping acts on, read from a policy's answers, and the hypothesis metrics made of it.

Each habit is a share of answers (a per-question record of ``chartrl.evaluate.accuracy``, None where the record does
not say): answers that break the format (what v2's format term removes), restate the question before the answer (a
longer response: v2's length term), made a call that failed or did not parse (v2's tool term), or made a call that
ran and still answered wrong (a call v2's ungated tool term pays for and v3's gate does not). A hypothesis reads
them, with the tool-call rate, the correct-label share and the accuracy, from a train series' sampled test pass as
``sampled_<name>``: a habit a warm start shows in some of its samples never shows in its greedy answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from chartrl.config import Config, TrainSeries
from chartrl.config.checks import config_check
from chartrl.rollout.statistics import FAILED_CALL

Record = Mapping[str, Any]


def _outcome(record: Record, test: Callable[[str, float], bool]) -> float | None:
    outcome = record.get("tool_outcome")
    return None if outcome is None else float(test(outcome, record["score"]))


HABITS: dict[str, Callable[[Record], float | None]] = {
    "format_error_rate": lambda r: float(not r["well_formed"]),
    "preamble_rate": lambda r: None if r.get("preamble") is None else float(r["preamble"]),
    "failed_call_rate": lambda r: _outcome(r, lambda outcome, _: outcome in FAILED_CALL),
    "unhelpful_call_rate": lambda r: _outcome(r, lambda outcome, score: outcome == "executed" and not score),
}
"""Habit name -> its value for one answer's record."""

SAMPLED_METRICS: dict[str, Callable[[Record], float | None]] = {
    **{f"sampled_{name}": value for name, value in HABITS.items()},
    "sampled_tool_call_rate": lambda r: float(r["tool_call"]),
    "sampled_correct_label_share": lambda r: None if r["correct_label"] is None else float(r["correct_label"]),
    "sampled_accuracy": lambda r: float(r["score"]),
}
"""Hypothesis metric -> its value for one answer of a train series' sampled test pass (``test_sampled``)."""


@config_check("hypothesis metrics")
def sampled_metric_problems(config: Config) -> list[str]:
    """A ``sampled_`` hypothesis metric is one of :data:`SAMPLED_METRICS` and names train series (only they have a
    sampled test pass)."""
    problems = []
    for i, hypothesis in enumerate(config.hypotheses):
        if not hypothesis.metric.startswith("sampled_"):
            continue
        key = f"hypotheses[{i}]"
        if hypothesis.metric not in SAMPLED_METRICS:
            problems.append(
                f"config key '{key}.metric': value '{hypothesis.metric}' is not a sampled metric; valid ones: "
                f"{', '.join(sorted(SAMPLED_METRICS))}"
            )
        for j, sid in enumerate(hypothesis.series):
            if sid in config.series and not isinstance(config.series[sid], TrainSeries):
                problems.append(
                    f"config key '{key}.series[{j}]': metric {hypothesis.metric} is read from a train series' "
                    f"sampled test pass, and '{sid}' is an eval series; name the train series it evaluates"
                )
    return problems
