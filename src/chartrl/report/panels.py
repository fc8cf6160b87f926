"""The report's panels, each filled or saying in place why not, on either backend.

A *panel* is one thing the report shows: each subplot of a generation's training-curves figure
(``chartrl.report.figures.PANELS``), each generation's reward-parts figure, and each table (the headline, the
hypotheses, collapsed answers, matched steps, the warm start, test accuracy per question type and its
shuffled-image and sampled columns, the tool-minus-baseline gaps, the seed spread, the scored evaluation series,
the diagonal check, the rollouts). :func:`report_panels`
lists them, for ``metrics.json``, as::

    {"id": "training/v1/rollout/tool_call_ratio", "title": ..., "filled": bool,
     "data": [[path into metrics.json], ...],   # where its numbers are; filled == any of them holds some
     "reason": None | why it is empty,         # shown in the panel's spot (a reason block)
     "note": None | where the numbers come from when it differs from the local backend}

A reason is computed from what the run has (the backend, the config, the files found), never left out:
:func:`panel_problems` checks a built report for panels that are empty without one, so any config's run can be
checked (the workflow tests point it at the smoke run of each backend).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chartrl.config import Config
from chartrl.report import testcurves
from chartrl.report.comparisons import comparison_panels
from chartrl.report.deepeyes import deepeyes_panels
from chartrl.report.figures import PANELS
from chartrl.report.helpers import has_data, make_panel, no_generations_reason, run_files
from chartrl.report.order import generations_in_order
from chartrl.report.recipes import recipe_panels
from chartrl.report.rerank import rerank_panels
from chartrl.report.shortcut import shortcut_panels
from chartrl.report.tools import tool_panels

# A curve panel reads the first of its keys a series logged: the local trainer logs training-rollout statistics,
# verl 0.9.1 logs none of our reward's extra info per training step (chartrl.verl_backend.metrics), so on verl the
# same panel shows the validation statistic, and says so (VERL_NOTES).
CURVE_KEYS: dict[str, tuple[str, ...]] = {
    "rollout/tool_call_ratio": ("rollout/tool_call_ratio", "val/tool_call_ratio"),
    "rollout/correct_label_ratio": ("rollout/correct_label_ratio", "val/correct_label_ratio"),
    "rollout/tool_success": ("rollout/tool_success", "val/tool_success"),
}
VERL_NOTES = {
    "val/tool_call_ratio": "verl logs no tool statistics of training rollouts: validation (greedy) episodes shown",
    "val/correct_label_ratio": "verl logs no tool statistics of training rollouts: validation (greedy) episodes shown",
    "val/tool_success": "verl logs no tool statistics of training rollouts: validation (greedy) episodes shown",
    "rollout/response_length": "verl's response_length/mean: it counts the tool observation's tokens too",
    "val_reward/": "verl logs the reward's parts only at validation: validation (greedy) episodes shown",
}
VERL_REASONS = {
    "val_shuffled_images/accuracy": "shuffled-image control: not run on the verl backend (verl validates the val "
    "split as given; the control needs a second validation set with every chart swapped)",
    "val/accuracy_value": "validation accuracy per question type: not logged on the verl backend (verl averages "
    "validation metrics per data source, not per question type)",
    "test_shuffled_images": "shuffled-image control on test: not run on the verl backend (it needs a second verl "
    "generation of the test split, with every chart swapped)",
    "test_sampled": "sampled test rerun: not run on the verl backend (it needs a second verl generation of the "
    "test split, sampled at the rollout temperature)",
    "seed_spread": "spread over train seeds: not run on the verl backend (extra_seeds are trained and tested on the "
    "local backend only)",
}


def curve_panels(metrics: Mapping[str, Any], config: Config, generation: str) -> list[dict[str, Any]]:
    """The panels of one generation's training figures: each subplot (the key each series plots in ``keys``)
    and the reward-parts figure."""

    verl = config.backend == "verl"
    members = [s.id for s in config.train_series if s.generation == generation]
    training = metrics["training"]
    out = []
    for key, label in PANELS:
        candidates = CURVE_KEYS.get(key, (key,))
        keys = {
            sid: next((k for k in candidates if training.get(sid, {}).get("curves", {}).get(k)), candidates[0])
            for sid in members
        }
        data = [["training", sid, "curves", k] for sid, k in keys.items()]
        used = sorted({k for sid, k in keys.items() if has_data(metrics, [["training", sid, "curves", k]])})
        notes = [VERL_NOTES[k] for k in used if verl and k in VERL_NOTES]
        reason = (VERL_REASONS.get(key) if verl else None) or (
            f"{label}: no series of generation {generation} logged {' or '.join(candidates)} "
            f"({run_files(members) if members else 'no train series'})"
        )
        panel = make_panel(metrics, f"training/{generation}/{key}", label, data, reason, "; ".join(notes) or None)
        panel["keys"] = keys
        out.append(panel)
    parts = [
        ["training", sid, "curves", k]
        for sid in members
        for k in training.get(sid, {}).get("curves", {})
        if k.startswith(("reward/", "val_reward/")) and k not in ("reward/overall", "val_reward/overall")
    ]
    validation_parts = any(p[3].startswith("val_reward/") for p in parts)
    out.append(
        make_panel(
            metrics,
            f"training/{generation}/reward_parts",
            f"{generation}: reward parts",
            parts,
            f"reward parts: no series of generation {generation} logged reward/<part> or val_reward/<part> "
            f"({run_files(members) if members else 'no train series'})",
            VERL_NOTES["val_reward/"] if verl and validation_parts else None,
        )
    )
    return out


def first_screen_panels(metrics: Mapping[str, Any], config: Config) -> list[dict[str, Any]]:
    """The headline table, the hypotheses and the answer-collapse check."""
    collapse = metrics["answer_collapse"]
    without = collapse["without_answers"]
    rows, hypotheses = metrics["finding"]["rows"], metrics["hypotheses"]
    untested = "; ".join(dict.fromkeys(h["reason"] for h in hypotheses.values() if h["reason"]))
    return [
        make_panel(
            metrics,
            "headline",
            "Headline",
            [["finding", "rows", name, key] for name in rows for key in ("test_accuracy", "drift")],
            "headline: no policy has test results or a diagonal check yet; each row says what is missing",
        ),
        make_panel(
            metrics,
            "hypotheses",
            "Hypotheses",
            [["hypotheses", hid, "difference"] for hid in hypotheses],
            f"hypotheses: none could be tested on this run ({untested})"
            if hypotheses
            else "hypotheses: this config states none (the hypotheses: list; config/gpu.yaml states the study's)",
        ),
        make_panel(
            metrics,
            "answer_collapse",
            "Answers that collapse to one value",
            [["answer_collapse", "series"]],
            (
                f"answer collapse: the test results of {', '.join(without)} keep no answers (rerun their test "
                "accuracy jobs)"
                if without
                else "answer collapse: "
                + no_generations_reason(config, [s.id for s in config.train_series] or ["the warm start"])
            ),
        ),
    ]


def table_panels(metrics: Mapping[str, Any], config: Config) -> list[dict[str, Any]]:
    verl = config.backend == "verl"
    ta = metrics["test_accuracy"]
    series = ta["series"]
    out = [
        make_panel(
            metrics,
            "matched_steps",
            "Matched steps",
            [["matched_steps"]],
            "matched steps: no generation has a validation step that all of its series reached",
        )
    ]
    reason = (
        f"warm start: none in this run (the policy starts from model.path {config.model.path})"
        if config.model.path is not None
        else "warm start: results/models/warmstart_check.json is missing"
    )
    out.append(make_panel(metrics, "warmstart", "Starting point: after the warm start", [["warmstart"]], reason))
    effect = [["rl_effect", "series", s.id, "per_seed"] for s in config.train_series]
    out.append(
        make_panel(
            metrics,
            "rl_effect",
            "Did RL improve on its start?",
            effect,
            "did RL improve on its start: no results/runs/{series}/metrics.jsonl with training steps and validation",
        )
    )
    train_ids = [s.id for s in config.train_series]
    missing = [sid for sid in train_ids if sid not in series]
    note = None
    if verl and series:
        checkpoints = {s.id: s.checkpoint for s in config.eval_series}
        used = sorted(f"{owner} (checkpoint {checkpoints.get(owner)})" for owner in ta.get("sources", {}).values())
        note = (
            f"verl backend: computed from the eval series' test generations ({', '.join(used)}), the first sample "
            "of each question" + ("" if config.evaluate.greedy else " (evaluate.greedy is off: a sampled answer)")
        )
        if missing:
            note += "; " + no_generations_reason(config, missing)
        if config.model.path is None:
            note += "; the warm-started start is not tested on the verl backend (the local rollout tests it)"
    out.append(
        make_panel(
            metrics,
            "test_accuracy",
            "Accuracy per question type",
            [["test_accuracy", "series"]],
            no_generations_reason(config, missing or train_ids),
            note,
        )
    )
    for condition, title in (("test_shuffled_images", "shuffled-image control"), ("test_sampled", "sampled")):
        reason = (VERL_REASONS[condition] if verl else None) or (
            f"{title}: not in any results/eval/{{series}}/test_accuracy.json"
        )
        data = [["test_accuracy", "series", name, condition] for name in series]
        out.append(make_panel(metrics, f"test_accuracy/{condition}", f"Test accuracy: {title}", data, reason))
    pairs = [
        f"{a.id} - {b.id}"
        for generation in generations_in_order(config)
        for a in config.train_series
        if a.generation == generation and a.tools
        for b in config.train_series
        if b.generation == generation and not b.tools
    ]
    lacking = sorted({sid for pair in pairs for sid in pair.split(" - ") if sid not in series})
    gap_reason = (
        f"tool policy minus no-tool baseline: {no_generations_reason(config, lacking)}"
        if lacking
        else "tool policy minus no-tool baseline: no generation has both a tool policy and a no-tool baseline"
    )
    out.append(
        make_panel(metrics, "gaps", "Tool policy minus no-tool baseline", [["test_accuracy", "gaps"]], gap_reason)
    )
    if config.extra_seeds:
        seed_reason = (VERL_REASONS["seed_spread"] if verl else None) or (
            "spread over train seeds: no results/seeds/{series}/seed{seed}/test_accuracy.json"
        )
    else:
        seed_reason = (
            f"spread over train seeds: one seed (train seed {config.train.seed}); set extra_seeds "
            "(--configfile config/seeds.yaml) to train more"
        )
    spread = metrics["seed_spread"]
    # a spread needs more than one seed's results of some series
    data = [["seed_spread", "series", sid, "per_seed", str(k)] for sid in spread["series"] for k in config.extra_seeds]
    out.append(make_panel(metrics, "seed_spread", "Spread over train seeds", data, seed_reason))
    scored = [["test", sid, "scores"] for sid in metrics["test"]]
    out.append(
        make_panel(
            metrics,
            "scored",
            "Scored evaluation series",
            scored,
            "scored evaluation series: no results/eval/{series}/scores_{scorer}.json"
            if config.eval_series
            else "scored evaluation series: the config has no eval series",
        )
    )
    out.append(
        make_panel(
            metrics,
            "diagonal",
            "Diagonal check",
            [["diagonal"]],
            "diagonal check: no checkpoint is scored by two scorers in this config"
            if not any(s.scorers for s in config.eval_series)
            else "diagonal check: no results/eval/{series}/diagonal.json",
        )
    )
    out.append(
        make_panel(
            metrics,
            "rollouts",
            "Rollouts",
            [["rollouts"]],
            "rollouts: no results/eval/{series}/generations.parquet",
        )
    )
    return out


def report_panels(metrics: Mapping[str, Any], config: Config) -> list[dict[str, Any]]:
    generations = generations_in_order(config)
    curves = [p for g in generations for p in curve_panels(metrics, config, g)]
    tables = (
        first_screen_panels(metrics, config)
        + table_panels(metrics, config)
        + tool_panels(metrics, config)
        + testcurves.panels(metrics, config)
        + comparison_panels(metrics, config)
    )
    recipes = recipe_panels(metrics, config)  # a recipe overlay's figures (none for the study)
    return (
        curves
        + tables
        + rerank_panels(metrics, config)
        + shortcut_panels(metrics, config)
        + recipes
        + deepeyes_panels(metrics, config)
    )


def panel_problems(report_dir: str | Path) -> list[str]:
    """What a built report (``index.html`` and ``metrics.json`` in ``report_dir``) gets wrong about its panels:
    a panel empty without a reason, a panel said to be filled whose numbers are not in metrics.json, a reason not
    shown in its panel's spot in the page. Empty when every panel has data or says why not."""
    from markupsafe import escape  # as the report's template escapes what it shows

    folder = Path(report_dir)
    metrics = json.loads((folder / "metrics.json").read_text())
    page = (folder / "index.html").read_text()
    panels = metrics.get("panels")
    if not panels:
        return ["metrics.json lists no panels"]
    problems = []
    for panel in panels:
        pid, data = panel["id"], panel.get("data") or []
        holds = has_data(metrics, data)
        if panel["filled"] and not holds:
            problems.append(f"{pid}: said to be filled, but metrics.json holds none of its numbers {data}")
        if not holds and not panel.get("reason"):
            problems.append(f"{pid}: empty, and no reason given")
        if not holds and panel.get("reason"):
            block = f'data-panel="{escape(pid)}"'
            if block not in page or str(escape(panel["reason"])) not in page:
                problems.append(f"{pid}: its reason is not shown in the page ({panel['reason']!r})")
    return problems
