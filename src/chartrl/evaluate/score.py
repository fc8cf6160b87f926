"""Scoring generations with one scorer (rule, judge or panel): chartrl.rewards' own functions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from chartrl.config import JudgeConfig
from chartrl.rewards import RewardInput, get_scorer

SCORER_JUDGES = {"rule": "rule", "judge": "judge", "panel": "panel"}


def reward_inputs(generations: Path) -> list[RewardInput]:
    """One RewardInput per generation row, with the episode's tool statistics and length."""
    inputs = []
    for row in pq.read_table(generations).to_pylist():
        inputs.append(
            RewardInput(
                response=row["final_response"],
                ground_truth=row["ground_truth"],
                question=row["question"],
                data_source=row["data_source"],
                subset=row["subset"],
                tool_outcome=row["tool_outcome"],
                tool_calls=len(json.loads(row["tool_calls"])),
                response_tokens=row["response_tokens"],
                id=f"{row['id']}#{row['sample']}",
            )
        )
    return inputs


def score_generations(generations: Path, scorer: str, judge_config: JudgeConfig) -> tuple[dict[str, Any], Any]:
    """The scorer's output (aggregate + per-item verdicts) and the judge it used (None for rule)."""
    from chartrl.judge import judge_for_accuracy

    judge = judge_for_accuracy(SCORER_JUDGES[scorer], judge_config)
    result = get_scorer(scorer)(reward_inputs(generations), judge)
    result["aggregate"]["generations"] = str(generations)
    return result, judge
