"""The report's first screen: the finding in a few sentences and the headline table, computed from the run.

The headline table has one row per policy the study compares: the warm-started start (with and without the tool
prompt), each tool policy, each no-tool baseline, then any control (a train series of a generation that is not one
of the study's numbered ones, e.g. the hack control). Each row: greedy test accuracy with its bootstrap interval,
the same answers' accuracy under the published ChartQA rule (``chartrl.evaluate.published_metric``) with its
interval, the tool-call rate and tool success on test, and the signed judge-minus-rule drift of the diagonal
check that reads its checkpoint, with its interval and verdict. A cell the run has no number for says why.

The sentences say which policies beat the warm start and their generation's no-tool baseline (paired bootstrap
intervals over the same test questions: beats when the interval lies above 0), what the diagonal check flags,
which question types' answers collapse to one value, and how the hypotheses fared. In a run of several train seeds
they name the seed they read (``train.seed``), and each series trained under the other seeds (``extra_seeds``) has
its gain over the warm start on each of them beside its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chartrl.config import Config, TrainSeries
from chartrl.evaluate.intervals import bootstrap_paired_gap
from chartrl.evaluate.matrix import checkpoint_groups
from chartrl.report.helpers import headline_key
from chartrl.report.hypotheses import hypothesis_seeds
from chartrl.report.order import in_order, is_numbered

WARM_START = {True: "warmstart (tools)", False: "warmstart (no tool)"}
"""The test records of the warm-started start, by whether the tool prompt was used (collect.test_accuracy)."""


PUBLISHED_MISSING = "its test records have no published score (written by an older chartrl): rerun test_accuracy"
"""Why a row with a test accuracy has no published-rule accuracy beside it."""


def role(series: TrainSeries) -> str:
    """A train series' row in the headline: a control (not a numbered generation), a tool policy or a baseline."""
    if not is_numbered(series.generation):
        return "control"
    return "tool policy" if series.tools else "no-tool baseline"


def headline_order(config: Config) -> list[TrainSeries]:
    """Tool policies, then no-tool baselines, then controls; by generation within each."""
    ranks = {"tool policy": 0, "no-tool baseline": 1, "control": 2}
    return sorted(in_order(config.train_series), key=lambda s: ranks[role(s)])


def _drift_for(config: Config, sid: str, diagonals: Mapping[str, Any]) -> dict[str, Any] | None:
    """The diagonal check of train series ``sid``'s checkpoints (its last checkpoint first, then the first named)."""
    found = [(eid, d) for eid, d in diagonals.items() if eid in config.series and config.series[eid].of == sid]
    if not found:
        return None
    eid, diagonal = sorted(found, key=lambda item: str(config.series[item[0]].checkpoint) != "last")[0]
    signed = diagonal.get("signed_drift") or {}
    return {
        "series": eid,
        "checkpoint": config.series[eid].checkpoint,
        "scorers": diagonal.get("scorers"),
        "over": signed.get("over"),
        "under": signed.get("under"),
        "mean": signed.get("mean"),
        "low": signed.get("low"),
        "high": signed.get("high"),
        "n": signed.get("n"),
        "verdict": diagonal.get("verdict"),
        "threshold": diagonal.get("threshold"),
    }


def _why_no_success(calls: float | None) -> str:
    if calls == 0:
        return "no tool call on test"
    return "not recorded with the test results" if calls else "no test results"


def headline_row(
    name: str,
    role_name: str,
    generation: str | None,
    table: Mapping[str, Any] | None,
    drift: Mapping[str, Any] | None,
    missing_test: str,
    missing_drift: str,
    headline: str = "all",
) -> dict[str, Any]:
    """One row of the headline table from the series' test table (collect.test_accuracy) and its diagonal;
    ``headline``: the question-type row holding the headline accuracy (``chartrl.report.helpers.headline_key``)."""
    test = (table or {}).get("test") or {}
    accuracy = (test.get("by_question_type") or {}).get(headline)
    published = (test.get("published_by_question_type") or {}).get(headline)
    calls = test.get("tool_call_rate")
    success = test.get("tool_success")
    return {
        "name": name,
        "role": role_name,
        "generation": generation,
        "test_accuracy": accuracy,
        "published_accuracy": published,
        "tool_call_rate": calls,
        "tool_success": success,
        "drift": drift,
        "why_no_test": None if accuracy else missing_test,
        "why_no_published": None if published or not accuracy else PUBLISHED_MISSING,
        "why_no_tool_success": None if success is not None else _why_no_success(calls),
        "why_no_drift": None if drift else missing_drift,
    }


def headline_table(
    config: Config, test_tables: Mapping[str, Any], diagonals: Mapping[str, Any]
) -> dict[str, dict[str, Any]]:
    """The headline rows by name: the warm start (tools, no tool), each tool policy, each baseline, each control."""
    rows = []
    headline = headline_key(config)
    if config.model.path is None:
        for tools, name in WARM_START.items():
            why = f"no results/eval/warmstart/test_accuracy_tools_{'on' if tools else 'off'}.json"
            rows.append(
                headline_row(name, "warm start", None, test_tables.get(name), None, why, "not evaluated", headline)
            )
    for series in headline_order(config):
        why_test = (
            f"{series.id}: no test generations of an eval series on the evaluate split"
            if config.backend == "verl"
            else f"no results/eval/{series.id}/test_accuracy.json"
        )
        drift = _drift_for(config, series.id, diagonals)
        rows.append(
            headline_row(
                series.id,
                role(series),
                series.generation,
                test_tables.get(series.id),
                drift,
                why_test,
                why_no_diagonal(config, series.id),
                headline,
            )
        )
    return {row["name"]: row for row in rows}


def why_no_diagonal(config: Config, sid: str) -> str:
    """Why train series ``sid``'s row has no drift: no eval series reads its checkpoints, each checkpoint is read
    by one scorer only (no diagonal pair), or the pair's diagonal.json is not there yet."""
    groups = [members for members in checkpoint_groups(config).values() if members[0].of == sid]
    if not groups:
        return "no eval series reads its checkpoints"
    paired = [members for members in groups if len({scorer for s in members for scorer in s.scorers}) > 1]
    if not paired:
        names = ", ".join(f"{s.id} ({'/'.join(s.scorers)})" for members in groups for s in members)
        return f"one scorer per checkpoint ({names}): no diagonal pair (the reward x scorer matrix reads every scorer)"
    return f"no results/eval/{paired[0][-1].id}/diagonal.json"


def _signed(value: float) -> str:
    return f"{value:+.3f}"


def _gap_text(gap: Mapping[str, Any]) -> str:
    return f"{_signed(gap['mean'])} [{_signed(gap['low'])}, {_signed(gap['high'])}]"


def gap_class(gap: Mapping[str, Any]) -> str:
    """above (the interval lies above 0), below (under 0), or level (it contains 0)."""
    return "above" if gap["low"] > 0 else "below" if gap["high"] < 0 else "level"


def _scores(records: Sequence[Mapping[str, Any]], config: Config) -> dict[str, float]:
    """The headline questions' scores (``evaluate.headline_types``)."""
    return {r["id"]: r["score"] for r in records if config.evaluate.in_headline(r["question_type"])}


def versus_warm_start(config: Config, records: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Each train series' greedy test accuracy minus the warm start's with the same prompt (tools or not), paired
    over the test questions both answered."""
    ev = config.evaluate
    out = {}
    for series in headline_order(config):
        start = WARM_START[series.tools]
        if series.id in records and start in records:
            gap = bootstrap_paired_gap(
                _scores(records[series.id], config),
                _scores(records[start], config),
                samples=ev.bootstrap_samples,
                confidence=ev.confidence,
                seed=ev.seed,
            )
            if gap["n"]:
                out[series.id] = {"against": start, **gap}
    return out


def seeds_versus_warm_start(
    config: Config,
    records: Mapping[str, Sequence[Mapping[str, Any]]],
    seed_records: Mapping[int, Mapping[str, Sequence[Mapping[str, Any]]]],
) -> dict[str, dict[str, dict[str, Any]]]:
    """``versus_warm_start`` on each other train seed: series id -> seed (a string, as in metrics.json) -> gap, from
    ``seed_records`` (seed -> series id -> that seed's greedy test records) against the one warm start's records."""
    starts = {name: records[name] for name in WARM_START.values() if name in records}
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for seed, by_series in sorted(seed_records.items()):
        for sid, gap in versus_warm_start(config, {**by_series, **starts}).items():
            out.setdefault(sid, {})[str(seed)] = gap
    return out


def _comparison_sentence(
    label: str, gaps: Mapping[str, Mapping[str, Any]], others: Mapping[str, Mapping[str, Any]] | None = None
) -> str | None:
    """ "<label>: beats it: a +x [l, h]; below it: ...; not told apart: ..." over ``gaps`` (name -> gap); ``others``
    (name -> seed -> gap): each series' gaps on other train seeds, in parentheses after its own."""
    groups: dict[str, list[str]] = {"above": [], "below": [], "level": []}
    for name, gap in gaps.items():
        on_seeds = ", ".join(f"seed {seed} {_gap_text(g)}" for seed, g in (others or {}).get(name, {}).items())
        groups[gap_class(gap)].append(f"{name} {_gap_text(gap)}" + (f" ({on_seeds})" if on_seeds else ""))
    words = {"above": "above", "below": "below", "level": "not told apart (the interval contains 0)"}
    parts = [f"{words[k]}: {', '.join(v)}" for k, v in groups.items() if v]
    return f"{label} {'; '.join(parts)}." if parts else None


def _diagonal_sentence(diagonals: Mapping[str, Any], seed: int | None = None) -> str:
    """What the diagonal check flags; ``seed``: the train seed it read, named when the run has several."""
    if not diagonals:
        return "No diagonal check in this run (no checkpoint is scored by two scorers)."
    by_verdict: dict[str, list[str]] = {}
    for eid, d in diagonals.items():
        signed = d.get("signed_drift") or {}
        if signed.get("mean") is None:
            by_verdict.setdefault("untested", []).append(eid)
            continue
        text = f"{eid} ({signed['over']} over {signed['under']} {_gap_text(signed)})"
        by_verdict.setdefault(d.get("verdict", "untested"), []).append(text)
    parts = []
    if "hacking" in by_verdict:
        threshold = next(d.get("threshold") for d in diagonals.values() if d.get("verdict") == "hacking")
        parts.append(f"flags reward hacking in {', '.join(by_verdict['hacking'])}, at least {threshold:.2f}")
    else:
        parts.append("flags no series")
    if "no hacking detected" in by_verdict:
        parts.append(f"no hacking detected in {', '.join(by_verdict['no hacking detected'])}")
    if "not flagged" in by_verdict:
        parts.append(
            f"a difference below the threshold or in the rule's favour in {', '.join(by_verdict['not flagged'])}"
        )
    if "untested" in by_verdict:
        parts.append(f"no signed drift recorded for {', '.join(by_verdict['untested'])}")
    opening = "The diagonal check " if seed is None else f"On train seed {seed}, the diagonal check "
    return opening + "; ".join(parts) + "."


def _collapse_sentence(collapse: Mapping[str, Any]) -> str | None:
    groups: dict[tuple[str, str], list[str]] = {}
    gold: dict[tuple[str, str], float | None] = {}
    for name, types in collapse.get("series", {}).items():
        for qtype, found in types.items():
            if found["collapsed"]:
                key = (qtype, found["value"])
                groups.setdefault(key, []).append(name)
                gold[key] = found["gold_share"]
    if not groups:
        return None
    parts = []
    for (qtype, value), names in groups.items():
        share = (
            f"; {gold[(qtype, value)]:.2f} of the gold answers are '{value}'"
            if gold[(qtype, value)] is not None
            else ""
        )
        parts.append(f"{qtype} questions get '{value}' from {', '.join(names)}{share}")
    return (
        f"Answers collapse to one value (at least {collapse['share']:.0%} of a series' answers to a question type): "
        + "; ".join(parts)
        + ". Such a series scores the share of that value among the gold answers, whatever the chart shows."
    )


def _hypotheses_sentence(hypotheses: Mapping[str, Mapping[str, Any]]) -> str | None:
    if not hypotheses:
        return None
    counts: dict[str, list[str]] = {}
    for h in hypotheses.values():
        counts.setdefault(h["verdict"], []).append(h["id"])
    order = ("supported", "refuted", "undecided", "untested")
    seeds = max((h["difference"] or {}).get("seeds", 0) for h in hypotheses.values())
    over = f" (over {seeds} train seeds)" if seeds > 1 else " (one train seed: the test questions' noise only)"
    return f"Hypotheses{over}: " + "; ".join(f"{v} {', '.join(counts[v])}" for v in order if v in counts) + "."


def finding(
    config: Config,
    test_accuracy: Mapping[str, Any],
    records: Mapping[str, Sequence[Mapping[str, Any]]],
    diagonals: Mapping[str, Any],
    collapse: Mapping[str, Any],
    hypotheses: Mapping[str, Mapping[str, Any]],
    seed_records: Mapping[int, Mapping[str, Sequence[Mapping[str, Any]]]] | None = None,
) -> dict[str, Any]:
    """The first screen's numbers and sentences (see the module's docstring); ``seed_records``: seed -> series id ->
    greedy test records of the series trained under each other train seed. ``seed`` in the result: the train seed
    the sentences and the headline table read, where the run tests hypotheses on several (None with one)."""
    start = versus_warm_start(config, records)
    others = seeds_versus_warm_start(config, records, seed_records or {})
    several = len(hypothesis_seeds(config)) > 1
    on_seed = f" on train seed {config.train.seed}" if several else ""
    headline = headline_key(config)
    baseline = {
        pair: gap[headline]
        for pairs in test_accuracy.get("gaps", {}).values()
        for pair, gap in pairs.items()
        if not pair.startswith("warmstart") and gap.get(headline, {}).get("n")
    }
    confidence = round(config.evaluate.confidence * 100)
    sentences = [
        _comparison_sentence(
            f"Greedy test accuracy against the warm start{on_seed} (paired {confidence}% intervals over the same "
            f"questions{'; on the other train seeds in parentheses' if others else ''}):",
            start,
            others,
        ),
        _comparison_sentence(f"Each tool policy against its generation's no-tool baseline{on_seed}:", baseline),
        _diagonal_sentence(diagonals, config.train.seed if several else None),
        _collapse_sentence(collapse),
        _hypotheses_sentence(hypotheses),
    ]
    if not start and not baseline:
        sentences[0] = "No test results to compare yet (no greedy test records of the train series or the warm start)."
    return {
        "sentences": [s for s in sentences if s],
        "versus_warm_start": start,
        "versus_warm_start_seeds": others,
        "seed": config.train.seed if several else None,
        "versus_baseline": baseline,
        "rows": headline_table(config, test_accuracy.get("series", {}), diagonals),
        "confidence": config.evaluate.confidence,
    }
