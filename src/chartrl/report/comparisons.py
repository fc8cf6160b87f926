"""The comparisons the study's conclusions rest on, computed from the run (``metrics.json["comparisons"]``):

- ``across_generations``: every train series at the last validation step all of them reached, and each
  generation's gain over the previous one split into the part seen at matched steps and the part from training
  longer (final - final = matched gap + the difference of what each gained after the matched step);
- ``headline``: final and peak validation accuracy (with the step), final tool success and tool-call ratio per
  train series, each no-tool baseline beside the tool series of its generation;
- ``scorer_matrix``: every evaluated checkpoint scored by every scorer (chartrl.evaluate.matrix), the cell whose
  scorer is the reward's own accuracy signal marked as the diagonal, and each other cell's drift from it (a paired
  bootstrap over the same generations); beside each row, the same generations under the published ChartQA rule
  (read from its rule cell's items) or why there is no such figure;
- ``test_format``: beside each test accuracy, the accuracy among well-formed answers and the truncation rate;
- ``identical``: train series whose logged metrics are equal at every step, with why, read from the run;
- ``reference``: the published numbers of the study (``reference_values`` in the config), shown beside ours only
  when the config has them.

Validation accuracies and their differences carry a bootstrap interval over the validation questions, paired where
two of them are compared (``chartrl.report.validation``: the trainer logs each question's greedy score); where a
run has no per-question results (the verl backend), a binomial interval (``helpers.binary_interval``, what the
bootstrap of a 0/1 mean converges to) and, for a difference, the interval of two independent proportions. Test
accuracies carry a bootstrap over questions.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from chartrl.answers import is_well_formed
from chartrl.config import Config, to_plain
from chartrl.evaluate.intervals import bootstrap_mean, bootstrap_paired_gap
from chartrl.evaluate.matrix import checkpoint_groups, matrix_files, matrix_scorers
from chartrl.evaluate.score import PUBLISHED_SCORERS, why_no_published
from chartrl.report.helpers import (
    binary_interval,
    make_panel,
    no_generations_reason,
    published_missing,
    run_files,
    split_rows,
    verl_test_accuracy,
)
from chartrl.report.order import generations_in_order, in_order, is_numbered
from chartrl.report.validation import accuracy_at, combined_gap, independent_gap, run_val_items
from chartrl.rewards import accuracy_signal

VOLATILE = ("timing", "time", "per_second", "throughput", "memory", "mfu", "judge/")
"""Metric keys left out of the identity check: wall-clock and memory figures, and the judge's own counters."""


def _value_at(curve: Sequence[Sequence[float]], step: int) -> float | None:
    return next((v for s, v in curve if s == step), None)


def _val_n(results: Path, config: Config, dataset: str) -> int:
    return min(config.train.val_rows, split_rows(results, dataset, "val") or config.train.val_rows)


def _accuracy(value: float | None, n: int, confidence: float) -> dict[str, Any] | None:
    if value is None:
        return None
    low, high = binary_interval(value, n, confidence)
    return {"mean": value, "low": low, "high": high, "n": n}


def _val_accuracy(
    config: Config, items: Mapping[int, Mapping[str, float]], step: int, value: float | None, n: int
) -> dict[str, Any] | None:
    """A validation accuracy at ``step`` with its interval: the bootstrap over the step's questions where the run
    logged them, else the binomial interval of the logged accuracy over ``n`` questions."""
    ev = config.evaluate
    logged = accuracy_at(items.get(step), samples=ev.bootstrap_samples, confidence=ev.confidence, seed=ev.seed)
    return logged if logged is not None else _accuracy(value, n, ev.confidence)


PAIRED = "paired bootstrap over the same validation questions"
INDEPENDENT = "two independent proportions, normal approximation (no per-question validation results logged)"


def gain_intervals(
    config: Config,
    gain: Mapping[str, Any],
    previous: Mapping[int, Mapping[str, float]],
    current: Mapping[int, Mapping[str, float]],
    n: int,
) -> dict[str, Any]:
    """The intervals of a split gain (:func:`split_gain`): total (current final - previous final), at the matched
    step (current - previous there) and from training longer ((c_final - c_matched) - (p_final - p_matched)), each
    a paired bootstrap over the validation questions when both runs logged them at those steps, else (total and
    matched only) the interval of two independent proportions over ``n`` questions."""
    ev = config.evaluate
    boot = {"samples": ev.bootstrap_samples, "confidence": ev.confidence, "seed": ev.seed}
    m, pf, cf = gain["matched_step"], gain["previous_final_step"], gain["current_final_step"]
    total = combined_gap([current.get(cf, {})], [previous.get(pf, {})], **boot)
    matched = combined_gap([current.get(m, {})], [previous.get(m, {})], **boot)
    longer = combined_gap(
        [current.get(cf, {}), previous.get(m, {})], [current.get(m, {}), previous.get(pf, {})], **boot
    )
    if total is None or matched is None:
        total = independent_gap(gain["current_final"], gain["previous_final"], n, ev.confidence)
        matched = independent_gap(gain["current_matched"], gain["previous_matched"], n, ev.confidence)
        longer, kind = None, INDEPENDENT
    else:
        kind = PAIRED
    return {
        "total_interval": [total["low"], total["high"]],
        "matched_interval": [matched["low"], matched["high"]],
        "longer_interval": [longer["low"], longer["high"]] if longer else None,
        "interval_kind": kind,
        "val_n": matched["n"],
    }


def generation_chain(config: Config, tools: bool) -> list[Any]:
    """The first train series of one role (tool policy or no-tool baseline) in each of the study's numbered
    generations, in generation order (v1, v2, v3): the chain whose links are "the gain of each generation over the
    previous one". A control generation (the hack control) is not a step of the study's design and is left out."""
    chain = []
    for generation in generations_in_order(config):
        if not is_numbered(generation):
            continue
        first = next((s for s in config.train_series if s.generation == generation and s.tools == tools), None)
        if first is not None:
            chain.append(first)
    return chain


def across_generations(config: Config, train: Mapping[str, Any], results: Path) -> dict[str, Any]:
    """Every train series at the last validation step they all reached, and per role (tool policy, no-tool
    baseline: the first series of that role in each numbered generation) the gain of each generation over the
    previous one, split into the gap at their last common validation step and the rest (from training longer),
    each with its interval (:func:`gain_intervals`)."""
    confidence = config.evaluate.confidence
    ordered = in_order(config.train_series)
    curves = {s.id: (train.get(s.id) or {}).get("curves", {}).get("val/accuracy") or [] for s in ordered}
    items = {s.id: run_val_items(results, s.id) for s in ordered}
    present = [sid for sid, curve in curves.items() if curve]
    common = set.intersection(*({s for s, _ in curves[sid]} for sid in present)) if present else set()
    step = max(common) if common else None
    rows = {}
    for series in ordered:
        if series.id not in present or step is None:
            continue
        n = _val_n(results, config, series.dataset)
        tcurves = train[series.id]["curves"]
        rows[series.id] = {
            "generation": series.generation,
            "tools": series.tools,
            "val_accuracy": _val_accuracy(config, items[series.id], step, _value_at(curves[series.id], step), n),
            "val_tool_call_ratio": _value_at(tcurves.get("val/tool_call_ratio", []), step),
            "val_tool_success": _value_at(tcurves.get("val/tool_success", []), step),
        }
    gains = []
    for role, tools in (("tool policy", True), ("no-tool baseline", False)):
        chain = generation_chain(config, tools)
        for previous, current in zip(chain, chain[1:], strict=False):
            gain = split_gain(curves[previous.id], curves[current.id])
            if gain is None:
                continue
            n = _val_n(results, config, current.dataset)
            gain.update(gain_intervals(config, gain, items[previous.id], items[current.id], n))
            gains.append(
                {
                    "role": role,
                    "from": previous.id,
                    "to": current.id,
                    "generations": [previous.generation, current.generation],
                    **gain,
                }
            )
    return {
        "step": step,
        "rows": rows,
        "gains": gains,
        "without_validation": [s.id for s in ordered if s.id not in present],
        "interval": _val_interval_kind(items.values()),
        "confidence": confidence,
    }


def _val_interval_kind(items: Any) -> str:
    if all(items):
        return "bootstrap over the validation questions"
    if any(items):
        return "bootstrap over the validation questions where a run logged them, else binomial"
    return "binomial (no per-question validation results logged)"


def split_gain(previous: Sequence[Sequence[float]], current: Sequence[Sequence[float]]) -> dict[str, Any] | None:
    """final(current) - final(previous) = [current - previous at their last common validation step]
    + [what current gained after it - what previous gained after it]; None without a common step."""
    common = {s for s, _ in previous} & {s for s, _ in current}
    if not common:
        return None
    step = max(common)
    (previous_step, previous_final), (current_step, current_final) = previous[-1], current[-1]
    previous_matched, current_matched = _value_at(previous, step), _value_at(current, step)
    total = current_final - previous_final
    matched = current_matched - previous_matched
    return {
        "matched_step": step,
        "previous_final": previous_final,
        "previous_final_step": previous_step,
        "current_final": current_final,
        "current_final_step": current_step,
        "previous_matched": previous_matched,
        "current_matched": current_matched,
        "total": total,
        "at_matched_steps": matched,
        "from_training_longer": total - matched,
    }


def _last(curves: Mapping[str, Any], keys: Sequence[str]) -> tuple[str | None, int | None, float | None]:
    for key in keys:
        if curves.get(key):
            step, value = curves[key][-1]
            return key, step, value
    return None, None, None


def headline(config: Config, train: Mapping[str, Any], results: Path) -> dict[str, Any]:
    """Per train series, generation by generation with the tool series first: final and peak validation accuracy
    (step, binomial interval), the final tool success and tool-call ratio (training rollouts where logged, else
    validation), and for a tool series its generation's first no-tool baseline and the final gap to it."""
    rows, logged = {}, []
    for generation in generations_in_order(config):
        members = [s for s in config.train_series if s.generation == generation]
        baseline = next((s for s in members if not s.tools), None)
        for series in sorted(members, key=lambda s: not s.tools):
            curves = (train.get(series.id) or {}).get("curves", {})
            val = curves.get("val/accuracy") or []
            if not val:
                continue
            n = _val_n(results, config, series.dataset)
            items = run_val_items(results, series.id)
            logged.append(items)
            final_step, final = val[-1]
            peak_step, peak = max(val, key=lambda sv: (sv[1], -sv[0]))  # the earliest step of the peak
            success_key, success_step, success = _last(curves, ("rollout/tool_success", "val/tool_success"))
            ratio_key, ratio_step, ratio = _last(curves, ("rollout/tool_call_ratio", "val/tool_call_ratio"))
            row = {
                "generation": generation,
                "tools": series.tools,
                "final": {**_val_accuracy(config, items, final_step, final, n), "step": final_step},
                "peak": {**_val_accuracy(config, items, peak_step, peak, n), "step": peak_step},
                "tool_success": {"value": success, "step": success_step, "key": success_key},
                "tool_call_ratio": {"value": ratio, "step": ratio_step, "key": ratio_key},
                "baseline": None,
            }
            base_val = (train.get(baseline.id) or {}).get("curves", {}).get("val/accuracy") if baseline else None
            if series.tools and base_val:
                row["baseline"] = {
                    "series": baseline.id,
                    "final": base_val[-1][1],
                    "step": base_val[-1][0],
                    "gap": final - base_val[-1][1],
                }
            rows[series.id] = row
    return {"rows": rows, "interval": _val_interval_kind(logged)}


def _items(path: Path) -> dict[str, float] | None:
    """Item id -> accuracy of a scores file (judge failures left out), None when the file is absent."""
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    return {i["id"]: i["accuracy"] for i in data["items"] if i["accuracy"] is not None}


def _published(results: Path, cells: Mapping[str, str], boot: Mapping[str, Any]) -> tuple[dict | None, str | None]:
    """A matrix row's accuracy under the published ChartQA rule, with the same bootstrap interval as its cells, read
    from the ``published_score`` of its rule cell's items; or None and why not."""
    scorer = next((s for s in cells if s in PUBLISHED_SCORERS), None)
    if scorer is None:
        return None, why_no_published(next(iter(cells)))
    path = results / cells[scorer]
    if not path.is_file():
        return None, f"no results/{cells[scorer]}"
    items = json.loads(path.read_text())["items"]
    if not all("published_score" in i for i in items):
        job = "matrix_score" if "/matrix_scores_" in cells[scorer] else "score"
        return None, published_missing(f"results/{cells[scorer]}", job)
    return bootstrap_mean([i["published_score"] for i in items], **boot), None


def scorer_matrix(config: Config, results: Path) -> dict[str, Any]:
    """Rows: each evaluated checkpoint; columns: each scorer; a cell: accuracy with its bootstrap interval, the
    eval series that asked for it, and whether it is the diagonal (the scorer is the reward's own accuracy signal);
    an off-diagonal cell's drift: its accuracy minus the diagonal's on the same generations (paired bootstrap).
    Beside each row, ``published``: the same generations under the published ChartQA rule with its interval (None
    with ``why_no_published`` where there is none)."""
    ev = config.evaluate
    boot = {"samples": ev.bootstrap_samples, "confidence": ev.confidence, "seed": ev.seed}
    groups = checkpoint_groups(config)
    rows, missing = {}, []
    order = {
        sid: i
        for i, sid in enumerate(
            s.id for g in generations_in_order(config) for s in config.train_series if s.generation == g
        )
    }
    files = sorted(matrix_files(config).items(), key=lambda item: order.get(groups[item[0]][0].of, len(order)))
    for owner, cells_files in files:
        members = groups[owner]
        trained = config.series[members[0].of]
        signal = accuracy_signal(trained.reward.name, trained.reward.params)
        scores = {scorer: _items(results / path) for scorer, path in cells_files.items()}
        diagonal = scores.get(signal)
        cells = {}
        for scorer, path in cells_files.items():
            items = scores[scorer]
            if items is None:
                missing.append(f"{owner} x {scorer}: no results/{path}")
                continue
            cell = {
                **bootstrap_mean(list(items.values()), **boot),
                "file": f"results/{path}",
                "series": [s.id for s in members if scorer in s.scorers],
                "diagonal": scorer == signal,
                "drift": None,
            }
            if scorer != signal and diagonal is not None:
                cell["drift"] = bootstrap_paired_gap(items, diagonal, **boot)
            cells[scorer] = cell
        published, why_not = _published(results, cells_files, boot)
        rows[owner] = {
            "of": trained.id,
            "checkpoint": members[0].checkpoint,
            "generation": trained.generation,
            "reward": trained.reward.name,
            "signal": signal,
            "series": [s.id for s in members],
            "cells": cells,
            "published": published,
            "why_no_published": why_not,
        }
    return {"scorers": list(matrix_scorers(config)), "rows": rows, "missing": missing}


def _truncated_rate(generations: Path) -> float | None:
    import pyarrow.parquet as pq

    rows = pq.read_table(generations, columns=["id", "sample", "truncated"]).to_pylist()
    first: dict[str, bool] = {}
    for row in sorted(rows, key=lambda r: (r["id"], r["sample"])):
        first.setdefault(row["id"], bool(row["truncated"]))
    return sum(first.values()) / len(first) if first else None


def test_format(config: Config, results: Path) -> dict[str, Any]:
    """Per row of the test table: accuracy among well-formed answers (bootstrap over those questions) and the
    truncation rate (final turns cut at the token budget); and per evaluated checkpoint the same from its
    generations, for the matrix."""
    ev = config.evaluate
    boot = {"samples": ev.bootstrap_samples, "confidence": ev.confidence, "seed": ev.seed}
    out: dict[str, Any] = {"series": {}, "checkpoints": {}}
    files = {s.id: results / "eval" / s.id / "test_accuracy.json" for s in config.train_series}
    files["warmstart (tools)"] = results / "eval" / "warmstart" / "test_accuracy_tools_on.json"
    files["warmstart (no tool)"] = results / "eval" / "warmstart" / "test_accuracy_tools_off.json"
    verl_files: dict[str, Path] = {}
    if config.backend == "verl":
        raw, sources = verl_test_accuracy(results, config)
        verl_files = {sid: results / "eval" / owner / "generations.parquet" for sid, owner in sources.items()}
    else:
        raw = {name: json.loads(path.read_text()) for name, path in files.items() if path.is_file()}
    for name, data in raw.items():
        test = data["test"]
        formed = [item["score"] for item in test["items"] if item["well_formed"]]
        truncated = (test.get("protocol") or {}).get("truncated_rate")
        if name in verl_files:
            truncated = _truncated_rate(verl_files[name])
        by_type: dict[str, list[float]] = {}
        for item in test["items"]:
            if item["well_formed"]:
                by_type.setdefault(item["question_type"], []).append(item["score"])
        out["series"][name] = {
            "well_formed_accuracy": bootstrap_mean(formed, **boot),
            "well_formed_by_question_type": {
                qtype: bootstrap_mean(scores, **boot) for qtype, scores in sorted(by_type.items())
            },
            "well_formed_share": len(formed) / len(test["items"]) if test["items"] else None,
            "truncated_rate": truncated,
        }
    import pyarrow.parquet as pq

    for owner, cells in matrix_files(config).items():
        generations = results / "eval" / owner / "generations.parquet"
        if not generations.is_file() or owner not in checkpoint_groups(config):
            continue
        columns = ["id", "sample", "final_response", "truncated", "tool_called"]
        rows = pq.read_table(generations, columns=columns).to_pylist()
        formed = {f"{r['id']}#{r['sample']}" for r in rows if is_well_formed(r["final_response"])}
        per_scorer = {}
        for scorer, path in cells.items():
            items = _items(results / path)
            if items is not None:
                per_scorer[scorer] = bootstrap_mean([v for k, v in items.items() if k in formed], **boot)
        out["checkpoints"][owner] = {
            "truncated_rate": sum(bool(r["truncated"]) for r in rows) / len(rows) if rows else None,
            "tool_call_ratio": sum(bool(r["tool_called"]) for r in rows) / len(rows) if rows else None,
            "well_formed_share": len(formed) / len(rows) if rows else None,
            "well_formed_accuracy": per_scorer,
        }
    return out


def _metric_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def _stable(key: str) -> bool:
    return key != "step" and not any(part in key for part in VOLATILE)


def _weights_digest(checkpoint: Path) -> str | None:
    """sha256 over the checkpoint's weight files (safetensors, bin, pt shards other than the optimizer), None when
    the folder holds none."""
    files = sorted(
        p
        for p in checkpoint.rglob("*")
        if p.is_file() and p.suffix in (".safetensors", ".bin", ".pt") and "optim" not in p.name
    )
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(checkpoint).as_posix().encode())
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _last_checkpoint(results: Path, sid: str) -> Path | None:
    run = results / "runs" / sid / "run.json"
    if not run.is_file():
        return None
    last = (json.loads(run.read_text()).get("checkpoints") or {}).get("last")
    if not last:
        return None
    path = Path(last)
    path = path if path.is_absolute() else results.parent / path
    return path if path.is_dir() else None


def same_run(first: Sequence[Mapping[str, Any]], second: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Evidence that two metric histories are the same run: the same steps and every key both logged (timings and
    judge counters left out) equal at every step; None when they differ (or either is empty)."""
    if not first or not second or [m["step"] for m in first] != [m["step"] for m in second]:
        return None
    compared = set()
    for a, b in zip(first, second, strict=True):
        shared = {k for k in a if k in b and _stable(k)}
        if any(a[k] != b[k] for k in shared):
            return None
        compared |= shared
    if not compared:
        return None
    only = sorted({k for m in first for k in m} ^ {k for m in second for k in m})
    skipped = sum(1 for m in first if m.get("actor/skipped") == 1 or m.get("train/degenerate_fraction") == 1)
    return {
        "steps": len(first),
        "keys": len(compared),
        "only_in_one": [k for k in only if _stable(k)],
        "skipped_steps": skipped,
    }


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        return {k: v for key, item in value.items() for k, v in _flat(item, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): value}


def _config_difference(config: Config, a: str, b: str) -> list[str]:
    """``key: a's value vs b's value`` for each config key (nested keys dotted) the two series set differently."""
    first, second = (_flat(to_plain(config.resolved["series"][sid])) for sid in (a, b))
    return [
        f"{key}: {json.dumps(first.get(key))} vs {json.dumps(second.get(key))}"
        for key in sorted(set(first) | set(second))
        if key != "description" and first.get(key) != second.get(key)
    ]


def _signal(config: Config, sid: str) -> str:
    series = config.series[sid]
    return accuracy_signal(series.reward.name, series.reward.params)


def _judge_evidence(config: Config, sid: str, other: str, lines: Sequence[Mapping[str, Any]]) -> str | None:
    """What the run records about the judge behind ``sid``'s reward (None when its accuracy is the rule's)."""
    signal = _signal(config, sid)
    if signal not in ("judge", "panel"):
        return None
    judge = config.judge_of(sid)
    members = [judge.member(m) for m in judge.panel.members] if signal == "panel" else [judge]
    offline = all(m.backend == "reference" for m in members)
    who = "the offline reference judge (answer equivalence, not an LLM)" if offline else "an LLM judge"
    if not any("judge/verdicts" in m for m in lines):
        return f"{sid}'s {signal} accuracy is {who}; the run logs no judge counters (verl logs none per step)"
    verdicts = sum(m.get("judge/verdicts", 0) for m in lines)
    requests = sum(m.get("judge/requests", 0) for m in lines)
    if not verdicts:
        return (
            f"{sid}'s {signal} accuracy is {who}: it gave no verdict over the run (no answer reached it: an answer "
            "without the answer tag scores 0 under the rule and the judge alike)"
        )
    whose = "the rule's" if _signal(config, other) == "rule" else f"{other}'s"
    return (
        f"{sid}'s {signal} accuracy is {who}: {int(verdicts)} verdicts over the run, {int(requests)} requests to an "
        f"endpoint, and its rewards equal {whose} at every step: on these rollouts its verdicts gave {whose} rewards"
    )


def identical_series(config: Config, results: Path, train: Mapping[str, Any]) -> dict[str, Any]:
    """Pairs of train series that are the same run, read from their metrics.jsonl (and, where both are on disk,
    their last checkpoints' weights and their test answers), with what differs in their config and why they
    still ran alike."""
    ids = [s.id for s in config.train_series if train.get(s.id)]
    lines = {sid: _metric_lines(results / "runs" / sid / "metrics.jsonl") for sid in ids}
    pairs = []
    for i, a in enumerate(ids):
        for b in ids[i + 1 :]:
            evidence = same_run(lines[a], lines[b])
            if evidence is None:
                continue
            checkpoints = [_last_checkpoint(results, sid) for sid in (a, b)]
            digests = [_weights_digest(p) if p else None for p in checkpoints]
            evidence["weights_identical"] = digests[0] == digests[1] if all(digests) else None
            tests = [results / "eval" / sid / "test_accuracy.json" for sid in (a, b)]
            if all(p.is_file() for p in tests):
                items = [json.loads(p.read_text())["test"]["items"] for p in tests]
                evidence["test_answers_identical"] = items[0] == items[1]
            else:
                evidence["test_answers_identical"] = None
            judge = [t for x, y in ((a, b), (b, a)) if (t := _judge_evidence(config, x, y, lines[x]))]
            pairs.append(
                {
                    "series": [a, b],
                    **evidence,
                    "config_difference": _config_difference(config, a, b),
                    "seed": config.train.seed,
                    "judge": judge,
                    "why": _why(config, a, b, evidence, judge),
                }
            )
    return {"compared": len(ids) * (len(ids) - 1) // 2, "pairs": pairs}


def _why(config: Config, a: str, b: str, evidence: Mapping[str, Any], judge: Sequence[str]) -> str:
    parts = [
        f"{a} and {b} logged the same value of each of {evidence['keys']} metrics at all {evidence['steps']} "
        "logged steps (timings and judge counters left out)"
    ]
    if evidence.get("weights_identical"):
        parts.append("their last checkpoints' weights are byte-identical")
    if evidence.get("test_answers_identical"):
        parts.append("they gave the same test answers")
    differ = _config_difference(config, a, b)
    text = "; ".join(parts) + ". "
    text += f"Their configs differ only in {'; '.join(differ)}. " if differ else "Their configs are the same. "
    text += (
        f"Both start from the same model with train seed {config.train.seed}, so they draw the same questions and "
        "samples at each step; equal rewards, losses and gradient norms at every step mean equal updates."
    )
    if evidence.get("skipped_steps"):
        text += (
            f" At {evidence['skipped_steps']} of their training steps no update ran (every group's rewards were "
            "equal), so the policy did not move there."
        )
    if judge:
        text += " " + " ".join(f"{line}." for line in judge)
    return text


def reference_values(config: Config) -> dict[str, Any] | None:
    """The published numbers of the study (``reference_values`` in the config), None when the config has none."""
    reference = config.reference_values
    if not reference.validation and not reference.test:
        return None
    test = {
        sid: {**to_plain(values), "run_checkpoint": config.series[sid].checkpoint}
        for sid, values in reference.test.items()
    }
    return {"source": reference.source, "validation": to_plain(reference.validation), "test": test}


def comparisons(config: Config, results: Path, train: Mapping[str, Any]) -> dict[str, Any]:
    results = Path(results)
    return {
        "across_generations": across_generations(config, train, results),
        "headline": headline(config, train, results),
        "scorer_matrix": scorer_matrix(config, results),
        "test_format": test_format(config, results),
        "identical": identical_series(config, results, train),
        "reference": reference_values(config),
    }


def comparison_panels(metrics: Mapping[str, Any], config: Config) -> list[dict[str, Any]]:
    """The panels of these comparisons (chartrl.report.panels' contract), each filled or saying why not."""

    block = metrics["comparisons"]
    across = block["across_generations"]
    train_ids = [s.id for s in config.train_series]
    lacking = across["without_validation"]
    no_val = (
        f"no val/accuracy in results/runs/{{series}}/metrics.jsonl of {', '.join(lacking)}"
        if lacking
        else "the train series share no validation step"
    )
    out = [
        make_panel(
            metrics,
            "comparisons/across_generations",
            "Across generations at matched steps",
            [["comparisons", "across_generations", "rows"]],
            f"across generations at matched steps: {no_val}" if train_ids else "the config has no train series",
        ),
        make_panel(
            metrics,
            "comparisons/gains",
            "Gain of each generation: at matched steps and from training longer",
            [["comparisons", "across_generations", "gains"]],
            "gain of each generation: "
            + (
                "the config has one generation"
                if len(generations_in_order(config)) < 2
                else f"no two consecutive generations' series of one role share a validation step ({no_val})"
            ),
        ),
        make_panel(
            metrics,
            "comparisons/headline",
            "Validation per series: final and peak",
            [["comparisons", "headline", "rows"]],
            f"headline: {no_val}" if train_ids else "headline: the config has no train series",
        ),
    ]
    matrix = block["scorer_matrix"]
    out.append(
        make_panel(
            metrics,
            "comparisons/scorer_matrix",
            "Reward x scorer matrix",
            [["comparisons", "scorer_matrix", "rows", owner, "cells"] for owner in matrix["rows"]],
            "reward x scorer matrix: "
            + ("; ".join(matrix["missing"]) if matrix["missing"] else "the config has no eval series"),
        )
    )
    missing = [sid for sid in train_ids if sid not in block["test_format"]["series"]]
    out.append(
        make_panel(
            metrics,
            "comparisons/test_format",
            "Test accuracy among well-formed answers, and truncation",
            [["comparisons", "test_format", "series"]],
            f"well-formed accuracy and truncation: {no_generations_reason(config, missing or train_ids)}",
        )
    )
    identical = block["identical"]
    out.append(
        make_panel(
            metrics,
            "comparisons/identical",
            "Series identical by construction",
            [["comparisons", "identical", "pairs"]],
            (
                f"identical series: none; no two of the {len(train_ids)} train series logged the same metrics at "
                f"every step ({identical['compared']} pairs compared)"
                if identical["compared"]
                else f"identical series: fewer than two train series have training results ({run_files(train_ids)})"
            ),
        )
    )
    out.append(
        make_panel(
            metrics,
            "comparisons/reference",
            "The study's published numbers",
            [["comparisons", "reference"]],
            "the study's published numbers: this config has no reference_values (config/gpu.yaml, the real "
            "study, has them), so only this run's numbers are shown",
        )
    )
    return out
