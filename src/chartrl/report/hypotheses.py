"""Each generation's hypothesis (``hypotheses:`` in the config), tested on the run's own numbers.

A hypothesis compares one metric of two series, d = metric(a) - metric(b) (or d = metric(a) for one series), with
the interval of d: a paired bootstrap over the questions both series answered where the metric is a per-question
mean (test accuracy, per question type or overall; the tool-call rate; validation accuracy), the diagonal check's
own interval for drift. :func:`hypothesis_verdict` reads the interval against the claim.

The per-question test results are handed in (``collect`` reads them for the test table too); this module reads
only what no other part of the report reads: eval series' scores and generations, and validation items.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chartrl.config import Config, EvalSeries, Hypothesis
from chartrl.evaluate.intervals import bootstrap_mean, bootstrap_paired_gap
from chartrl.evaluate.matrix import checkpoint_groups
from chartrl.report.helpers import read_json
from chartrl.report.order import generation_key
from chartrl.report.validation import run_val_items

VERDICTS = ("supported", "refuted", "undecided", "untested")

CLAIMS = {
    "greater": "d > t",
    "not_less": "d >= -t",
    "not_greater": "d <= t",
}
"""Each comparison's claim about the difference d and the threshold t."""


def hypothesis_verdict(difference: Mapping[str, Any] | None, comparison: str, threshold: float) -> str:
    """The verdict on a claim about d (:data:`CLAIMS`) from d's interval [low, high]:

    - greater (d > t): supported when low > t, refuted when high <= t;
    - not_less (d >= -t): supported when low >= -t, refuted when high < -t;
    - not_greater (d <= t): supported when high <= t, refuted when low > t;
    - undecided when the interval holds values on both sides; untested without an interval.
    """
    if difference is None or difference.get("low") is None or difference.get("high") is None:
        return "untested"
    low, high, t = difference["low"], difference["high"], threshold
    if comparison == "greater":
        supported, refuted = low > t, high <= t
    elif comparison == "not_less":
        supported, refuted = low >= -t, high < -t
    elif comparison == "not_greater":
        supported, refuted = high <= t, low > t
    else:
        raise ValueError(f"unknown comparison {comparison!r}; valid comparisons: {', '.join(sorted(CLAIMS))}")
    return "supported" if supported else "refuted" if refuted else "undecided"


def _row_id(item_id: str) -> str:
    """A scores item's id (``question#sample``) as the question's id (test_accuracy.json's ids)."""
    return item_id.rsplit("#", 1)[0]


class QuestionResults:
    """Per-question test results of the series a hypothesis names: a train series' greedy test records (handed in
    from test_accuracy.json, or read from its eval series' generations on verl), an eval series' first scorer's
    verdicts and its generations' tool calls. Question types come from the train series' records (a question's type
    is the same for every series)."""

    def __init__(self, config: Config, results: Path, train_records: Mapping[str, list[dict[str, Any]]]):
        self.config, self.results, self.train_records = config, Path(results), train_records
        self.question_types = {r["id"]: r["question_type"] for records in train_records.values() for r in records}

    def scores(self, sid: str, metric: str) -> tuple[dict[str, float] | None, str | None]:
        """Question id -> value of ``metric`` for series ``sid``, or None and why not."""
        series = self.config.series[sid]
        if isinstance(series, EvalSeries):
            values, why = self._eval_values(series, metric)
        else:
            records = self.train_records.get(sid)
            if records is None:
                return None, f"{sid}: no test results (results/eval/{sid}/test_accuracy.json)"
            key = "tool_call" if metric == "tool_call_ratio" else "score"
            values, why = {r["id"]: float(r[key]) for r in records}, None
        if values is None or not metric.startswith("test_accuracy_"):
            return values, why
        qtype = metric.removeprefix("test_accuracy_")
        kept = {q: v for q, v in values.items() if self.question_types.get(q) == qtype}
        if not kept:
            known = sorted(set(self.question_types.values()))
            return None, f"{sid}: no test question of type {qtype!r} (types: {', '.join(known) or 'none known'})"
        return kept, None

    def _eval_values(self, series: EvalSeries, metric: str) -> tuple[dict[str, float] | None, str | None]:
        folder = self.results / "eval" / series.id
        if metric == "tool_call_ratio":
            return self._tool_calls(series)
        scorer = series.scorers[0]
        data = read_json(folder / f"scores_{scorer}.json")
        if data is None:
            return None, f"{series.id}: no results/eval/{series.id}/scores_{scorer}.json"
        first: dict[str, float] = {}
        for item in data["items"]:
            if item["accuracy"] is not None:
                first.setdefault(_row_id(item["id"]), float(item["accuracy"]))
        return first, None

    def _tool_calls(self, series: EvalSeries) -> tuple[dict[str, float] | None, str | None]:
        import pyarrow.parquet as pq

        owner = next(o for o, members in checkpoint_groups(self.config).items() if series in members)
        path = self.results / "eval" / owner / "generations.parquet"
        if not path.is_file():
            return None, f"{series.id}: no results/eval/{owner}/generations.parquet"
        rows = pq.read_table(path, columns=["id", "sample", "tool_called"]).to_pylist()
        first: dict[str, float] = {}
        for row in sorted(rows, key=lambda r: (r["id"], r["sample"])):
            first.setdefault(row["id"], float(bool(row["tool_called"])))
        return first, None


def _val_scores(results: Path, series: tuple[str, ...]) -> tuple[list[dict[str, float]] | None, int | None, str]:
    """Each series' per-question validation scores at the last validation step all of them logged."""
    items = {sid: run_val_items(results, sid) for sid in series}
    lacking = [sid for sid, by_step in items.items() if not by_step]
    if lacking:
        return None, None, f"{', '.join(lacking)}: no results/runs/{{series}}/val_items.jsonl"
    common = set.intersection(*(set(by_step) for by_step in items.values()))
    if not common:
        return None, None, f"{', '.join(series)} share no validation step"
    step = max(common)
    return [items[sid][step] for sid in series], step, ""


def _drift(diagonals: Mapping[str, Any], config: Config, sid: str) -> tuple[dict[str, Any] | None, str | None]:
    """The signed drift of the diagonal check that reads eval series ``sid``'s checkpoint."""
    members = next((m for m in checkpoint_groups(config).values() if any(s.id == sid for s in m)), [])
    found = [diagonals[s.id] for s in members if s.id in diagonals]
    if not found:
        return None, f"{sid}: no diagonal check reads its checkpoint (results/eval/{{series}}/diagonal.json)"
    signed = found[0].get("signed_drift")
    if not signed or signed.get("mean") is None:
        return None, f"{sid}: its diagonal.json holds no signed drift"
    return dict(signed), None


def evaluate_hypothesis(
    hypothesis: Hypothesis, config: Config, results: Path, tests: QuestionResults, diagonals: Mapping[str, Any]
) -> dict[str, Any]:
    """One hypothesis' difference, its interval, its verdict, and why it is untested where it is."""
    ev = config.evaluate
    boot = {"samples": ev.bootstrap_samples, "confidence": ev.confidence, "seed": ev.seed}
    out: dict[str, Any] = {
        "id": hypothesis.id,
        "generation": hypothesis.generation,
        "claim": hypothesis.claim,
        "metric": hypothesis.metric,
        "series": list(hypothesis.series),
        "comparison": hypothesis.comparison,
        "claim_on_difference": CLAIMS[hypothesis.comparison],
        "threshold": hypothesis.threshold,
        "difference": None,
        "step": None,
        "reason": None,
    }
    if hypothesis.metric == "drift":
        difference, reason = _drift(diagonals, config, hypothesis.series[0])
    elif hypothesis.metric == "val_accuracy":
        scores, out["step"], reason = _val_scores(results, hypothesis.series)
        difference = _difference(scores, boot) if scores else None
    else:
        found = [tests.scores(sid, hypothesis.metric) for sid in hypothesis.series]
        reasons = [why for _, why in found if why]
        reason = "; ".join(reasons) or None
        difference = None if reasons else _difference([values for values, _ in found], boot)
    if difference is not None and not difference.get("n"):
        difference, reason = None, f"{', '.join(hypothesis.series)} share no question"
    out["difference"], out["reason"] = difference, reason
    out["verdict"] = hypothesis_verdict(difference, hypothesis.comparison, hypothesis.threshold)
    return out


def _difference(scores: list[Mapping[str, float]], boot: Mapping[str, Any]) -> dict[str, Any]:
    """metric(a) - metric(b) paired over the questions both have, or metric(a), with its bootstrap interval."""
    if len(scores) == 1:
        return bootstrap_mean(list(scores[0].values()), **boot)
    return bootstrap_paired_gap(scores[0], scores[1], **boot)


def collect_hypotheses(
    config: Config, results: Path, train_records: Mapping[str, list[dict[str, Any]]], diagonals: Mapping[str, Any]
) -> dict[str, dict[str, Any]]:
    """Every hypothesis of the config, tested, by id: by generation, in the config's order within one."""
    tests = QuestionResults(config, results, train_records)
    ordered = sorted(config.hypotheses, key=lambda h: generation_key(h.generation))
    return {h.id: evaluate_hypothesis(h, config, Path(results), tests, diagonals) for h in ordered}
