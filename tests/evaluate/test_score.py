"""Scoring generations: through the CLI, the OpenAI-compatible judge on a loopback server, and a rerun with the
judge's cache makes no request at all; the rule scorer's items and aggregate carry the published ChartQA rule beside
chartrl's, and the other scorers say why they do not."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from chartrl.answers import extract_answer
from chartrl.config import JudgeConfig
from chartrl.evaluate.published_metric import published_relaxed_accuracy
from chartrl.evaluate.score import score_generations
from chartrl.rollout.generations import SCHEMA

from judge_server import FakeJudgeServer

CASES = [
    # (truth, final response): right and wrong answers the judge must read
    ("42", "<answer>42</answer>"),
    ("45", "<answer>45%</answer>"),
    ("Italy", "<answer>Spain</answer>"),
    ("12", "<answer>twelve</answer>"),
    ("7", "no answer tag"),
]


PUBLISHED_CASES = [
    # (truth, final response, subset, chartrl's rule, the published rule): where the two rules part, and where not
    ("42", "<answer>42</answer>", "human", 1.0, 1.0),
    ("509473", "<answer>509,473</answer>", "human", 1.0, 0.0),  # float() refuses the thousands separator
    ("2", "<answer>2.1</answer>", "human", 1.0, 0.0),  # exactly 5% off: float rounding puts it just above
    ("[2011, 2012]", "<answer>[2012, 2011]</answer>", "augmented", 1.0, 0.0),  # a list gold is read as text
    ("0.5", "<answer>50%%</answer>", "augmented", 0.0, 1.0),  # a form only float() reads
    ("Italy", "<answer>Spain</answer>", "augmented", 0.0, 0.0),
    ("7", "no answer tag", "augmented", 0.0, 0.0),
]


def _generations(path, cases=None):
    rows = []
    for k, (truth, response, *rest) in enumerate(cases or CASES):
        rows.append(
            {
                "id": f"q{k}",
                "sample": 0,
                "split": "test",
                "question": f"Question {k}?",
                "ground_truth": truth,
                "data_source": "synthchart",
                "subset": rest[0] if rest else "synthetic",
                "chart_type": "v_bar",
                "turns": "[]",
                "tool_calls": "[]",
                "tool_called": False,
                "tool_outcome": "none",
                "tool_error_kinds": "[]",
                "final_response": response,
                "answer": None,
                "prompt_tokens": 10,
                "response_tokens": 5,
                "total_tokens": 15,
                "tool_turn_tokens": 0,
                "vision_tokens_sampled": 0,
                "truncated": False,
                "edited_images": "[]",
                "model": "m",
            }
        )
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), path)
    return path


def _score(tmp_path, server, out, check: bool = True, **judge_settings):
    spec = {
        "series": {
            "id": "e5",
            "generation": "v1",
            "kind": "eval",
            "of": "e2",
            "checkpoint": "last",
            "scorers": ["judge"],
        },
        "judge": {
            "backend": "openai",
            "base_url": server.base_url,
            "model": "judge-model",
            "api_key_env": "CHARTRL_TEST_KEY",
            "cache_path": str(tmp_path / "cache.sqlite"),
            "backoff_initial_s": 0.01,
            "backoff_max_s": 0.05,
            **judge_settings,
        },
        "evaluate": {"dataset": "synthchart", "year_rule": "strict"},
    }
    env = dict(os.environ, CHARTRL_TEST_KEY="sk-test-secret-value-123")
    command = [
        sys.executable,
        "-m",
        "chartrl",
        "score",
        "--spec",
        json.dumps(spec),
        "--scorer",
        "judge",
        "--generations",
        str(tmp_path / "generations.parquet"),
        "--out",
        str(out),
        "--tracking-uri",
        f"sqlite:///{tmp_path}/mlflow.db",
        "--experiment",
        "score-test",
    ]
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    assert "sk-test-secret-value-123" not in result.stderr
    if not check:
        return result
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.slow
def test_a_rerun_with_the_judge_cached_makes_no_request(tmp_path):
    _generations(tmp_path / "generations.parquet")
    with FakeJudgeServer() as server:
        first = _score(tmp_path, server, tmp_path / "first.json")
        asked = server.requests
        second = _score(tmp_path, server, tmp_path / "second.json")
        assert asked == 4  # the response without an answer tag is never sent
        assert server.requests == asked  # the rerun asked nothing
    verdicts = [item["verdict"] for item in first["items"]]
    assert verdicts == ["correct", "correct", "incorrect", "correct", "incorrect"]
    assert [item["verdict"] for item in second["items"]] == verdicts
    assert first["aggregate"]["judge"]["model"] == "judge-model"
    assert first["aggregate"]["year_rule"] == "strict"  # evaluate.year_rule, recorded in the scores file


@pytest.mark.slow
def test_unreadable_replies_beyond_the_bound_fail_the_score_naming_the_endpoint(tmp_path):
    # every reply lacks a verdict: four items sent, all four judge failures, one never sent (no answer tag)
    _generations(tmp_path / "generations.parquet")
    with FakeJudgeServer(plan=lambda question, attempt: "garbage") as server:
        result = _score(tmp_path, server, tmp_path / "refused.json", check=False, max_retries=0)
        assert result.returncode != 0 and not (tmp_path / "refused.json").exists()
        assert server.base_url in result.stderr and "judge-model" in result.stderr
        assert "4 of 4 items sent to the judge" in result.stderr
        assert "judge.max_judge_failure_fraction 5.0%" in result.stderr
        accepted = _score(tmp_path, server, tmp_path / "accepted.json", max_retries=0, max_judge_failure_fraction=1.0)
    aggregate = accepted["aggregate"]
    assert (aggregate["sent_to_judge"], aggregate["not_sent"], aggregate["judge_failures"]) == (4, 1, 4)
    assert aggregate["judge_failure_fraction"] == 1.0
    assert [item["sent_to_judge"] for item in accepted["items"]] == [True, True, True, True, False]


def test_the_rule_scorer_gives_each_item_its_published_score_and_the_aggregate_their_mean(tmp_path):
    generations = _generations(tmp_path / "generations.parquet", PUBLISHED_CASES)
    result, judge = score_generations(generations, "rule", JudgeConfig.from_dict({}), "standard")
    assert judge is None
    items, aggregate = result["items"], result["aggregate"]
    for item, (truth, response, _, chartrl, published) in zip(items, PUBLISHED_CASES, strict=True):
        assert item["answer"] == extract_answer(response)
        assert item["published_score"] == published_relaxed_accuracy(item["answer"], truth) == published, response
        assert item["accuracy"] == chartrl, response
    assert aggregate["accuracy"] == pytest.approx(4 / 7) and aggregate["published_accuracy"] == pytest.approx(2 / 7)
    assert aggregate["by_subset"]["human"] == {"accuracy": 1.0, "published_accuracy": pytest.approx(1 / 3), "n": 3}
    assert aggregate["by_subset"]["augmented"]["published_accuracy"] == pytest.approx(1 / 4)
    assert "why_no_published" not in aggregate


def test_a_judge_scorer_says_why_it_has_no_published_figure(tmp_path):
    generations = _generations(tmp_path / "generations.parquet", PUBLISHED_CASES)
    judge_config = JudgeConfig.from_dict({"cache_path": str(tmp_path / "cache.sqlite")})
    result, _ = score_generations(generations, "judge", judge_config, "standard")
    aggregate = result["aggregate"]
    assert aggregate["published_accuracy"] is None and "rule scorer" in aggregate["why_no_published"]
    assert not any("published_score" in item for item in result["items"])
