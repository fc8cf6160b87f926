"""The external scorer of best-of-N reranking (a process reward model behind an OpenAI-compatible endpoint) against
a real HTTP server on loopback: scores read from JSON or a final line, the chart sent as an image and the truth
never sent, retries through faults, unreadable replies counted as failures, a rerun answered from the cache, and
the reranking that uses it."""

from __future__ import annotations

import base64
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from chartrl.judge import judge_batch
from chartrl.judge.cache import VerdictCache
from chartrl.judge.prm import OpenAIScorer, ScoreItem, parse_score

from judge_server import FakeScorerServer

KEY_ENV = "CHARTRL_TEST_SCORER_KEY"


@pytest.fixture(autouse=True)
def scorer_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "EMPTY")


@pytest.mark.parametrize(
    "reply,expected",
    [
        ('{"score": 0.8}', 0.8),
        ('Reasoning first.\n```json\n{"score": 0.25}\n```', 0.25),
        ('{"score": "0.6"}', 0.6),
        ('{"score": "85%"}', 0.85),
        ("The steps look right.\nSCORE: 0.7", 0.7),
        ("**Score: 1**", 1.0),
        ("score = 0", 0.0),
        ("Score: 90%", 0.9),
        ('{"score": 1.5}', None),  # outside [0, 1]
        ("SCORE: -0.2", None),
        ('{"score": true}', None),
        ('{"score": 0.', None),  # truncated JSON
        ("I would say it is probably fine.", None),
        ('{"verdict": "correct"}', None),  # a judge's reply, not a score
    ],
)
def test_scores_are_read_robustly(reply, expected):
    assert parse_score(reply) == (pytest.approx(expected) if expected is not None else None)


def _png(shade: int) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (28, 28), (shade, shade, shade)).save(buffer, format="PNG")
    return buffer.getvalue()


# question -> truth (known to the server, never sent); each item its own question (the server counts attempts by it)
TRUTHS = {f"item {i}: what is shown?": str(10 * i) for i in range(12)}
ITEMS = [
    ScoreItem(q, f"[assistant] <answer>{truth if i % 3 else int(truth) + 1}</answer>", _png(10 * i))
    for i, (q, truth) in enumerate(TRUTHS.items())
]
EXPECTED = [0.2 if i % 3 == 0 else 0.9 for i in range(len(ITEMS))]


def make_scorer(server, cache_path, **options) -> OpenAIScorer:
    settings = dict(
        base_url=server.base_url,
        model="fake-prm",
        api_key_env=KEY_ENV,
        max_retries=3,
        backoff_initial_s=0.01,
        backoff_max_s=0.05,
        timeout_s=10.0,  # a loaded machine answers late; the faults test sets its own
        cache=VerdictCache(cache_path),
    )
    settings.update(options)
    return OpenAIScorer("rerank_scorer", **settings)


def test_scores_come_back_with_the_chart_and_without_the_truth(tmp_path):
    with FakeScorerServer(TRUTHS) as server:
        scorer = make_scorer(server, tmp_path / "cache.sqlite")
        verdicts = judge_batch(scorer, ITEMS)
        assert [v.score for v in verdicts] == pytest.approx(EXPECTED)
        assert server.requests == len(ITEMS) and scorer.usage.prompt_tokens > 0
        assert len(server.images) == len(ITEMS)
        sent = {base64.b64decode(url.removeprefix("data:image/png;base64,")) for url in server.images}
        assert sent == {item.image for item in ITEMS}
        assert all("reference_answer" not in prompt for prompt in server.prompts)
    assert scorer.describe()["kind"].startswith("external scorer")


def test_faults_are_retried_and_a_rerun_asks_nothing(tmp_path):
    faults = ["500", "429", "timeout", "truncated_json", "truncated_body", "chatty"]

    def plan(question, attempt):
        index = int(question.split(":")[0].removeprefix("item "))
        return faults[index % len(faults)] if attempt == 0 else None

    with FakeScorerServer(TRUTHS, plan=plan, slow_s=0.8) as server:
        scorer = make_scorer(server, tmp_path / "cache.sqlite", timeout_s=0.4)  # the slow reply times out
        assert [v.score for v in judge_batch(scorer, ITEMS)] == pytest.approx(EXPECTED)
        assert scorer.usage.retries >= 10 and scorer.usage.failures == 0
    with FakeScorerServer(TRUTHS) as again:
        rerun = make_scorer(again, tmp_path / "cache.sqlite")
        assert [v.score for v in judge_batch(rerun, ITEMS)] == pytest.approx(EXPECTED)
        assert again.requests == 0 and rerun.usage.cache_hits == len(ITEMS)


def test_a_reply_that_never_gives_a_score_is_a_counted_failure(tmp_path):
    broken = set(list(TRUTHS)[:3])
    with FakeScorerServer(TRUTHS, plan=lambda q, attempt: "garbage" if q in broken else None) as server:
        scorer = make_scorer(server, tmp_path / "cache.sqlite", max_retries=2)
        verdicts = judge_batch(scorer, ITEMS)
        assert [v.score for v in verdicts[:3]] == [None, None, None]
        assert [v.score for v in verdicts[3:]] == pytest.approx(EXPECTED[3:])
        assert scorer.usage.failures == 3 and scorer.usage.unparseable == 9
    # failures are not cached: a rerun asks them again
    with FakeScorerServer(TRUTHS) as again:
        judge_batch(make_scorer(again, tmp_path / "cache.sqlite"), ITEMS)
        assert again.requests == 3


def test_a_judge_verdict_and_a_score_never_share_a_cache_entry():
    from chartrl.judge import JudgeItem
    from chartrl.judge.openai_judge import OpenAIJudge

    judge = OpenAIJudge("judge", base_url="http://h/v1", model="m", api_key_env=KEY_ENV)
    scorer = OpenAIScorer("rerank_scorer", base_url="http://h/v1", model="m", api_key_env=KEY_ENV)
    item = ScoreItem("q", "<answer>1</answer>", _png(0))
    assert scorer._key(item) != judge._key(JudgeItem("q", item.reference, item.response))
    assert scorer._key(item) != scorer._key(ScoreItem("q", "<answer>1</answer>", _png(1)))


def test_rerank_by_the_external_scorer(tmp_path):
    """Rerank@N through the endpoint: the scorer's favourite sample is chosen and scored by the rule; its costs
    count the samples sent and the requests made."""
    from chartrl.evaluate.rerank import SAMPLE_SCHEMA, rerank_scores

    truths = {"Question 0?": "20", "Question 1?": "7"}
    answers = {"Question 0?": ["30", "20", "30"], "Question 1?": ["1", "2", "3"]}  # q1: no sample is right
    records = []
    for q, question in enumerate(truths):
        for k, answer in enumerate(answers[question]):
            text = f"<answer>{answer}</answer>"
            records.append(
                {
                    "id": f"q{q}",
                    "sample": k,
                    "question": question,
                    "ground_truth": truths[question],
                    "data_source": "synthchart",
                    "subset": "synthetic",
                    "chart_type": "v_bar",
                    "turns": json.dumps([{"role": "assistant", "text": text, "tokens": 4, "stop": "eos"}]),
                    "tool_calls": 0,
                    "tool_outcome": "none",
                    "final_response": text,
                    "answer": answer,
                    "mean_logprob": -1.0,
                    "prompt_tokens": 30,
                    "response_tokens": 4,
                    "total_tokens": 34,
                    "truncated": False,
                }
            )
    path = tmp_path / "rerank.parquet"
    pq.write_table(pa.Table.from_pylist(records, schema=SAMPLE_SCHEMA), path)
    greedy = {"items": [{"id": "q0#0", "accuracy": 0.0}, {"id": "q1#0", "accuracy": 0.0}]}
    with FakeScorerServer(truths) as server:
        scorer = make_scorer(server, tmp_path / "cache.sqlite")
        result = rerank_scores(
            path,
            greedy,
            {"q0": 4, "q1": 4},
            scorer_name="rule",
            judge=None,
            methods=("scorer", "scs"),
            external=scorer,
            charts={"q0": _png(1), "q1": _png(2)},
            bootstrap_samples=200,
            confidence=0.9,
            seed=0,
        )
    chosen = result["methods"]["scorer"]
    assert chosen["chosen"] == {"q0": 1, "q1": 0} and chosen["accuracy"] == 0.5
    assert result["methods"]["scs"]["accuracy"] == 0.0  # the majority "30" is wrong
    costs = chosen["costs"]
    # six samples scored; two of q0's are the same response on the same chart, asked once
    assert costs["scorer_calls"] == 6 and costs["scorer_requests"] == 5 and costs["scorer_failures"] == 0
    assert costs["fallbacks"] == 0 and costs["scorer_prompt_tokens"] > 0
    assert result["external_scorer"]["model"] == "fake-prm"
