"""Each generation's hypothesis (``hypotheses:`` in the config), tested on the run's own numbers, on every train seed.

A hypothesis compares one metric of two series, d = metric(a) - metric(b) (or d = metric(a) for one series). On
each train seed (``train.seed`` and ``extra_seeds``) d is a mean over questions of a per-question difference,
paired over the questions both series answered, with its bootstrap interval (for drift: the judge-minus-rule
verdict per question of that seed's diagonal check). :func:`hypothesis_verdict` reads an interval against the
claim; each seed gets its own verdict, and the hypothesis its verdict from the pooled interval over seeds
(``chartrl.evaluate.intervals.bootstrap_over_seeds``: seeds and questions resampled, so the seed-to-seed spread is
in it), or ``undecided`` when one seed supports the claim and another refutes it. A run of one seed gets a verdict
that holds the test questions' noise only, and says so (``seeds``: 1).

Where each seed's numbers come from: a train series' greedy and sampled test records (its ``test_accuracy.json``:
``results/eval/{series}/`` for ``train.seed``, ``results/seeds/{series}/seed{k}/`` for an extra seed), its
validation items (``val_items.jsonl`` in its run folder), an eval series' first scorer and its generations' tool
calls (``train.seed`` only: eval series read the main run's checkpoints), and the diagonal check reading an eval
series' checkpoint (``results/eval/{series}/diagonal.json``; an extra seed's, of its greedy test answers, in
``results/seeds/{series}/seed{k}/diagonal.json``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chartrl.config import Config, EvalSeries, Hypothesis
from chartrl.evaluate.habits import SAMPLED_METRICS
from chartrl.evaluate.intervals import bootstrap_mean, bootstrap_over_seeds
from chartrl.evaluate.matrix import checkpoint_groups
from chartrl.report.helpers import read_json
from chartrl.report.order import generation_key
from chartrl.report.validation import VAL_ITEMS, read_val_items

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


def pooled_verdict(pooled: Mapping[str, Any] | None, per_seed: list[str], comparison: str, threshold: float) -> str:
    """The verdict over seeds: the pooled interval's, unless the seeds' own verdicts contradict each other (one
    supported, another refuted), which is ``undecided`` whatever the pooled interval says."""
    if "supported" in per_seed and "refuted" in per_seed:
        return "undecided"
    return hypothesis_verdict(pooled, comparison, threshold)


def _row_id(item_id: str) -> str:
    """A scores item's id (``question#sample``) as the question's id (test_accuracy.json's ids)."""
    return item_id.rsplit("#", 1)[0]


def seed_folder(results: Path, config: Config, series_id: str, seed: int, main: str) -> Path:
    """Where series ``series_id``'s files of train seed ``seed`` are: ``results/{main}/{series}/`` for train.seed
    (``main``: runs or eval), ``results/seeds/{series}/seed{k}/`` for an extra seed."""
    if seed == config.train.seed:
        return Path(results) / main / series_id
    return Path(results) / "seeds" / series_id / f"seed{seed}"


class SeedResults:
    """Per-question results of one train seed, read on demand: train series' test records (greedy and sampled),
    validation items, eval series' scores and generations (train.seed only) and diagonal checks."""

    def __init__(self, config: Config, results: Path, seed: int):
        self.config, self.results, self.seed = config, Path(results), seed
        self.main = seed == config.train.seed
        self._tests: dict[str, dict[str, Any] | None] = {}

    def test(self, sid: str) -> dict[str, Any] | None:
        if sid not in self._tests:
            folder = seed_folder(self.results, self.config, sid, self.seed, "eval")
            self._tests[sid] = read_json(folder / "test_accuracy.json")
        return self._tests[sid]

    def question_types(self) -> dict[str, str]:
        for series in self.config.train_series:
            data = self.test(series.id)
            if data is not None:
                return {r["id"]: r["question_type"] for r in data["test"]["items"]}
        return {}

    def scores(self, sid: str, metric: str) -> tuple[dict[str, float] | None, str | None]:
        """Question id -> value of ``metric`` for series ``sid`` on this seed, or None and why not."""
        series = self.config.series[sid]
        where = seed_folder(self.results, self.config, sid, self.seed, "eval")
        if isinstance(series, EvalSeries):
            if not self.main:
                return None, f"{sid}: an eval series reads train seed {self.config.train.seed}'s checkpoints only"
            values, why = self._eval_values(series, metric)
        else:
            data = self.test(sid)
            if data is None:
                return None, f"{sid}: no test results on seed {self.seed} ({where.name}/test_accuracy.json)"
            if metric in SAMPLED_METRICS:
                if "test_sampled" not in data:
                    return None, f"{sid}: its test_accuracy.json has no sampled pass (test_sampled)"
                value = SAMPLED_METRICS[metric]
                found = {r["id"]: value(r) for r in data["test_sampled"]["items"]}
                values = {q: v for q, v in found.items() if v is not None}
                if not values:
                    return None, f"{sid}: no sampled test answer says what {metric} reads (records of an older run)"
                return values, None
            key = "tool_call" if metric == "tool_call_ratio" else "score"
            values, why = {r["id"]: float(r[key]) for r in data["test"]["items"]}, None
        if values is not None and metric == "test_accuracy" and self.config.evaluate.headline_types is not None:
            types = self.question_types()  # the headline accuracy: the questions of evaluate.headline_types
            return {q: v for q, v in values.items() if self.config.evaluate.in_headline(types.get(q, ""))}, why
        if values is None or not metric.startswith("test_accuracy_"):
            return values, why
        qtype = metric.removeprefix("test_accuracy_")
        types = self.question_types()
        kept = {q: v for q, v in values.items() if types.get(q) == qtype}
        if not kept:
            known = sorted(set(types.values()))
            return None, f"{sid}: no test question of type {qtype!r} (types: {', '.join(known) or 'none known'})"
        return kept, None

    def _eval_values(self, series: EvalSeries, metric: str) -> tuple[dict[str, float] | None, str | None]:
        folder = self.results / "eval" / series.id
        if metric == "tool_call_ratio":
            return self._tool_calls(series)
        if metric in SAMPLED_METRICS:
            return None, f"{series.id}: {metric} is read from a train series' sampled test pass; name the train series"
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

    def val_scores(self, series: tuple[str, ...]) -> tuple[list[dict[str, float]] | None, int | None, str]:
        """Each series' per-question validation scores at the last validation step all of them logged."""
        items = {
            sid: read_val_items(seed_folder(self.results, self.config, sid, self.seed, "runs") / VAL_ITEMS)
            for sid in series
        }
        lacking = [sid for sid, by_step in items.items() if not by_step]
        if lacking:
            why = f"{', '.join(lacking)}: no per-question validation results ({VAL_ITEMS}) on seed {self.seed}"
            return None, None, why
        common = set.intersection(*(set(by_step) for by_step in items.values()))
        if not common:
            return None, None, f"{', '.join(series)} share no validation step"
        step = max(common)
        return [items[sid][step] for sid in series], step, ""

    def drift(self, sid: str) -> tuple[list[float] | dict[str, Any] | None, str | None]:
        """The signed judge-minus-rule drift of the diagonal check that reads eval series ``sid``'s checkpoint (on an
        extra seed, of that seed's greedy test answers): the per-question values where the check records them,
        else its mean and interval."""
        members = next((m for m in checkpoint_groups(self.config).values() if any(s.id == sid for s in m)), [])
        if self.main:
            paths = [self.results / "eval" / s.id / "diagonal.json" for s in members]
        else:
            paths = [self.results / "seeds" / s.id / f"seed{self.seed}" / "diagonal.json" for s in members]
        found = [data for path in paths if (data := read_json(path)) is not None]
        if not found:
            where = "results/eval/{series}" if self.main else f"results/seeds/{{series}}/seed{self.seed}"
            return None, f"{sid}: no diagonal check reads its checkpoint on seed {self.seed} ({where}/diagonal.json)"
        signed = found[0].get("signed_drift")
        if not signed or signed.get("mean") is None:
            return None, f"{sid}: its diagonal.json holds no signed drift"
        values = found[0].get("signed_values")
        return (list(values.values()) if values else dict(signed)), None


SeedValues = tuple[list[float] | dict[str, Any] | None, int | None, str | None]


def _seed_values(hypothesis: Hypothesis, seed: SeedResults) -> SeedValues:
    """One seed's per-question differences for the hypothesis (or, for a diagonal that kept none, its summary),
    the validation step read (val_accuracy) and why there are none."""
    if hypothesis.metric == "drift":
        values, reason = seed.drift(hypothesis.series[0])
        return values, None, reason
    if hypothesis.metric == "val_accuracy":
        scores, step, reason = seed.val_scores(hypothesis.series)
        return (_paired(scores) if scores else None), step, reason or None
    found = [seed.scores(sid, hypothesis.metric) for sid in hypothesis.series]
    reasons = [why for _, why in found if why]
    if reasons:
        return None, None, "; ".join(reasons)
    scores = [values for values, _ in found]
    if hypothesis.question_type is not None:
        types = seed.question_types()
        scores = [{q: v for q, v in s.items() if types.get(q) == hypothesis.question_type} for s in scores]
        if not any(scores):
            known = ", ".join(sorted(set(types.values()))) or "none known"
            return None, None, f"no test question of type {hypothesis.question_type!r} (types: {known})"
    values = _paired(scores)
    return (values or None), None, (None if values else f"{', '.join(hypothesis.series)} share no question")


def _paired(scores: list[Mapping[str, float]]) -> list[float]:
    """metric(a) - metric(b) per question both have (in question order), or metric(a)'s values."""
    if len(scores) == 1:
        return [scores[0][q] for q in sorted(scores[0])]
    shared = sorted(set(scores[0]) & set(scores[1]))
    return [scores[0][q] - scores[1][q] for q in shared]


def evaluate_hypothesis(hypothesis: Hypothesis, config: Config, seeds: list[SeedResults]) -> dict[str, Any]:
    """One hypothesis on every seed (its difference, interval and verdict), pooled over the seeds, and why it is
    untested where it is."""
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
        "question_type": hypothesis.question_type,
        "difference": None,
        "step": None,
        "reason": None,
        "seeds": {},
    }
    per_seed_values, reasons = [], []
    for seed in seeds:
        values, step, reason = _seed_values(hypothesis, seed)
        if isinstance(values, dict):  # a diagonal check without per-question values: its own interval
            difference = values
        elif values:
            difference = bootstrap_mean(values, **boot)
            per_seed_values.append(values)
        else:
            difference = None
            reasons.append(f"seed {seed.seed}: {reason}")
        if step is not None and seed.main:
            out["step"] = step
        verdict = hypothesis_verdict(difference, hypothesis.comparison, hypothesis.threshold)
        out["seeds"][str(seed.seed)] = {"difference": difference, "verdict": verdict, "step": step, "reason": reason}
    tested = [s for s in out["seeds"].values() if s["difference"] is not None]
    if per_seed_values and len(per_seed_values) == len(tested):
        out["difference"] = bootstrap_over_seeds(per_seed_values, **boot)
    elif len(tested) == 1:
        out["difference"] = {**tested[0]["difference"], "seeds": 1}
    out["reason"] = "; ".join(reasons) if not tested else None
    out["missing_seeds"] = [str(s.seed) for s in seeds if out["seeds"][str(s.seed)]["difference"] is None]
    out["verdict"] = pooled_verdict(
        out["difference"], [s["verdict"] for s in tested], hypothesis.comparison, hypothesis.threshold
    )
    return out


def hypothesis_seeds(config: Config) -> list[int]:
    """The train seeds a hypothesis is tested on: train.seed, then the extra seeds (local backend)."""
    return [config.train.seed, *(config.extra_seeds if config.backend == "local" else ())]


def collect_hypotheses(config: Config, results: Path) -> dict[str, dict[str, Any]]:
    """Every hypothesis of the config, tested on every seed, by id: by generation, in the config's order within one."""
    seeds = [SeedResults(config, Path(results), seed) for seed in hypothesis_seeds(config)]
    ordered = sorted(config.hypotheses, key=lambda h: generation_key(h.generation))
    return {h.id: evaluate_hypothesis(h, config, seeds) for h in ordered}
