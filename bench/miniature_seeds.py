"""What the embedded default shows, per train seed: a table for each seed of a ``results/`` folder that ran
``make run`` and then the seeds overlay (``--configfile config/seeds.yaml``).

For the warm start and every train series: greedy test accuracy with its 95% interval (bootstrap over the test
questions), by question type, the tool-call rate, tool success (calls that ran on the chart, over calls), the gain
over the warm start with its paired interval, and the rule-vs-judge drift (judge-scored minus rule-scored accuracy
on the same answers, paired interval): the judge is the one the series is judged with (``Config.judge_of``: the
hack control's is its exploitable judge), applied to each stored answer as the ``judge`` scorer applies it.

    python bench/miniature_seeds.py results > table.md
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

from chartrl.config import load_config
from chartrl.evaluate.intervals import bootstrap_mean, bootstrap_paired_gap
from chartrl.judge import JudgeItem, build_judge, judge_batch

REPO = Path(__file__).resolve().parents[1]
SERIES = ("e1", "e2", "e3", "e6", "e7", "e10", "e11", "e12", "h1")
BOOTSTRAP = {"samples": 2000, "confidence": 0.95, "seed": 0}


def test_file(results: Path, series: str, seed: int, main_seed: int) -> Path:
    if seed == main_seed:
        return results / "eval" / series / "test_accuracy.json"
    return results / "seeds" / series / f"seed{seed}" / "test_accuracy.json"


def scores(record: dict) -> dict[str, float]:
    return {item["id"]: float(item["score"]) for item in record["test"]["items"]}


def interval(values: dict[str, float]) -> str:
    ci = bootstrap_mean(list(values.values()), **BOOTSTRAP)
    return f"{ci['mean']:.3f} [{ci['low']:.3f}, {ci['high']:.3f}]"


def gap(first: dict[str, float], second: dict[str, float]) -> str:
    ci = bootstrap_paired_gap(first, second, **BOOTSTRAP)
    return f"{ci['mean']:+.3f} [{ci['low']:+.3f}, {ci['high']:+.3f}]"


def judged(record: dict, config, series: str, questions: dict[str, str]) -> dict[str, float]:
    """Each item's judge verdict on its stored answer (no answer: 0, as the judge scorer scores it)."""
    judge = build_judge(config.judge_of(series))
    items = [i for i in record["test"]["items"] if i.get("answer") is not None]
    verdicts = judge_batch(judge, [JudgeItem(questions[i["id"]], i["truth"], i["answer"]) for i in items])
    out = {i["id"]: 0.0 for i in record["test"]["items"]}
    out.update({i["id"]: float(v.score) for i, v in zip(items, verdicts, strict=True)})
    return out


def row(name: str, record: dict, start: dict[str, float] | None, drift: str) -> str:
    test = record["test"]
    by_type = test["accuracy_by_question_type"]
    success = test["protocol"]["executed_call_rate"] if test["tool_call_rate"] else None  # of the calls made
    parts = [
        name,
        interval(scores(record)),
        " / ".join(f"{by_type.get(t, float('nan')):.3f}" for t in ("value", "count", "compare")),
        f"{test['tool_call_rate']:.3f}",
        "-" if success is None else f"{success:.3f}",
        "-" if start is None else gap(scores(record), start),
        drift,
    ]
    return "| " + " | ".join(parts) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--configfile", type=Path, action="append", default=[])
    args = parser.parse_args()
    config = load_config(args.configfile, root=REPO)
    from chartrl.data.contract import read_split

    questions = {r.id: r.extra.get("question", "") for r in read_split(args.results / "data/synthchart/test.parquet")}
    main_seed = config.train.seed
    seeds = sorted({main_seed, 1, 2})
    warm = json.loads((args.results / "eval/warmstart/test_accuracy_tools_on.json").read_text())
    start = scores(warm)
    commits = sorted(
        {
            json.loads(path.read_text()).get("source_commit") or "not recorded"
            for path in [*args.results.glob("runs/*/run.json"), *args.results.glob("seeds/*/*/run.json")]
        }
    )
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "")
    trained = ", ".join(c if c == "not recorded" else c[:12] for c in commits) or "no run.json found"
    print(
        f"trained at commit {trained} (the runs' run.json), this CPU {cpu or platform.processor()}, "
        f"test questions {len(start)}\n"
    )
    for seed in seeds:
        print(f"### train seed {seed}\n")
        print(
            "| series | greedy test accuracy [95%] | value / count / compare | tool calls | tool success "
            "| gain over the warm start [95%] | judge - rule [95%] |"
        )
        print("|---|---|---|---|---|---|---|")
        print(row("warm start (tools on)", warm, None, "-"))
        for series in SERIES:
            path = test_file(args.results, series, seed, main_seed)
            if not path.is_file():
                print(f"| {series} | missing: {path} | | | | | |")
                continue
            record = json.loads(path.read_text())
            drift = gap(judged(record, config, series, questions), scores(record))
            print(row(series, record, start, drift))
        print()


if __name__ == "__main__":
    main()
