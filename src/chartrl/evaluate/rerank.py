"""Best-of-N reranking at test time: sample N responses per test question, choose one answer per question by each
method an eval series' ``rerank.by`` names, score the chosen answers with the series' scorers beside its own
(greedy) answers on the same questions.

Two stages, as the rules run them:

- :func:`sample_responses` (rule ``rerank``, ``results/eval/{series}/rerank.parquet``): the checkpoint's N samples
  per question at ``rollout.temperature``, seeded by ``rerank.seed``, on a fixed subset of the questions
  (:func:`rerank_subset`). Each row records the extracted answer, the mean log-probability of the sampled tokens
  (under the sampling distribution, logits / temperature) and the token counts. The greedy generations and what
  reads them are left as they are.
- :func:`rerank_scores` (rule ``rerank_score``, ``results/eval/{series}/rerank_{scorer}.json``): per method, the
  chosen sample of each question, scored by the scorer (``rule``, ``judge``, ``panel``: chartrl.rewards' own
  scorers, as the ``score`` rule), the accuracy with its bootstrap interval, the paired gap to the greedy answers
  (the series' ``scores_{scorer}.json``, first sample of each question) and the method's costs.

Methods (:data:`SELECTORS`, each a pure function of one question's samples, returning the chosen sample index):

- ``scs`` (self-consistency, maj@N): the most frequent answer after :func:`normalise_answer`; a tie goes to the
  answer whose best sample has the higher mean log-prob, then to the lower sample index; the chosen sample is the
  answer's most confident one. Samples without an answer never vote; with no answer at all, the most confident
  sample is chosen (and is wrong under every scorer).
- ``confidence``: the highest mean token log-prob (ties: the lower index); a sample with no sampled token ranks
  last.
- ``scorer``: the highest score of the external scorer (chartrl.judge.prm); a scorer failure ranks below every
  score; when every sample of a question failed, sample 0 is taken and counted (``fallbacks``).
- ``oracle`` (pass@N): right when any sample is right under the scorer; an upper bound, not a usable method. A
  question whose samples are all wrong but one or more got no judge verdict stays unscored.

Beside each method's accuracy under the rule scorer, ``published_accuracy``: the same chosen answers under the
published ChartQA rule (chartrl.evaluate.published_metric; the greedy answers' from their scores file); under a
judge it is None, with ``why_no_published``.

Costs per method: ``samples`` and ``sampled_tokens`` (every method pays for all N samples of every question; the
greedy answer for one), ``scorer_calls`` (samples sent to the external scorer, and its requests, cache hits and
tokens when the endpoint reports usage), ``judge_items`` (what the series' scorer judged to score the method: for
the oracle every sample).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from chartrl.answers import extract_answer, parse_number
from chartrl.evaluate.intervals import bootstrap_mean, bootstrap_paired_gap
from chartrl.evaluate.score import add_published_scores, check_judge_failures
from chartrl.files import write_atomically
from chartrl.judge import judge_batch
from chartrl.judge.prm import ScoreItem
from chartrl.rewards import RewardInput, get_scorer
from chartrl.rollout.conversation import question_of
from chartrl.rollout.episodes import run_episodes
from chartrl.rollout.sampling import SamplingParams

log = logging.getLogger(__name__)

SAMPLE_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("sample", pa.int32()),
        ("question", pa.string()),
        ("ground_truth", pa.string()),
        ("data_source", pa.string()),
        ("subset", pa.string()),
        ("chart_type", pa.string()),
        ("turns", pa.string()),
        ("tool_calls", pa.int32()),
        ("tool_outcome", pa.string()),
        ("final_response", pa.string()),
        ("answer", pa.string()),
        ("mean_logprob", pa.float64()),
        ("prompt_tokens", pa.int32()),
        ("response_tokens", pa.int32()),
        ("total_tokens", pa.int32()),
        ("truncated", pa.bool_()),
    ]
)


# --------------------------------------------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------------------------------------------


def rerank_subset(rows: Sequence[Any], questions: int | None) -> list[Any]:
    """The ``questions`` rows whose id has the lowest sha256 (all rows when None), in the split's order: a fixed
    subset that does not follow how the split is ordered."""
    rows = list(rows)
    if questions is None or questions >= len(rows):
        return rows
    chosen = set(sorted((hashlib.sha256(r.id.encode()).hexdigest(), r.id) for r in rows)[:questions])
    keep = {row_id for _, row_id in chosen}
    return [r for r in rows if r.id in keep]


def mean_logprob(logprobs: Sequence[float], mask: Sequence[int]) -> float | None:
    """Mean log-prob over the sampled tokens (mask 1); None when none was sampled."""
    values = [lp for lp, m in zip(logprobs, mask, strict=True) if m]
    return sum(values) / len(values) if values else None


def sample_record(episode) -> dict[str, Any]:
    row = episode.row
    return {
        "id": row.id,
        "sample": episode.sample,
        "question": question_of(row),
        "ground_truth": row.answer,
        "data_source": row.data_source,
        "subset": row.extra.get("subset", ""),
        "chart_type": row.chart_type,
        "turns": json.dumps(episode.turns),
        "tool_calls": len(episode.tool_outcomes),
        "tool_outcome": episode.tool_outcome,
        "final_response": episode.final_response,
        "answer": extract_answer(episode.final_response),
        "mean_logprob": mean_logprob(episode.response_logprobs, episode.response_mask),
        "prompt_tokens": len(episode.prompt_ids),
        "response_tokens": episode.sampled_tokens,
        "total_tokens": len(episode.prompt_ids) + len(episode.response_ids),
        "truncated": episode.truncated,
    }


def sample_responses(
    policy, rows: Sequence[Any], *, with_tools: bool, rerank, evaluate, rollout, prompts, tools, out: Path
) -> dict[str, Any]:
    """Sample ``rerank.n`` responses per question of the subset at ``rollout.temperature``; write them to ``out``."""
    import torch

    torch.manual_seed(rerank.seed)
    rows = list(rows[: evaluate.limit] if evaluate.limit else rows)
    chosen = rerank_subset(rows, rerank.questions)
    params = SamplingParams(
        temperature=rollout.temperature,
        top_p=rollout.top_p,
        max_new_tokens=rollout.max_new_tokens,
        greedy=False,
        kv_reuse=rollout.kv_reuse,
    )
    episodes = run_episodes(
        policy,
        chosen,
        with_tools=with_tools,
        n=rerank.n,
        params=params,
        prompt_config=prompts,
        tools=tools,
        batch_size=rollout.batch_size,
    )
    records = [sample_record(e) for e in episodes]
    table = pa.Table.from_pylist(records, schema=SAMPLE_SCHEMA)
    write_atomically(out, lambda tmp: pq.write_table(table, tmp, compression="zstd"))
    answered = sum(r["answer"] is not None for r in records)
    summary = {
        "questions": len(chosen),
        "samples": len(records),
        "sampled_tokens": sum(r["response_tokens"] for r in records),
        "answer_rate": answered / len(records) if records else 0.0,
    }
    log.info("%d samples of %d questions written to %s: %s", len(records), len(chosen), out, summary)
    return summary


# --------------------------------------------------------------------------------------------------------------
# Selection
# --------------------------------------------------------------------------------------------------------------

_SPACES = re.compile(r"\s+")


def normalise_answer(answer: str | None) -> str | None:
    """The form answers vote under: a number as its value (``1,200`` = ``1200.0`` = ``1200``; a trailing ``%``
    kept apart), else lower case with inner spaces collapsed and a final full stop dropped; None for no answer."""
    if answer is None:
        return None
    text = _SPACES.sub(" ", answer.strip()).rstrip(".").strip()
    if not text:
        return None
    percent = text.endswith("%")
    number = parse_number(text[:-1].strip() if percent else text)
    if number is not None and math.isfinite(number):
        return f"{number:g}{'%' if percent else ''}"
    return text.lower()


def _confidence(sample: Mapping[str, Any]) -> float:
    value = sample.get("mean_logprob")
    return -math.inf if value is None else float(value)


def select_confidence(samples: Sequence[Mapping[str, Any]]) -> int:
    """Index (into ``samples``) of the highest mean log-prob; ties go to the lower index."""
    return max(range(len(samples)), key=lambda i: (_confidence(samples[i]), -i))


def select_scs(samples: Sequence[Mapping[str, Any]]) -> int:
    """Self-consistency: the most confident sample of the most frequent normalised answer (see the module
    docstring for ties and questions without any answer)."""
    groups: dict[str, list[int]] = {}
    for i, sample in enumerate(samples):
        key = normalise_answer(sample.get("answer"))
        if key is not None:
            groups.setdefault(key, []).append(i)
    if not groups:
        return select_confidence(samples)

    def best(members: list[int]) -> int:
        return max(members, key=lambda i: (_confidence(samples[i]), -i))

    winner = max(groups.values(), key=lambda m: (len(m), _confidence(samples[best(m)]), -best(m)))
    return best(winner)


def select_scorer(samples: Sequence[Mapping[str, Any]]) -> int:
    """The highest external score (``scorer_score``); failures (None) rank below every score; ties: lower index."""
    return max(
        range(len(samples)),
        key=lambda i: (samples[i].get("scorer_score") is not None, samples[i].get("scorer_score") or 0.0, -i),
    )


SELECTORS: dict[str, Callable[[Sequence[Mapping[str, Any]]], int]] = {
    "scs": select_scs,
    "confidence": select_confidence,
    "scorer": select_scorer,
}
"""Method -> chosen sample index of one question's samples; ``oracle`` chooses none (any sample counts)."""
METHODS = ("scs", "confidence", "scorer", "oracle")


# --------------------------------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------------------------------


def read_samples(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Question id -> its samples, in sample order."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for record in pq.read_table(path).to_pylist():
        grouped.setdefault(record["id"], []).append(record)
    for samples in grouped.values():
        samples.sort(key=lambda r: r["sample"])
    return grouped


def _key(record: Mapping[str, Any]) -> str:
    return f"{record['id']}#{record['sample']}"


def charts_by_id(parquet: Path, ids: Sequence[str]) -> dict[str, bytes]:
    """Question id -> its chart (PNG bytes) from a split in the data contract."""
    wanted = set(ids)
    table = pq.read_table(parquet, columns=["id", "images"]).to_pylist()
    return {row["id"]: row["images"][0] for row in table if row["id"] in wanted}


def reward_input(record: Mapping[str, Any]):
    return RewardInput(
        response=record["final_response"],
        ground_truth=record["ground_truth"],
        question=record["question"],
        data_source=record["data_source"],
        subset=record["subset"],
        tool_outcome=record["tool_outcome"],
        tool_calls=record["tool_calls"],
        response_tokens=record["response_tokens"],
        id=_key(record),
    )


def scorer_text(record: Mapping[str, Any]) -> str:
    """What the external scorer reads of a sample: every assistant pass and tool observation, in order."""
    lines = []
    for turn in json.loads(record["turns"]):
        prefix = "assistant" if turn["role"] == "assistant" else "tool observation"
        lines.append(f"[{prefix}] {turn['text']}")
    return "\n".join(lines)


def external_scores(
    grouped: Mapping[str, list[dict[str, Any]]], scorer, charts: Mapping[str, bytes]
) -> dict[str, float | None]:
    """Sample key -> the external scorer's score in [0, 1] (None: a scorer failure), one batch for every sample."""
    records = [r for samples in grouped.values() for r in samples]
    items = [ScoreItem(r["question"], scorer_text(r), charts.get(r["id"])) for r in records]
    verdicts = judge_batch(scorer, items)
    return {_key(r): v.score for r, v in zip(records, verdicts, strict=True)}


def greedy_accuracies(scores: Mapping[str, Any], ids: Sequence[str]) -> dict[str, float | None]:
    """Question id -> the series' own answer's accuracy (the first sample of each question in its scores file)."""
    by_key = {item["id"]: item["accuracy"] for item in scores["items"]}
    return {qid: by_key[f"{qid}#0"] for qid in ids if f"{qid}#0" in by_key}


def _accuracy_summary(
    per_question: Mapping[str, float | None],
    greedy: Mapping[str, float | None],
    *,
    samples: int,
    confidence: float,
    seed: int,
) -> dict[str, Any]:
    scored = {q: v for q, v in per_question.items() if v is not None}
    greedy_scored = {q: v for q, v in greedy.items() if v is not None}
    interval = bootstrap_mean(list(scored.values()), samples=samples, confidence=confidence, seed=seed)
    gap = bootstrap_paired_gap(scored, greedy_scored, samples=samples, confidence=confidence, seed=seed)
    return {
        "accuracy": interval["mean"],
        "low": interval["low"],
        "high": interval["high"],
        "n": interval["n"],
        "unscored": len(per_question) - len(scored),
        "gap_vs_greedy": gap,
    }


def rerank_scores(
    samples_path: Path,
    greedy_scores: Mapping[str, Any],
    greedy_tokens: Mapping[str, int],
    *,
    scorer_name: str,
    judge,
    methods: Sequence[str],
    external=None,
    charts: Mapping[str, bytes] | None = None,
    bootstrap_samples: int,
    confidence: float,
    seed: int,
    max_judge_failure_fraction: float = 1.0,
) -> dict[str, Any]:
    """Every method's accuracy under ``scorer_name`` (see the module docstring), with costs; ``external`` is the
    external scorer (chartrl.judge.prm.OpenAIScorer) when ``methods`` names ``scorer``. As the ``score`` rule, more
    judge failures than ``max_judge_failure_fraction`` of the items sent stop it, naming the endpoint."""
    grouped = read_samples(samples_path)
    ids = list(grouped)
    n_samples = sum(len(s) for s in grouped.values())
    sampled_tokens = sum(r["response_tokens"] for s in grouped.values() for r in s)
    scores: dict[str, float | None] = {}
    if "scorer" in methods:
        if external is None:
            raise ValueError("rerank by 'scorer' needs the external scorer")
        scores = external_scores(grouped, external, charts or {})
        for samples in grouped.values():
            for record in samples:
                record["scorer_score"] = scores[_key(record)]
    chosen = {m: {qid: SELECTORS[m](grouped[qid]) for qid in ids} for m in methods if m in SELECTORS}
    fallbacks = 0
    if "scorer" in methods:
        fallbacks = sum(all(r["scorer_score"] is None for r in grouped[qid]) for qid in ids)
    everything = "oracle" in methods
    needed = {
        _key(record)
        for qid in ids
        for i, record in enumerate(grouped[qid])
        if everything or any(chosen[m][qid] == i for m in chosen)
    }
    records = [r for qid in ids for r in grouped[qid] if _key(r) in needed]
    inputs = [reward_input(r) for r in records]
    scored = get_scorer(scorer_name)(inputs, judge)
    add_published_scores(scored, inputs, scorer_name)
    check_judge_failures(scored["aggregate"], max_judge_failure_fraction)
    verdict = {item["id"]: item["accuracy"] for item in scored["items"]}
    published = {item["id"]: item["published_score"] for item in scored["items"] if "published_score" in item}

    def with_published(
        summary: dict[str, Any], per_question: Mapping[str, float | None], missing: str | None = None
    ) -> dict[str, Any]:
        reason = scored["aggregate"].get("why_no_published") or missing
        if reason is not None:
            return {**summary, "published_accuracy": None, "why_no_published": reason}
        values = [v for v in per_question.values() if v is not None]
        return {**summary, "published_accuracy": sum(values) / len(values) if values else None}

    greedy = greedy_accuracies(greedy_scores, ids)
    common = {"samples": bootstrap_samples, "confidence": confidence, "seed": seed}
    n_questions = len(ids)
    greedy_cost = {"samples": len(greedy), "sampled_tokens": sum(greedy_tokens.get(q, 0) for q in greedy)}
    greedy_published = {  # the first sample of each question, as greedy_accuracies reads it
        item["id"].removesuffix("#0"): item.get("published_score")
        for item in greedy_scores["items"]
        if item["id"].endswith("#0") and item["id"].removesuffix("#0") in greedy
    }
    unpublished = any(v is None for v in greedy_published.values())  # a scores file written without them
    result_methods: dict[str, Any] = {
        "greedy": {
            **with_published(
                _accuracy_summary(greedy, greedy, **common),
                greedy_published,
                "its scores file has no published scores: rerun its score job" if unpublished else None,
            ),
            "costs": greedy_cost,
        }
    }

    pay_all = {"samples": n_samples, "sampled_tokens": sampled_tokens}
    for method in methods:
        if method == "oracle":
            per_question = {}
            for qid in ids:
                values = [verdict[_key(r)] for r in grouped[qid]]
                known = [v for v in values if v is not None]
                best = max(known, default=None)
                # a judge failure could hide a right sample: without a right one the question stays unscored
                per_question[qid] = best if best == 1.0 or (known and len(known) == len(values)) else None
            published_chosen = {qid: max(published.get(_key(r), 0.0) for r in grouped[qid]) for qid in ids}
            costs = {**pay_all, "judge_items": len(records)}
        else:
            per_question = {qid: verdict[_key(grouped[qid][chosen[method][qid]])] for qid in ids}
            published_chosen = {qid: published.get(_key(grouped[qid][chosen[method][qid]])) for qid in ids}
            costs = {**pay_all, "judge_items": n_questions}
            if method == "scorer":
                costs["scorer_calls"] = n_samples
                costs["scorer_failures"] = sum(v is None for v in scores.values())
                costs["fallbacks"] = fallbacks
                costs.update({f"scorer_{k}": v for k, v in external.usage.as_dict().items()})
        result_methods[method] = {
            **with_published(_accuracy_summary(per_question, greedy, **common), published_chosen),
            "costs": costs,
            "chosen": {qid: chosen[method][qid] for qid in ids} if method in chosen else None,
        }
    if everything:  # what one sample scores on average: the gain of the methods over sampling itself
        per_question = {}
        for qid in ids:
            known = [v for v in (verdict[_key(r)] for r in grouped[qid]) if v is not None]
            per_question[qid] = sum(known) / len(known) if known else None
        published_mean = {
            qid: sum(published.get(_key(r), 0.0) for r in grouped[qid]) / len(grouped[qid]) for qid in ids
        }
        result_methods["mean_sample"] = {
            **with_published(_accuracy_summary(per_question, greedy, **common), published_mean),
            "costs": {
                "samples": n_questions,
                "sampled_tokens": round(sampled_tokens / max(1, n_samples / n_questions)),
            },
        }
    n = max((len(s) for s in grouped.values()), default=0)
    return {
        "scorer": scorer_name,
        "judge": scored["aggregate"].get("judge"),
        "n": n,
        "questions": n_questions,
        "methods": result_methods,
        "external_scorer": external.describe() if external is not None else None,
        "answer_rate": sum(r["answer"] is not None for s in grouped.values() for r in s) / max(1, n_samples),
        "agreement": _agreement(grouped),
    }


def _agreement(grouped: Mapping[str, list[dict[str, Any]]]) -> float | None:
    """Mean share of a question's samples giving its most frequent normalised answer (1: the N samples agree)."""
    shares = []
    for samples in grouped.values():
        counts: dict[str, int] = {}
        for record in samples:
            key = normalise_answer(record["answer"])
            if key is not None:
                counts[key] = counts.get(key, 0) + 1
        shares.append(max(counts.values(), default=0) / len(samples))
    return sum(shares) / len(shares) if shares else None
