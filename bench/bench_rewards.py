"""Reward and judge benchmarks (part of `make bench`).

- rule scorer (ChartQA relaxed accuracy) against mathruler's ``grade_answer`` (what EasyR1's r1v reward uses) on
  the same responses: responses per second, and how often the two disagree, on the generated responses and on a
  hand-labelled set (bench/labelled_answers.py), with the offline reference judge as a third column;
- the OpenAI-compatible judge client against the loopback test server (a separate process) with a fixed latency:
  verdicts per second at several concurrency levels, against the ideal concurrency / latency, with the client's CPU
  time per verdict, at the tests' 50 ms latency and at a hosted model's 1 s (32 and 128 concurrent requests), and a
  cached rerun.
"""

from __future__ import annotations

import multiprocessing
import random
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

from common import REPO, summary, timed
from labelled_answers import LABELLED

TRANSFORMS = (
    "same",
    "jitter_3pct",
    "jitter_10pct",
    "percent_sign",
    "separators",
    "upper",
    "full_stop",
    "sentence",
    "unit",
    "no_tag",
)


def chartqa_answers() -> list[str]:
    import json

    answers = []
    for name in ("test_human.json", "test_augmented.json"):
        answers += [r["label"] for r in json.loads((REPO / "tests/fixtures/chartqa_real/test" / name).read_text())]
    return answers


def _variant(answer: str, transform: str, rng: random.Random) -> str:
    from chartrl.answers import parse_number

    value = parse_number(answer)
    if transform.startswith("jitter") and value is not None:
        spread = 0.03 if transform == "jitter_3pct" else 0.10
        return f"{value * (1 + rng.uniform(-spread, spread)):.4g}"
    if transform == "percent_sign" and value is not None:
        return f"{answer}%"
    if transform == "separators" and value is not None and abs(value) >= 1000:
        return f"{value:,.0f}"
    return {
        "upper": answer.upper(),
        "full_stop": f"{answer}.",
        "sentence": f"The answer is {answer}",
        "unit": f"{answer} units",
    }.get(transform, answer)


def generated_responses(n: int, seed: int = 0) -> list[tuple[str, str, str]]:
    """(response, target, transform): ChartQA targets answered in the forms models write."""
    rng = random.Random(seed)
    answers = chartqa_answers()
    out = []
    for _ in range(n):
        target, transform = rng.choice(answers), rng.choice(TRANSFORMS)
        prediction = _variant(target, transform, rng)
        body = f"Reading the chart, the relevant mark is labelled. <answer>{prediction}</answer>"
        out.append((prediction if transform == "no_tag" else body, target, transform))
    return out


def bench_rule_vs_mathruler(n: int, repeats: int) -> list[str]:
    from mathruler.grader import grade_answer

    from chartrl.answers import extract_answer, relaxed_accuracy

    responses = generated_responses(n)

    def rule() -> list[bool]:
        return [relaxed_accuracy(extract_answer(r), t) == 1.0 for r, t, _ in responses]

    def mathruler() -> list[bool]:
        # the same extraction for both: this compares the answer checkers
        return [(a := extract_answer(r)) is not None and grade_answer(a, t) for r, t, _ in responses]

    rule_rates = [n / t for t in timed(rule, repeats)]
    mathruler_rates = [n / t for t in timed(mathruler, repeats)]
    by_rule, by_mathruler = rule(), mathruler()
    disagree = [i for i in range(n) if by_rule[i] != by_mathruler[i]]
    by_transform: dict[str, list[int]] = {}
    for i in disagree:
        by_transform.setdefault(responses[i][2], []).append(i)
    speed = statistics.median(rule_rates) / statistics.median(mathruler_rates)
    lines = [
        "## Rule scorer vs mathruler `grade_answer` (EasyR1's r1v checker)",
        "",
        f"{n} responses: ChartQA sample targets (tests/fixtures/chartqa_real) answered in {len(TRANSFORMS)} forms "
        f"({', '.join(TRANSFORMS)}); answer extraction included in both; {repeats} runs, min / median / max.",
        "",
        "| checker | responses/s |",
        "|---|---|",
        f"| rule (relaxed accuracy) | {summary(rule_rates, 'responses/s')} |",
        f"| mathruler grade_answer | {summary(mathruler_rates, 'responses/s')} |",
        "",
        f"rule / mathruler (median): **{speed:.1f}x**. Accepted: rule {sum(by_rule)}, mathruler {sum(by_mathruler)}; "
        f"they disagree on **{len(disagree)} of {n} ({len(disagree) / n:.1%})**:",
        "",
        "| form | disagreements | rule accepts | mathruler accepts | example (prediction / target) |",
        "|---|---|---|---|---|",
    ]
    for transform, indices in sorted(by_transform.items(), key=lambda kv: -len(kv[1])):
        example = responses[indices[0]]
        prediction = extract_answer(example[0])
        lines.append(
            f"| {transform} | {len(indices)} | {sum(by_rule[i] for i in indices)} | "
            f"{sum(by_mathruler[i] for i in indices)} | `{prediction}` / `{example[1]}` |"
        )
    return lines + [""]


def bench_labelled() -> list[str]:
    from mathruler.grader import grade_answer

    from chartrl.answers import relaxed_accuracy
    from chartrl.judge.reference import answers_equivalent

    rows = []
    for prediction, target, label in LABELLED:
        rows.append(
            (
                prediction,
                target,
                label,
                relaxed_accuracy(prediction, target) == 1.0,
                bool(grade_answer(prediction, target)),
                answers_equivalent(prediction, target),
            )
        )
    n = len(rows)

    def agreement(column: int) -> str:
        hits = sum(r[column] == r[2] for r in rows)
        return f"{hits}/{n} ({hits / n:.0%})"

    disagree = [r for r in rows if r[3] != r[4]]
    lines = [
        "## Labelled set: who agrees with a human grader",
        "",
        f"{n} hand-labelled (prediction, target) pairs (bench/labelled_answers.py).",
        "",
        "| checker | agrees with the label |",
        "|---|---|",
        f"| rule (relaxed accuracy) | {agreement(3)} |",
        f"| mathruler grade_answer | {agreement(4)} |",
        f"| reference judge (not an LLM) | {agreement(5)} |",
        "",
        f"Rule and mathruler disagree on **{len(disagree)} of {n} ({len(disagree) / n:.0%})**:",
        "",
        "| prediction | target | human | rule | mathruler | reference judge |",
        "|---|---|---|---|---|---|",
    ]
    mark = {True: "yes", False: "no"}
    for prediction, target, *verdicts in disagree:
        lines.append(f"| `{prediction}` | `{target}` | " + " | ".join(mark[v] for v in verdicts) + " |")
    wrong_everywhere = [r for r in rows if r[3] != r[2] and r[4] != r[2] and r[5] != r[2]]
    if wrong_everywhere:
        lines += ["", "Missed by all three: " + ", ".join(f"`{r[0]}` for `{r[1]}`" for r in wrong_everywhere)]
    return lines + [""]


def _serve(latency_s: float, queue) -> None:
    from judge_server import FakeJudgeServer

    server = FakeJudgeServer(latency_s=latency_s).__enter__()
    queue.put(server.base_url)
    threading.Event().wait()


def _throughput_rows(judge_for, items, levels, latency_s: float, repeats: int) -> list[str]:
    """One table row per concurrency level: verdicts per second against the ideal (concurrency / latency), and the
    client's CPU time per verdict (this process only: the server runs in its own), which says whether a shortfall
    is the client's own work or waiting."""
    from chartrl.judge import judge_batch

    rows = []
    for concurrency in levels:
        rates, cpu = [], []
        for _ in range(repeats if concurrency > 1 else 1):
            judge = judge_for(concurrency)
            cpu_started, started = time.process_time(), time.perf_counter()
            judge_batch(judge, items)
            rates.append(len(items) / (time.perf_counter() - started))
            cpu.append((time.process_time() - cpu_started) / len(items))
        ideal = min(concurrency, len(items)) / latency_s
        rows.append(
            f"| {concurrency} | {summary(rates, 'verdicts/s')} | {ideal:.0f} | "
            f"{statistics.median(rates) / ideal:.0%} | {summary([1000 * c for c in cpu], 'ms')} |"
        )
    return rows


def bench_judge_throughput(n_items: int, repeats: int, latency_s: float = 0.05) -> list[str]:
    """The judge client against the loopback server: at the test latency (50 ms, as the tests use) and at a
    realistic one (1 s, a hosted judge model) with 32 and 128 concurrent requests."""
    import os

    from chartrl.judge import JudgeItem, judge_batch
    from chartrl.judge.cache import VerdictCache
    from chartrl.judge.openai_judge import OpenAIJudge

    os.environ.setdefault("CHARTRL_BENCH_JUDGE_KEY", "EMPTY")
    header = [
        "| concurrency | verdicts/s | ideal | median / ideal | client CPU per verdict |",
        "|---|---|---|---|---|",
    ]
    lines = [
        "## Judge client throughput (loopback server, fixed latency)",
        "",
        f"Distinct items per run against the test server in its own process, no cache hits; {repeats} runs, "
        "min / median / max. Ideal = concurrency / latency. Client CPU per verdict: this process's CPU time "
        "(all its threads) over the run, per verdict; the server's CPU is not in it.",
        "",
    ]
    scratch = tempfile.mkdtemp()
    try:
        for latency, levels, count in ((latency_s, (1, 4, 16, 64), n_items), (1.0, (32, 128), max(n_items, 512))):
            queue = multiprocessing.Queue()
            server = multiprocessing.Process(target=_serve, args=(latency, queue), daemon=True)
            server.start()
            base_url = queue.get(timeout=60)
            try:
                items = [JudgeItem(f"item {i}: value of bar {i % 7}?", str(i % 13), str(i % 11)) for i in range(count)]

                def judge_for(concurrency, url=base_url):
                    return OpenAIJudge(
                        "bench",
                        base_url=url,
                        model="fake-judge",
                        api_key_env="CHARTRL_BENCH_JUDGE_KEY",
                        max_concurrency=concurrency,
                        cache=VerdictCache(None),
                    )

                lines += [f"{count} items, {latency * 1000:.0f} ms per request:", "", *header]
                lines += _throughput_rows(judge_for, items, levels, latency, repeats)
                lines.append("")
                if latency == latency_s:
                    cached = OpenAIJudge(
                        "bench",
                        base_url=base_url,
                        model="fake-judge",
                        api_key_env="CHARTRL_BENCH_JUDGE_KEY",
                        max_concurrency=64,
                        cache=VerdictCache(Path(scratch) / "judge_cache.sqlite"),
                    )
                    judge_batch(cached, items)
                    times = timed(lambda judge=cached, batch=items: judge_batch(judge, batch), repeats)
                    rates = summary([count / t for t in times], "verdicts/s")
                    lines += [f"Cached rerun (SQLite cache, zero requests): {rates}.", ""]
            finally:
                server.terminate()
                server.join()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return lines


def sections(args) -> list[str]:
    return (
        bench_rule_vs_mathruler(args.responses, args.repeats)
        + bench_labelled()
        + bench_judge_throughput(args.judge_items, args.repeats)
    )
