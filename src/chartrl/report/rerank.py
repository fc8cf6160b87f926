"""The report's best-of-N section: each reranking eval series' methods (greedy, self-consistency, confidence, the
external scorer, the oracle) under each of its scorers, with bootstrap intervals, the paired gap to greedy and the
costs (chartrl.evaluate.rerank; files ``results/eval/{series}/rerank_{scorer}.json``).

:func:`collect_rerank` builds ``metrics["rerank"]``; :func:`rerank_panels` the panel, filled or saying why not.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chartrl.config import Config
from chartrl.report.helpers import make_panel

VERL_REASON = (
    "best-of-N reranking: not run on the verl backend (N sampled responses per question would be a second verl "
    "generation of the test split, rollout val_kwargs.n with do_sample, which the verl generate job does not run; "
    "the local backend runs it)"
)
SCORER_ABSENT = (
    "the external scorer (by: [scorer], a process reward model behind an OpenAI-compatible endpoint) is not in "
    "this config's rerank methods: it needs an endpoint (rerank.scorer.base_url), which {series} does not name"
)


def _methods(config: Config, sid: str) -> tuple[str, ...]:
    rerank = config.series[sid].rerank
    return rerank.by if rerank is not None else ()


def collect_rerank(results: Path, config: Config) -> dict[str, Any]:
    """``{"series": {sid: {"settings": ..., "scores": {scorer: result}}}, "notes": [...]}``; a series' ``scores``
    holds the scorers whose file exists, each method without its per-question choices."""
    out: dict[str, Any] = {"series": {}, "notes": []}
    for series in config.eval_series:
        if series.rerank is None:
            continue
        scores = {}
        for scorer in series.scorers:
            path = Path(results) / "eval" / series.id / f"rerank_{scorer}.json"
            if not path.is_file():
                continue
            data = json.loads(path.read_text())
            data["methods"] = {
                m: {k: v for k, v in values.items() if k != "chosen"} for m, values in data["methods"].items()
            }
            scores[scorer] = data
        out["series"][series.id] = {
            "settings": {
                "n": series.rerank.n,
                "by": list(series.rerank.by),
                "questions": series.rerank.questions,
                "seed": series.rerank.seed,
            },
            "scores": scores,
        }
        if "scorer" not in series.rerank.by:
            out["notes"].append(SCORER_ABSENT.format(series=series.id))
    return out


def _reason(config: Config) -> str:
    if config.backend == "verl":
        return VERL_REASON
    if not any(s.rerank is not None for s in config.eval_series):
        return "best-of-N reranking: no eval series sets rerank (series.<id>.rerank: {n: N, by: [...]})"
    wanted = [s.id for s in config.eval_series if s.rerank is not None]
    return f"best-of-N reranking: no results/eval/{{series}}/rerank_{{scorer}}.json for {', '.join(wanted)}"


def rerank_panels(metrics: Mapping[str, Any], config: Config) -> list[dict[str, Any]]:
    section = metrics.get("rerank") or {}
    data = [["rerank", "series", sid, "scores"] for sid in section.get("series", {})]
    notes = list(section.get("notes", []))
    if config.backend == "verl" and any(s.rerank is not None for s in config.eval_series):
        notes.append(VERL_REASON)
    return [
        make_panel(
            metrics,
            "rerank",
            "Best-of-N reranking at test time",
            data,
            _reason(config),
            "; ".join(notes) or None,
        )
    ]
