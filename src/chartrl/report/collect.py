"""Everything the report shows, as numbers: ``results/report/metrics.json`` (every number plotted or tabled).

Read from the files the stages wrote (no model is run): data cards, the warm-start check, each train series'
run.json, metrics.jsonl and val_items.jsonl, the test-accuracy files, each eval series' scores and diagonal files;
the intervals, the hypotheses' verdicts and the finding (``chartrl.report.finding``) are computed from them here.
What is missing is listed, not hidden.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from chartrl.config import Config, TrainSeries, to_plain
from chartrl.evaluate.intervals import bootstrap_mean, bootstrap_paired_gap
from chartrl.evaluate.score import why_no_published
from chartrl.report import testcurves
from chartrl.report.collapse import collect_collapse
from chartrl.report.comparisons import comparisons
from chartrl.report.deepeyes import collect_deepeyes
from chartrl.report.finding import finding
from chartrl.report.helpers import (
    HEADLINE,
    binary_interval,
    published_missing,
    read_json,
    split_rows,
    verl_test_accuracy,
)
from chartrl.report.hypotheses import collect_hypotheses, hypothesis_seeds
from chartrl.report.order import generations_in_order, in_order
from chartrl.report.recipes import collect_recipes
from chartrl.report.rerank import collect_rerank
from chartrl.report.shortcut import collect_shortcut
from chartrl.report.tools import collect_tools
from chartrl.report.validation import VAL_ITEMS, combined_gap, read_val_items

CURVE_KEYS = (
    "val/accuracy",
    "val_shuffled_images/accuracy",
    "reward/overall",
    "rollout/tool_call_ratio",
    "rollout/tool_success",
    "rollout/correct_label_ratio",
    "rollout/format_rate",
    "val/correct_label_ratio",
    "val/format_rate",
    "val/tool_call_ratio",
    "val/tool_success",
    "rollout/response_length",
    "train/degenerate_fraction",
    "actor/loss",
    "rollout/preamble_rate",
    "rollout/failed_call_rate",
    "rollout/unhelpful_call_rate",
    "rollout/wrong_answer_length",
)


def training(results: Path, series: TrainSeries) -> dict[str, Any] | None:
    metrics_file = results / "runs" / series.id / "metrics.jsonl"
    if not metrics_file.is_file():
        return None
    lines = [json.loads(line) for line in metrics_file.read_text().splitlines() if line.strip()]
    keys = sorted(
        {k for m in lines for k in m if k == "val/accuracy" or k.startswith(("reward/", "val_reward/", *CURVE_KEYS))}
    )
    curves = {key: [[m["step"], m[key]] for m in lines if key in m] for key in keys}
    run = read_json(results / "runs" / series.id / "run.json") or {}
    return {"steps": lines[-1]["step"] if lines else 0, "curves": curves, "run": run}


def matched_steps(config: Config, train: Mapping[str, Any]) -> dict[str, Any]:
    """Per generation, the train series compared at the same step: the last validation step they all reached
    (a longer-trained series can look better for that reason alone)."""
    out = {}
    for generation in generations_in_order(config):
        members = [s.id for s in config.train_series if s.generation == generation and train.get(s.id)]
        if not members:
            continue
        val_steps = [{step for step, _ in train[s]["curves"].get("val/accuracy", [])} for s in members]
        common = set.intersection(*val_steps) if val_steps else set()
        if not common:
            continue
        step = max(common)
        rows = {}
        for sid in members:
            curves = train[sid]["curves"]
            rows[sid] = {
                key: next((v for s, v in curves.get(key, []) if s == step), None)
                for key in ("val/accuracy", "val_shuffled_images/accuracy", "val/tool_call_ratio")
            }
            rows[sid]["tools"] = config.series[sid].tools
        out[generation] = {"step": step, "rows": rows}
    return out


def test_results(results: Path, config: Config) -> dict[str, Any]:
    """Each eval series' scores aggregates (``chartrl.evaluate.score``), by scorer; each has ``published_accuracy``
    (the published ChartQA rule on the same answers) or None and ``why_no_published``."""
    out = {}
    for series in in_order(config.eval_series):
        scores = {}
        for scorer in series.scorers:
            name = f"eval/{series.id}/scores_{scorer}.json"
            data = read_json(results / name)
            if data is not None:
                scores[scorer] = with_published(data["aggregate"], scorer, f"results/{name}", "score")
        out[series.id] = {"of": series.of, "checkpoint": series.checkpoint, "scores": scores}
    return out


def with_published(aggregate: Mapping[str, Any], scorer: str, path: str, job: str) -> dict[str, Any]:
    """A scores aggregate with its ``published_accuracy`` and, where that is None, ``why_no_published``: the
    scorer's reason, or that ``path`` was written before the score stage added it (rerun ``job``)."""
    if "published_accuracy" in aggregate:
        return dict(aggregate)
    why = why_no_published(scorer) or published_missing(path, job)
    return {**aggregate, "published_accuracy": None, "why_no_published": why}


SUMMARY_KEYS = ("n", "accuracy", "published_accuracy", "format_rate", "tool_call_rate", "correct_label_share")


def _intervals_by_type(items: Sequence[Mapping[str, Any]], key: str, config: Config) -> dict[str, Any]:
    """The mean of each item's ``key`` per question type, over all questions and over the headline types, each
    with its bootstrap interval over the questions."""
    ev = config.evaluate
    by_type: dict[str, list[float]] = {}
    for item in items:
        by_type.setdefault(item["question_type"], []).append(item[key])
    by_type["all"] = [item[key] for item in items]
    if ev.headline_types is not None:
        by_type[HEADLINE] = [item[key] for item in items if ev.in_headline(item["question_type"])]
    return {
        qtype: bootstrap_mean(scores, samples=ev.bootstrap_samples, confidence=ev.confidence, seed=ev.seed)
        for qtype, scores in sorted(by_type.items())
    }


def _accuracy_table(data: Mapping[str, Any], config: Config) -> dict[str, Any]:
    """One test_accuracy.json condition -> its summary, with a bootstrap interval per question type under
    chartrl's rule (``by_question_type``) and under the published ChartQA rule (``published_by_question_type``;
    None for records written without their published score)."""
    items = data["items"]
    calls = data.get("tool_call_rate")
    published = bool(items) and all("published_score" in item for item in items)
    return {
        **{key: data.get(key) for key in SUMMARY_KEYS},
        # executed calls among the calls (the rollout statistics the local rule records), where any call was made
        "tool_success": (data.get("protocol") or {}).get("executed_call_rate") if calls else None,
        "by_question_type": _intervals_by_type(items, "score", config),
        "published_by_question_type": _intervals_by_type(items, "published_score", config) if published else None,
    }


def _scores_by_type(data: Mapping[str, Any], config: Config) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {"all": {}}
    for item in data["items"]:
        out.setdefault(item["question_type"], {})[item["id"]] = item["score"]
        out["all"][item["id"]] = item["score"]
        if config.evaluate.headline_types is not None and config.evaluate.in_headline(item["question_type"]):
            out.setdefault(HEADLINE, {})[item["id"]] = item["score"]
    return out


def raw_test_accuracy(results: Path, config: Config) -> tuple[dict[str, Any], dict[str, str]]:
    """The test_accuracy files of the warm-started start (tools on and off) and of every train series, by
    generation (on verl: read from eval series' generations, :func:`verl_test_accuracy`), and on verl the eval
    series each was read from."""
    if config.backend == "verl":
        raw, sources = verl_test_accuracy(results, config)
        return {s.id: raw[s.id] for s in in_order(config.train_series) if s.id in raw}, sources
    files = {
        "warmstart (tools)": results / "eval" / "warmstart" / "test_accuracy_tools_on.json",
        "warmstart (no tool)": results / "eval" / "warmstart" / "test_accuracy_tools_off.json",
    }
    files.update({s.id: results / "eval" / s.id / "test_accuracy.json" for s in in_order(config.train_series)})
    return {name: data for name, path in files.items() if (data := read_json(path)) is not None}, {}


def test_accuracy(
    results: Path, config: Config, loaded: tuple[dict[str, Any], dict[str, str]] | None = None
) -> dict[str, Any]:
    """Test accuracy per question type of the warm-started start (tools on and off) and every train series, each
    with its shuffled-image control; and per generation the tool-minus-no-tool gap per question type, a paired
    bootstrap over the same test questions. ``loaded``: :func:`raw_test_accuracy`'s result, read once."""
    raw, sources = loaded if loaded is not None else raw_test_accuracy(results, config)
    tables = {
        name: {
            condition: _accuracy_table(data[condition], config)
            for condition in ("test", "test_shuffled_images", "test_sampled", "test_placebo")
            if condition in data  # test_sampled, test_placebo: absent from files written before they existed
        }
        for name, data in raw.items()
    }
    ev = config.evaluate
    gaps: dict[str, dict[str, Any]] = {}
    pairs = [("warmstart", "warmstart (tools)", "warmstart (no tool)")]
    for generation in generations_in_order(config):
        members = [s for s in config.train_series if s.generation == generation]
        pairs += [(generation, a.id, b.id) for a in members if a.tools for b in members if not b.tools]
    for generation, tool_series, baseline in pairs:
        if tool_series not in raw or baseline not in raw:
            continue
        first = _scores_by_type(raw[tool_series]["test"], config)
        second = _scores_by_type(raw[baseline]["test"], config)
        gaps.setdefault(generation, {})[f"{tool_series} - {baseline}"] = {
            qtype: bootstrap_paired_gap(
                first[qtype],
                second.get(qtype, {}),
                samples=ev.bootstrap_samples,
                confidence=ev.confidence,
                seed=ev.seed,
            )
            for qtype in sorted(first)
        }
    types = sorted({q for t in tables.values() for q in t["test"]["by_question_type"]} - {"all", HEADLINE})
    types += ["all"] if config.evaluate.headline_types is None else [HEADLINE, "all"]
    return {"series": tables, "gaps": gaps, "question_types": types if tables else [], "sources": sources}


def per_seed_files(results: Path, config: Config, series: str, main: str, name: str) -> dict[int, Path]:
    """A train series' file ``name`` per train seed: the main run's under ``results/{main}/{series}/``, each extra
    seed's under ``results/seeds/{series}/seed{k}/`` (the train_seed rule, rules/train.smk)."""
    paths = {config.train.seed: results / main / series / name}
    paths.update({k: results / "seeds" / series / f"seed{k}" / name for k in config.extra_seeds})
    return paths


def seed_test_records(results: Path, config: Config) -> dict[int, dict[str, list[dict[str, Any]]]]:
    """The greedy test records of each series trained under each other train seed (the hypotheses' seeds less
    train.seed): seed -> series id -> records, from ``results/seeds/{series}/seed{k}/test_accuracy.json`` where it
    is there."""
    out: dict[int, dict[str, list[dict[str, Any]]]] = {}
    for seed in hypothesis_seeds(config)[1:]:
        for series in in_order(config.seeded_series or config.train_series):
            data = read_json(per_seed_files(results, config, series.id, "eval", "test_accuracy.json")[seed])
            if data is not None:
                out.setdefault(seed, {})[series.id] = data["test"]["items"]
    return out


def seed_spread(results: Path, config: Config) -> dict[str, Any]:
    """Per train series, test accuracy (overall and per question type), the same answers' accuracy under the
    published ChartQA rule (``published_accuracy``) and correct-label share for each train seed (train.seed from
    results/eval, extra_seeds from results/seeds), and their mean, standard deviation and range; ``why_no_published``
    names the seeds whose test records have no published score (None when every seed read has them)."""
    import statistics

    seeds = (config.train.seed, *config.extra_seeds)
    out: dict[str, Any] = {"seeds": list(seeds), "series": {}}
    for series in in_order(config.seeded_series or config.train_series):
        paths = per_seed_files(results, config, series.id, "eval", "test_accuracy.json")
        per_seed, unpublished = {}, []
        for seed, path in paths.items():
            data = read_json(path)
            if data is None:
                continue
            test = data["test"]
            if test.get("published_accuracy") is None and test.get("n"):
                job = "test_accuracy" if seed == config.train.seed else "seed_test_accuracy"
                unpublished.append(f"seed {seed}: " + published_missing(f"results/{path.relative_to(results)}", job))
            per_seed[seed] = {
                "all": test["accuracy"],
                "published_accuracy": test.get("published_accuracy"),
                **test["accuracy_by_question_type"],
                "correct_label_share": test["correct_label_share"],
                "shuffled_images": data["test_shuffled_images"]["accuracy"],
            }
            if "test_sampled" in data:
                per_seed[seed]["correct_label_share_sampled"] = data["test_sampled"]["correct_label_share"]
        keys = sorted({k for v in per_seed.values() for k in v})
        spread = {}
        for key in keys:
            values = [v[key] for v in per_seed.values() if v.get(key) is not None]
            spread[key] = {
                "mean": statistics.fmean(values) if values else None,
                "sd": statistics.stdev(values) if len(values) > 1 else None,
                "min": min(values) if values else None,
                "max": max(values) if values else None,
                "n": len(values),
            }
        out["series"][series.id] = {
            "per_seed": per_seed,
            "spread": spread,
            "why_no_published": "; ".join(unpublished) or None,
        }
    return out


RL_WINDOW = 10
"""Steps in each window of the first-versus-last training reward comparison."""


def reward_change(rewards: Sequence[float], window: int, confidence: float) -> dict[str, Any]:
    """The mean training reward over the last ``window`` steps minus the mean over the first ``window``, against
    its noise. The noise is the half-width of the change's normal interval at ``confidence`` built from the
    per-step spread inside each window: z * sqrt(s_first^2 / w + s_last^2 / w), with s the standard deviation of the
    window's per-step rewards (the standard error of the difference of two window means). The reward *rose* when the
    change exceeds the noise and *held* when it is above minus the noise; with fewer than two steps a window has no
    spread, the noise is undefined and neither is claimed."""
    import statistics

    from scipy.stats import norm

    first, last = rewards[:window], rewards[-window:]
    change = statistics.fmean(last) - statistics.fmean(first)
    if window < 2:
        return {
            "reward_first": first[0],
            "reward_last": last[0],
            "reward_change": change,
            "reward_se": None,
            "reward_noise": None,
            "reward_rose": False,
            "reward_held": False,
        }
    se = math.sqrt(statistics.variance(first) / window + statistics.variance(last) / window)
    noise = float(norm.ppf(1 - (1 - confidence) / 2)) * se
    return {
        "reward_first": statistics.fmean(first),
        "reward_last": statistics.fmean(last),
        "reward_change": change,
        "reward_se": se,
        "reward_noise": noise,
        "reward_rose": change > noise,
        "reward_held": change >= -noise,
    }


def val_change(
    val: Sequence[tuple[int, float]], items: Mapping[int, Mapping[str, float]], n: int, config: Config
) -> dict[str, Any]:
    """Greedy validation from the first validation step to the last, and its peak (the earliest step of the
    highest accuracy). With per-question results the change last - first carries a paired bootstrap interval over
    the questions: *rose* when it lies above 0, *fell* when below, *kept* otherwise. Without them, the start's
    binomial interval: kept when the end is no lower than the start minus that interval's width."""
    ev = config.evaluate
    (start_step, start), (end_step, end) = val[0], val[-1]
    peak_step, peak = max(val, key=lambda sv: (sv[1], -sv[0]))
    out = {
        "val_start": start,
        "val_end": end,
        "val_end_step": end_step,
        "val_peak": peak,
        "val_peak_step": peak_step,
    }
    paired = combined_gap(
        [items.get(end_step, {})],
        [items.get(start_step, {})],
        samples=ev.bootstrap_samples,
        confidence=ev.confidence,
        seed=ev.seed,
    )
    if paired is not None:
        start_items = list(items[start_step].values())
        low, high = binary_interval(start, len(start_items), ev.confidence)
        verdict = "rose" if paired["low"] > 0 else "fell" if paired["high"] < 0 else "kept"
        return {
            **out,
            "val_interval": [low, high],
            "val_n": paired["n"],
            "val_change": paired,
            "val_verdict": verdict,
            "val_kept": verdict != "fell",
            "val_paired": True,
        }
    low, high = binary_interval(start, n, ev.confidence)
    kept = end >= start - (high - low)
    return {
        **out,
        "val_interval": [low, high],
        "val_n": n,
        "val_change": None,
        "val_verdict": "kept" if kept else "fell",
        "val_kept": kept,
        "val_paired": False,
    }


def rl_effect(results: Path, config: Config) -> dict[str, Any]:
    """Did RL improve on its start? Per train series and train seed: the mean training reward over the first and
    the last RL_WINDOW steps against its noise (:func:`reward_change`), and greedy validation at the first
    validation step, at its peak and at the last (:func:`val_change`)."""
    seeds = (config.train.seed, *config.extra_seeds)
    out: dict[str, Any] = {"window": RL_WINDOW, "confidence": config.evaluate.confidence, "series": {}}
    for series in in_order(config.train_series):
        paths = per_seed_files(results, config, series.id, "runs", "metrics.jsonl")
        per_seed = {}
        for seed in seeds:
            path = paths[seed]
            if not path.is_file():
                continue
            lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            rewards = [m["reward/overall"] for m in lines if m["step"] > 0 and "reward/overall" in m]
            val = [(m["step"], m["val/accuracy"]) for m in lines if "val/accuracy" in m]
            if len(rewards) < 2 or not val:
                continue
            window = min(RL_WINDOW, len(rewards) // 2)
            n = min(config.train.val_rows, split_rows(results, series.dataset, "val") or config.train.val_rows)
            items = read_val_items(path.with_name(VAL_ITEMS))
            per_seed[seed] = {
                **reward_change(rewards, window, config.evaluate.confidence),
                "window": window,
                **val_change(val, items, n, config),
            }
        out["series"][series.id] = {"tools": series.tools, "per_seed": per_seed}
    return out


def collect(config: Config, results: Path) -> dict[str, Any]:
    results = Path(results)
    train = {s.id: training(results, s) for s in in_order(config.train_series)}
    diagonals = {
        s.id: d
        for s in in_order(config.eval_series)
        if (d := read_json(results / "eval" / s.id / "diagonal.json")) is not None
    }
    test = test_results(results, config)
    loaded = raw_test_accuracy(results, config)
    records = {name: data["test"]["items"] for name, data in loaded[0].items()}
    accuracy = test_accuracy(results, config, loaded)
    hypotheses = collect_hypotheses(config, results)
    collapse = collect_collapse(records)
    cards = {
        name: read_json(results / "data" / name / "card.json")
        for name in config.datasets
        if (results / "data" / name / "card.json").is_file()
    }
    judges = sorted(
        {
            json.dumps(agg["judge"], sort_keys=True)
            for t in test.values()
            for agg in t["scores"].values()
            if agg.get("judge")
        }
    )
    missing = [
        f"{sid}: no training results (results/runs/{sid}/metrics.jsonl)" for sid, t in train.items() if t is None
    ]
    missing += [
        f"{sid}: no {scorer} scores"
        for s in config.eval_series
        for sid in [s.id]
        for scorer in s.scorers
        if scorer not in test[sid]["scores"]
    ]
    return {
        "experiment": config.mlflow.experiment,
        "backend": config.backend,
        "series": {
            sid: {
                "kind": s.kind,
                "generation": s.generation,
                "description": s.description,
                "config": to_plain(config.resolved["series"][sid]),
            }
            for sid, s in config.series.items()
        },
        "training": {sid: t for sid, t in train.items() if t is not None},
        "matched_steps": matched_steps(config, train),
        "finding": finding(
            config, accuracy, records, diagonals, collapse, hypotheses, seed_test_records(results, config)
        ),
        "headline": headline_section(config, results, records),
        "hypotheses": hypotheses,
        "answer_collapse": collapse,
        "test": test,
        "test_accuracy": accuracy,
        "diagonal": diagonals,
        "warmstart": read_json(results / "models" / "warmstart_check.json"),
        "data": {
            name: {split: {"rows": info["rows"], "charts": info["charts"]} for split, info in card["splits"].items()}
            for name, card in cards.items()
        },
        "judges": [json.loads(j) for j in judges],
        "bootstrap": {"samples": config.evaluate.bootstrap_samples, "confidence": config.evaluate.confidence},
        "seeds": {
            "train": config.train.seed,
            "extra": list(config.extra_seeds),
            "evaluate": config.evaluate.seed,
            "count": 1 + len(config.extra_seeds),
        },
        "seed_spread": seed_spread(results, config),
        "tools": collect_tools(results, config),
        "rl_effect": rl_effect(results, config),
        "comparisons": comparisons(config, results, train),
        "rerank": collect_rerank(results, config),
        "shortcut_filter": collect_shortcut(config, results),
        **({"deepeyes": section} if (section := collect_deepeyes(results, config)) else {}),
        **testcurves.collect_section(results, config),
        **collect_recipes(results, config),  # a recipe overlay's figures (absent for the study)
        "missing": missing,
    }


def headline_section(
    config: Config, results: Path, records: Mapping[str, Sequence[Mapping[str, Any]]]
) -> dict[str, Any]:
    """Which question types the headline test accuracy is over (``evaluate.headline_types``), and for each type
    left out what the run shows of it: the warm-started model's greedy accuracy on it with the tool's edit already
    made (a mask keeping the asked labels: the best a call can show it, ``warmstart_check.json``) and with the
    charts shuffled, and the share of its test questions whose gold answer is the most common one (what a policy
    answering one value to all of them scores)."""
    types = config.evaluate.headline_types
    out: dict[str, Any] = {"types": list(types) if types else None, "key": HEADLINE if types else "all", "left_out": {}}
    if types is None:
        return out
    check = read_json(results / "models" / "warmstart_check.json") or {}
    any_records = next(iter(records.values()), [])
    for qtype in sorted({r["question_type"] for r in any_records} - set(types)):
        golds = [r["truth"] for r in any_records if r["question_type"] == qtype and r.get("truth") is not None]
        common = max(sorted(set(golds)), key=golds.count) if golds else None  # a tie: the first in order
        out["left_out"][qtype] = {
            "masked_chart": (check.get("greedy/masked_chart") or {}).get("accuracy_by_question_type", {}).get(qtype),
            "masked_chart_shuffled": (check.get("greedy/masked_chart_shuffled_images") or {})
            .get("accuracy_by_question_type", {})
            .get(qtype),
            "questions": len(golds),
            "most_common_answer": common,
            "most_common_share": golds.count(common) / len(golds) if golds else None,
        }
    return out


def limits(metrics: Mapping[str, Any], config: Config) -> list[str]:
    """The limits of this run, in sentences, derived from the run itself."""
    out = []
    for judge in metrics["judges"]:
        members = judge.get("members") or [judge]
        if all(m.get("backend") == "reference" for m in members):
            rates = {
                (m.get("false_accept_rate") or 0.0, m.get("false_reject_rate") or 0.0): m.get("name") for m in members
            }
            errors = "; ".join(
                f"{'each member' if len(members) > 1 and len(rates) == 1 else name} accepts {accept:.0%} of the "
                f"wrong answers and refuses {reject:.0%} of the right ones"
                for (accept, reject), name in rates.items()
                if accept or reject
            )
            out.append(
                f"The {judge.get('name')} scorer is {judge.get('kind')}: offline answer equivalence, more lenient than "
                "the rule on form (units, percentages, number words, a repeated answer) and stricter on value"
                + (f"; it errs by design, as an LLM judge does, on items fixed by a hash: {errors}" if errors else "")
                + ". A diagonal check against it compares the rule with a judge-like scorer, not with a language model."
            )
        else:
            who = ", ".join(f"{m.get('model')} at {m.get('base_url')}" for m in members)
            out.append(f"The {judge.get('name')} scorer is {judge.get('kind')}: {who}.")
    if config.extra_seeds:
        out.append(
            f"{1 + len(config.extra_seeds)} train seeds "
            f"({', '.join(map(str, (config.train.seed, *config.extra_seeds)))}) "
            "from one warm-started model and one data seed: the spread shows what the RL seed changes, not what a "
            "different warm start or data draw would."
        )
    else:
        out.append(
            f"One seed (train seed {config.train.seed}): no spread across seeds is shown, so differences between "
            "series of a few points are within what a different seed could change (set extra_seeds to run more)."
        )
    for name, splits in metrics["data"].items():
        sizes = ", ".join(f"{split} {v['rows']} questions / {v['charts']} charts" for split, v in splits.items())
        out.append(f"Data {name}: {sizes}.")
    evaluate = config.evaluate
    if evaluate.limit is not None:
        rows = metrics["data"].get(evaluate.dataset, {}).get(evaluate.split, {}).get("rows")
        if rows is None or rows > evaluate.limit:
            of = f"{evaluate.limit} of the {rows}" if rows is not None else f"{evaluate.limit}"
            out.append(
                f"Test figures (test accuracy, generations, their scores, reranking and test curves) read the first "
                f"{of} {evaluate.split} questions of {evaluate.dataset} (evaluate.limit); training and validation "
                "do not read them."
            )
    train_data = config.datasets.get(config.resolved["train"]["dataset"])
    if train_data is not None and "mini" in (train_data.options.get("styles") or {}):
        out.append(
            "The miniature is built so that the tool helps: on its 168 x 56 charts the tiny model reads a bar's value "
            "only after a mask has removed the other bars, so a policy that masks the asked label can beat the no-tool "
            "baseline. The real study did not find this for Qwen2.5-VL on ChartQA: there the no-tool baseline led on "
            "validation. A tool-over-baseline gap here shows that the pipeline can learn a tool policy, not that "
            "tools help a real model."
        )
    if config.model.path is None:
        out.append(
            "The policy is the embedded default's tiny Qwen2.5-VL-architecture model (about 2 M parameters) trained "
            "from scratch on synthetic charts on a CPU; its numbers say whether the pipeline works, not how "
            "Qwen2.5-VL behaves on ChartQA."
        )
    steps = {sid: t["steps"] for sid, t in metrics["training"].items()}
    if steps:
        out.append(f"Training steps per series: {', '.join(f'{k} {v}' for k, v in steps.items())}.")
    out += [f"Missing: {m}." for m in metrics["missing"]]
    return out
