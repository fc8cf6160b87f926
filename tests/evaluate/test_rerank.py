"""Best-of-N reranking: the selection methods on hand-made samples (majorities, ties, missing answers, all wrong),
each method's accuracy, interval, paired gap to greedy and costs under the rule scorer, and a real run of the tiny
model producing the samples."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from chartrl.evaluate.rerank import (
    SAMPLE_SCHEMA,
    normalise_answer,
    rerank_scores,
    rerank_subset,
    select_confidence,
    select_scorer,
    select_scs,
)


def s(answer, logprob=-1.0, score=None):
    return {"answer": answer, "mean_logprob": logprob, "scorer_score": score}


@pytest.mark.parametrize(
    "a,b",
    [("1,200", "1200"), ("45.0", "45"), ("Yes.", "yes"), ("  Red  bar ", "red bar"), ("45%", "45.0 %")],
)
def test_answers_vote_under_one_normal_form(a, b):
    assert normalise_answer(a) == normalise_answer(b)


def test_normal_form_keeps_different_answers_apart():
    assert normalise_answer("45%") != normalise_answer("45")
    assert normalise_answer("B") != normalise_answer("C")
    assert normalise_answer(None) is None and normalise_answer("  ") is None


def test_scs_takes_the_majority_answer_and_its_most_confident_sample():
    samples = [s("30", -0.1), s("20", -2.0), s("20", -1.0), s("20.0", -3.0)]
    assert select_scs(samples) == 2  # "20" has three votes; its most confident sample is index 2


def test_scs_tie_goes_to_the_more_confident_answer_then_the_lower_index():
    assert select_scs([s("A", -2.0), s("B", -0.5), s("A", -1.5), s("B", -3.0)]) == 1
    assert select_scs([s("A", -1.0), s("B", -1.0)]) == 0


def test_scs_ignores_samples_without_an_answer():
    # two samples have no answer: they never form a majority
    assert select_scs([s(None, -0.1), s(None, -0.2), s("7", -4.0)]) == 2
    # no answer anywhere: the most confident sample
    assert select_scs([s(None, -3.0), s(None, -0.2), s(None, -1.0)]) == 1


def test_confidence_ranks_by_mean_logprob_with_empty_samples_last():
    assert select_confidence([s("1", -2.0), s("2", -0.3), s("3", -0.3)]) == 1
    assert select_confidence([s("1", None), s("2", -9.0)]) == 1


def test_scorer_ranks_failures_below_every_score():
    assert select_scorer([s("1", score=None), s("2", score=0.1), s("3", score=0.7), s("4", score=0.7)]) == 2
    assert select_scorer([s("1", score=None), s("2", score=None)]) == 0


def test_subset_is_fixed_and_does_not_follow_the_split_order():
    class Row:
        def __init__(self, i):
            self.id = f"q{i}"

    rows = [Row(i) for i in range(50)]
    first = [r.id for r in rerank_subset(rows, 10)]
    again = [r.id for r in rerank_subset(list(reversed(rows)), 10)]
    assert len(first) == 10 and sorted(first) == sorted(again)
    assert first != [f"q{i}" for i in range(10)]
    assert len(rerank_subset(rows, None)) == 50 and len(rerank_subset(rows, 99)) == 50


# (truth, greedy answer, [(sample answer, mean log-prob), ...]) per question
QUESTIONS = [
    ("20", "30", [("20", -1.0), ("20", -2.0), ("30", -0.1)]),  # majority right, most confident wrong; greedy wrong
    ("B", "B", [("A", -0.5), ("C", -0.6), ("A", -0.7)]),  # every sample wrong; greedy right
    ("4", "4", [("4", -0.2), (None, -0.1), ("4", -0.4)]),  # a sample without an answer
    ("9", "1", [("1", -0.3), ("9", -0.9), ("2", -0.8)]),  # only the oracle finds it
]


def _write_samples(path, questions=QUESTIONS):
    records = []
    for q, (truth, _, samples) in enumerate(questions):
        for k, (answer, logprob) in enumerate(samples):
            response = f"<answer>{answer}</answer>" if answer is not None else "I cannot tell."
            records.append(
                {
                    "id": f"q{q}",
                    "sample": k,
                    "question": f"Question {q}?",
                    "ground_truth": truth,
                    "data_source": "synthchart",
                    "subset": "synthetic",
                    "chart_type": "v_bar",
                    "turns": json.dumps([{"role": "assistant", "text": response, "tokens": 5, "stop": "eos"}]),
                    "tool_calls": 0,
                    "tool_outcome": "none",
                    "final_response": response,
                    "answer": answer,
                    "mean_logprob": logprob,
                    "prompt_tokens": 40,
                    "response_tokens": 5 + k,
                    "total_tokens": 45 + k,
                    "truncated": False,
                }
            )
    pq.write_table(pa.Table.from_pylist(records, schema=SAMPLE_SCHEMA), path)


def _greedy_scores():
    from chartrl.answers import relaxed_accuracy

    items = [
        {"id": f"q{q}#0", "accuracy": relaxed_accuracy(greedy, truth)} for q, (truth, greedy, _) in enumerate(QUESTIONS)
    ]
    return {"aggregate": {}, "items": items + [{"id": "elsewhere#0", "accuracy": 1.0}]}


def test_each_method_scored_with_interval_gap_and_costs(tmp_path):
    path = tmp_path / "rerank.parquet"
    _write_samples(path)
    result = rerank_scores(
        path,
        _greedy_scores(),
        {"q0": 6, "q1": 6, "q2": 6, "q3": 6, "elsewhere": 99},
        scorer_name="rule",
        judge=None,
        methods=("scs", "confidence", "oracle"),
        bootstrap_samples=200,
        confidence=0.9,
        seed=0,
    )
    methods = result["methods"]
    assert result["n"] == 3 and result["questions"] == 4
    # greedy on the reranked questions only: right on q1 and q2
    assert methods["greedy"]["accuracy"] == 0.5 and methods["greedy"]["n"] == 4
    assert methods["greedy"]["costs"] == {"samples": 4, "sampled_tokens": 24}
    # scs: q0 right (majority), q1 wrong (all wrong), q2 right, q3 wrong ("1", "9", "2": the tie goes to "1")
    assert methods["scs"]["accuracy"] == 0.5 and methods["scs"]["chosen"] == {"q0": 0, "q1": 0, "q2": 0, "q3": 0}
    # confidence: q0 picks "30" (wrong), q2 picks the sample without an answer (wrong)
    assert methods["confidence"]["accuracy"] == 0.0
    assert methods["confidence"]["chosen"] == {"q0": 2, "q1": 0, "q2": 1, "q3": 0}
    # oracle: any sample right: q0, q2, q3
    assert methods["oracle"]["accuracy"] == 0.75
    # one sample on average: (2/3 + 0 + 2/3 + 1/3) / 4
    assert methods["mean_sample"]["accuracy"] == pytest.approx((2 / 3 + 0 + 2 / 3 + 1 / 3) / 4)
    for name in ("scs", "confidence", "oracle", "mean_sample"):
        values = methods[name]
        assert values["low"] <= values["accuracy"] <= values["high"]
        gap = values["gap_vs_greedy"]
        assert gap["n"] == 4 and gap["mean"] == pytest.approx(values["accuracy"] - 0.5)
        assert gap["low"] <= gap["mean"] <= gap["high"]
    assert methods["scs"]["costs"] == {"samples": 12, "sampled_tokens": 4 * (5 + 6 + 7), "judge_items": 4}
    assert methods["oracle"]["costs"]["judge_items"] == 12
    assert result["answer_rate"] == pytest.approx(11 / 12)


def test_every_method_has_its_answers_accuracy_under_the_published_rule_beside_chartrls(tmp_path):
    """2.1 for 2 is exactly 5% off: chartrl's rule accepts it, the published rule's float rounding does not."""
    from chartrl.answers import relaxed_accuracy
    from chartrl.evaluate.published_metric import published_relaxed_accuracy

    questions = [("2", "2.1", [("2.1", -0.1), ("2.1", -0.2), ("2", -0.3)]), ("7", "7", [("7", -0.1), ("8", -0.2)])]
    path = tmp_path / "rerank.parquet"
    _write_samples(path, questions)
    greedy = {
        "aggregate": {},
        "items": [
            {
                "id": f"q{q}#0",
                "accuracy": relaxed_accuracy(answer, truth),
                "published_score": published_relaxed_accuracy(answer, truth),
            }
            for q, (truth, answer, _) in enumerate(questions)
        ],
    }
    common = {"judge": None, "bootstrap_samples": 100, "confidence": 0.9, "seed": 0}
    result = rerank_scores(path, greedy, {}, scorer_name="rule", methods=("scs", "confidence", "oracle"), **common)
    methods = result["methods"]
    assert methods["greedy"]["accuracy"] == 1.0 and methods["greedy"]["published_accuracy"] == 0.5
    assert methods["scs"]["accuracy"] == 1.0 and methods["scs"]["published_accuracy"] == 0.5  # "2.1" wins the vote
    assert methods["oracle"]["published_accuracy"] == 1.0  # q0's third sample says "2"
    assert methods["mean_sample"]["published_accuracy"] == pytest.approx((1 / 3 + 1 / 2) / 2)
    # a scores file written without published scores: greedy's figure says so instead of a number
    for item in greedy["items"]:
        del item["published_score"]
    old = rerank_scores(path, greedy, {}, scorer_name="rule", methods=("scs",), **common)["methods"]["greedy"]
    assert old["published_accuracy"] is None and "rerun its score job" in old["why_no_published"]


def test_all_wrong_samples_leave_every_method_at_zero(tmp_path):
    path = tmp_path / "rerank.parquet"
    _write_samples(path)
    table = pq.read_table(path).to_pylist()
    for record in table:
        record["ground_truth"] = "nothing like it"
    pq.write_table(pa.Table.from_pylist(table, schema=SAMPLE_SCHEMA), path)
    result = rerank_scores(
        path,
        _greedy_scores(),
        {},
        scorer_name="rule",
        judge=None,
        methods=("scs", "confidence", "oracle"),
        bootstrap_samples=200,
        confidence=0.9,
        seed=0,
    )
    for name in ("scs", "confidence", "oracle", "mean_sample"):
        assert result["methods"][name]["accuracy"] == 0.0
        assert result["methods"][name]["low"] == result["methods"][name]["high"] == 0.0


def test_the_scorer_method_needs_its_scorer(tmp_path):
    path = tmp_path / "rerank.parquet"
    _write_samples(path)
    with pytest.raises(ValueError, match="external scorer"):
        rerank_scores(
            path,
            _greedy_scores(),
            {},
            scorer_name="rule",
            judge=None,
            methods=("scorer",),
            bootstrap_samples=200,
            confidence=0.9,
            seed=0,
        )


def test_the_tiny_model_samples_n_responses_per_question(warm_model_dir, synth_rows, default_config, tmp_path):
    """A real run: the warm-started tiny model samples N responses per question of the subset, each with its
    extracted answer, token counts and the mean log-prob of its sampled tokens; the rule scores every method."""
    import dataclasses

    from chartrl.config import RerankConfig
    from chartrl.evaluate.rerank import read_samples, sample_responses
    from chartrl.model.policy import load_policy

    rows = synth_rows["val"][:6]
    rerank = RerankConfig(n=3, by=("scs", "confidence", "oracle"), questions=4, seed=0)
    out = tmp_path / "rerank.parquet"
    evaluate = dataclasses.replace(default_config.evaluate, limit=None)
    summary = sample_responses(
        load_policy(warm_model_dir, threads=2),
        rows,
        with_tools=True,
        rerank=rerank,
        evaluate=evaluate,
        rollout=default_config.rollout,
        prompts=default_config.prompts,
        tools=default_config.tools,
        out=out,
    )
    assert summary["questions"] == 4 and summary["samples"] == 12
    grouped = read_samples(out)
    assert sorted(grouped) == sorted(r.id for r in rerank_subset(rows, 4))
    for samples in grouped.values():
        assert [r["sample"] for r in samples] == [0, 1, 2]
        for record in samples:
            assert record["response_tokens"] > 0
            assert math.isfinite(record["mean_logprob"]) and record["mean_logprob"] <= 0.0
            assert record["total_tokens"] >= record["prompt_tokens"] + record["response_tokens"]
    greedy = {"items": [{"id": f"{qid}#0", "accuracy": 0.0} for qid in grouped]}
    result = rerank_scores(
        out,
        greedy,
        {},
        scorer_name="rule",
        judge=None,
        methods=rerank.by,
        bootstrap_samples=200,
        confidence=0.9,
        seed=0,
    )
    assert set(result["methods"]) == {"greedy", "scs", "confidence", "oracle", "mean_sample"}
    assert result["methods"]["oracle"]["accuracy"] >= max(
        result["methods"][m]["accuracy"] for m in ("scs", "confidence", "mean_sample")
    )
    assert result["methods"]["scs"]["costs"]["samples"] == 12


@pytest.mark.slow
def test_rerank_score_command_with_the_external_scorer(tmp_path):
    """``chartrl rerank-score`` as the rule runs it: the external scorer behind the local OpenAI-compatible server
    (key from the environment, never in the log), the chart read from the split, an MLflow run with the methods'
    metrics and the scorer's usage; a rerun asks the scorer nothing."""
    import io
    import os
    import subprocess
    import sys

    from mlflow.tracking import MlflowClient
    from PIL import Image

    from judge_server import FakeScorerServer

    samples = tmp_path / "rerank.parquet"
    _write_samples(samples)
    greedy = tmp_path / "scores_rule.json"
    greedy.write_text(json.dumps(_greedy_scores()))
    generations = tmp_path / "generations.parquet"
    pq.write_table(
        pa.table({"id": [f"q{q}" for q in range(4)], "sample": [0] * 4, "response_tokens": [6] * 4}), generations
    )
    png = io.BytesIO()
    Image.new("RGB", (28, 28), "white").save(png, format="PNG")
    data = tmp_path / "test.parquet"
    pq.write_table(pa.table({"id": [f"q{q}" for q in range(4)], "images": [[png.getvalue()]] * 4}), data)
    truths = {f"Question {q}?": truth for q, (truth, _, _) in enumerate(QUESTIONS)}
    key = "sk-test-scorer-secret-42"
    with FakeScorerServer(truths) as server:
        spec = {
            "series": {
                "id": "e4",
                "generation": "v1",
                "kind": "eval",
                "of": "e1",
                "checkpoint": "last",
                "scorers": ["rule"],
                "rerank": {
                    "n": 3,
                    "by": ["scs", "scorer", "oracle"],
                    "scorer": {
                        "base_url": server.base_url,
                        "model": "fake-prm",
                        "api_key_env": "CHARTRL_TEST_PRM_KEY",
                        "cache_path": str(tmp_path / "cache.sqlite"),
                        "backoff_initial_s": 0.01,
                    },
                },
            },
            "of": {"id": "e1", "tools": True},
            "evaluate": {"dataset": "synthchart", "bootstrap_samples": 200},
        }
        command = [sys.executable, "-m", "chartrl", "rerank-score", "--spec", json.dumps(spec), "--scorer", "rule"]
        command += ["--samples", str(samples), "--greedy-scores", str(greedy), "--generations", str(generations)]
        command += ["--data", str(data), "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db", "--experiment", "rr"]
        env = dict(os.environ, CHARTRL_TEST_PRM_KEY=key)
        for out in ("first.json", "second.json"):
            result = subprocess.run([*command, "--out", str(tmp_path / out)], capture_output=True, text=True, env=env)
            assert result.returncode == 0, result.stderr[-3000:]
            assert key not in result.stderr and key not in result.stdout
        # 12 samples, three of them repeating another of their question: 9 requests, none on the rerun
        assert server.requests == 9 and len(server.images) == 9
    first, second = (json.loads((tmp_path / name).read_text()) for name in ("first.json", "second.json"))
    scorer = first["methods"]["scorer"]
    # the scorer rates a right answer 0.9, a wrong one 0.2: it finds the right sample wherever there is one
    assert scorer["accuracy"] == first["methods"]["oracle"]["accuracy"] == 0.75
    assert scorer["chosen"] == {"q0": 0, "q1": 0, "q2": 0, "q3": 1}
    assert scorer["costs"]["scorer_calls"] == 12 and scorer["costs"]["scorer_requests"] == 9
    assert second["methods"]["scorer"]["costs"]["scorer_cache_hits"] == 12
    assert second["methods"]["scorer"]["accuracy"] == scorer["accuracy"]
    assert first["external_scorer"]["model"] == "fake-prm" and first["greedy"] is True
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("rr").experiment_id])
    metrics = next(r for r in runs if r.info.run_name == "e4/rerank/rule").data.metrics
    assert metrics["rerank/scorer/accuracy"] == 0.75 and "rerank_scorer/requests" in metrics


def test_judge_failures_are_counted_and_bounded_as_in_the_score_rule(tmp_path):
    from chartrl.evaluate.score import TooManyJudgeFailures

    from judge_server import FailingJudge

    path = tmp_path / "rerank.parquet"
    _write_samples(path)
    kwargs = dict(
        scorer_name="judge", methods=("scs", "oracle"), bootstrap_samples=200, confidence=0.9, seed=0
    )  # fmt: skip
    with pytest.raises(TooManyJudgeFailures, match="failing"):
        rerank_scores(path, _greedy_scores(), {}, judge=FailingJudge(), max_judge_failure_fraction=0.05, **kwargs)
    result = rerank_scores(path, _greedy_scores(), {}, judge=FailingJudge(), max_judge_failure_fraction=1.0, **kwargs)
    # every sample with an answer got no verdict: no chosen answer is scored, and the oracle, which a failure
    # could hide a right sample from, scores none either (q2's sample without an answer is wrong, not enough)
    for method in ("scs", "oracle"):
        values = result["methods"][method]
        assert values["unscored"] == 4 and values["n"] == 0 and values["accuracy"] is None
