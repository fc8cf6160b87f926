"""Every report panel holds numbers or says in its place why not, and ``panel_problems`` catches one that does not."""

from __future__ import annotations

import dataclasses

import json

import pytest

from chartrl.report.helpers import has_data
from chartrl.report.panels import panel_problems

from conftest import REPO


@pytest.fixture(scope="module", params=["local", "verl"])
def empty_report(request, tmp_path_factory):
    """The report of a run that has produced nothing yet: every panel is empty and must say why."""
    from chartrl.config import load_config
    from chartrl.report.build import build_report

    files = [] if request.param == "local" else [REPO / "config" / "gpu.yaml"]
    config = load_config(files, root=REPO)
    out = tmp_path_factory.mktemp(f"report-{request.param}")
    (out / "results").mkdir()
    build_report(config, out / "results", out / "report")
    return request.param, out / "report"


def test_an_empty_run_explains_every_panel(empty_report):
    backend, report = empty_report
    assert panel_problems(report) == []
    metrics = json.loads((report / "metrics.json").read_text())
    panels = {p["id"]: p for p in metrics["panels"]}
    # nothing ran: only the study's published numbers, which come from the config (gpu.yaml has them)
    assert not any(p["filled"] for pid, p in panels.items() if pid != "comparisons/reference")
    assert panels["comparisons/reference"]["filled"] == (backend == "verl")
    comparisons = {"across_generations", "gains", "headline", "scorer_matrix", "test_format", "identical"}
    assert {f"comparisons/{name}" for name in comparisons} <= set(panels)
    assert "no results/eval/e4/scores_rule.json" in panels["comparisons/scorer_matrix"]["reason"]
    # one panel per training subplot and reward-parts figure of each generation, and every table
    assert len([p for p in panels if p.startswith("training/v1/")]) == 10
    assert {"test_accuracy", "gaps", "seed_spread", "diagonal", "rollouts", "warmstart"} <= set(panels)
    shuffled = panels["training/v1/val_shuffled_images/accuracy"]["reason"]
    if backend == "verl":
        assert "not run on the verl backend" in shuffled
        assert "model.path Qwen/Qwen2.5-VL-3B-Instruct" in panels["warmstart"]["reason"]
        assert "not run on the verl backend" in panels["rerank"]["reason"]
    else:
        assert "results/runs/e1/metrics.jsonl" in shuffled
        assert "rerank_{scorer}.json for e4" in panels["rerank"]["reason"]


def test_a_missing_reason_or_a_false_claim_is_caught(empty_report, tmp_path):
    _, report = empty_report
    page = (report / "index.html").read_text()
    metrics = json.loads((report / "metrics.json").read_text())
    (tmp_path / "index.html").write_text(page.replace('data-panel="gaps"', 'data-panel="elsewhere"'))
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    assert [p.split(":")[0] for p in panel_problems(tmp_path)] == ["gaps"]
    metrics["panels"][0]["filled"], metrics["panels"][0]["reason"] = True, None
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    problems = panel_problems(tmp_path)
    assert any("said to be filled" in p for p in problems) and any("no reason given" in p for p in problems)


def test_has_data_reads_paths_into_metrics():
    metrics = {"training": {"e1": {"curves": {"val/accuracy": [[0, 0.5]], "reward/overall": []}}}, "seeds": {1: 0.5}}
    assert has_data(metrics, [["training", "e1", "curves", "val/accuracy"]])
    assert has_data(metrics, [["seeds", "1"]])  # integer keys, as collected, read as metrics.json writes them
    assert not has_data(metrics, [["training", "e1", "curves", "reward/overall"], ["training", "e2"]])


def test_the_title_names_the_experiment_once(empty_report):
    import re

    _, report = empty_report
    page = (report / "index.html").read_text()
    experiment = json.loads((report / "metrics.json").read_text())["experiment"]
    for tag in ("title", "h1"):
        title = re.findall(rf"<{tag}>(.*?)</{tag}>", page)[0]  # the page's own (figures hold SVG titles too)
        assert title.count(experiment) == 1, title  # not "chartrl: chartrl"


def test_rl_effect_compares_each_seed_with_its_start(tmp_path):
    """Reward over the first and last steps against its noise, validation end against the start's interval, per
    train seed (results/runs for train.seed, results/seeds for extra_seeds), and the single-seed label."""
    from chartrl.config import load_config
    from chartrl.report.build import build_report
    from chartrl.report.collect import rl_effect

    def write(path, rewards, val):
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [{"step": 0, "val/accuracy": val[0]}]
        lines += [{"step": i + 1, "reward/overall": r} for i, r in enumerate(rewards)]
        lines[-1]["val/accuracy"] = val[1]
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))

    results = tmp_path / "results"
    rising = [0.3 + 0.01 * i for i in range(40)]
    write(results / "runs/e1/metrics.jsonl", rising, (0.80, 0.79))
    write(results / "runs/e3/metrics.jsonl", [0.5, 0.6] * 20, (0.80, 0.50))
    write(results / "seeds/e1/seed1/metrics.jsonl", rising[::-1], (0.80, 0.80))
    config = load_config([REPO / "config/seeds.yaml"], root=REPO)
    effect = rl_effect(results, config)["series"]
    e1 = effect["e1"]["per_seed"]
    assert e1[0]["reward_first"] == pytest.approx(0.345) and e1[0]["reward_last"] == pytest.approx(0.645)
    assert e1[0]["reward_rose"] and not e1[1]["reward_rose"]
    low, high = e1[0]["val_interval"]
    assert low < 0.80 < high and e1[0]["val_n"] == config.train.val_rows
    assert e1[0]["val_kept"]
    e3 = effect["e3"]["per_seed"][0]
    assert e3["reward_held"] and not e3["val_kept"]  # 0.80 -> 0.50 is outside any 48-question interval
    assert effect["e2"]["per_seed"] == {}

    single = dataclasses.replace(load_config(root=REPO), extra_seeds=())  # a config running one seed
    build_report(single, results, tmp_path / "report")
    html = (tmp_path / "report/index.html").read_text()
    assert "Did RL improve on its start?" in html and 'data-single-seed="1"' in html
    build_report(config, results, tmp_path / "report3")
    assert 'data-single-seed="1"' not in (tmp_path / "report3/index.html").read_text()


def test_binary_interval_is_the_bootstrap_of_a_zero_one_mean():
    from chartrl.evaluate.intervals import bootstrap_mean
    from chartrl.report.helpers import binary_interval

    scores = [1.0] * 40 + [0.0] * 8
    boot = bootstrap_mean(scores, samples=20000, confidence=0.95, seed=0)
    low, high = binary_interval(40 / 48, 48, 0.95)
    assert low == pytest.approx(boot["low"], abs=1 / 48 + 1e-9)
    assert high == pytest.approx(boot["high"], abs=1 / 48 + 1e-9)


def test_the_rerank_table_shows_every_method_with_its_interval_and_costs(tmp_path):
    """A run with e4's rerank scores: the panel is filled, the table lists each method with its interval, its gap
    to greedy and its costs, and the absent external scorer is explained in place."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from chartrl.config import load_config
    from chartrl.evaluate.rerank import SAMPLE_SCHEMA, rerank_scores
    from chartrl.files import write_json
    from chartrl.report.build import build_report

    records = []
    for q in range(6):
        for k in range(3):
            answer = str(q) if (q + k) % 2 else "x"
            records.append(
                {
                    "id": f"q{q}", "sample": k, "question": f"Q{q}?", "ground_truth": str(q),
                    "data_source": "synthchart", "subset": "synthetic", "chart_type": "v_bar",
                    "turns": "[]", "tool_calls": 0, "tool_outcome": "none",
                    "final_response": f"<answer>{answer}</answer>", "answer": answer, "mean_logprob": -0.1 * k,
                    "prompt_tokens": 10, "response_tokens": 3, "total_tokens": 13, "truncated": False,
                }
            )  # fmt: skip
    results = tmp_path / "results"
    samples = results / "eval" / "e4" / "rerank.parquet"
    samples.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(records, schema=SAMPLE_SCHEMA), samples)
    greedy = {"items": [{"id": f"q{q}#0", "accuracy": float(q % 2)} for q in range(6)]}
    result = rerank_scores(
        samples, greedy, {}, scorer_name="rule", judge=None, methods=("scs", "confidence", "oracle"),
        bootstrap_samples=200, confidence=0.95, seed=0,
    )  # fmt: skip
    write_json(results / "eval" / "e4" / "rerank_rule.json", {**result, "greedy": True})
    config = load_config(root=REPO)
    build_report(config, results, tmp_path / "report")
    assert panel_problems(tmp_path / "report") == []
    metrics = json.loads((tmp_path / "report" / "metrics.json").read_text())
    panel = next(p for p in metrics["panels"] if p["id"] == "rerank")
    assert panel["filled"] and "external scorer" in panel["note"]
    methods = metrics["rerank"]["series"]["e4"]["scores"]["rule"]["methods"]
    assert "chosen" not in methods["scs"] and methods["oracle"]["costs"]["judge_items"] == 18
    page = (tmp_path / "report" / "index.html").read_text()
    table = page[page.index('data-rerank="e4/rule"') :]
    table = table[: table.index("</table>")]
    for title in (
        "greedy (the series",
        "self-consistency (maj@3)",
        "policy confidence",
        "oracle (pass@3)",
        "one sample",
    ):
        assert title in table
    low, high = methods["scs"]["low"], methods["scs"]["high"]
    assert f"[{low:.3f}, {high:.3f}]" in table
    # the published rule beside chartrl's: each chosen answer's, and the greedy file's absence of it said in place
    assert "published rule" in table and methods["scs"]["published_accuracy"] == methods["scs"]["accuracy"]
    assert methods["greedy"]["published_accuracy"] is None and "rerun its score job" in table


def test_the_limits_say_when_the_test_figures_read_part_of_the_split():
    from chartrl.config import load_config
    from chartrl.report.collect import limits

    def said(files, rows):
        """The limits' sentences about evaluate.limit, for a test split of ``rows`` questions."""
        metrics = {"judges": [], "data": {"synthchart": {"test": {"rows": rows, "charts": rows // 2}}}}
        lines = limits({**metrics, "training": {}, "missing": []}, load_config(files, root=REPO))
        return [line for line in lines if "evaluate.limit" in line]

    assert load_config(root=REPO).evaluate.limit == 200
    assert said([], 400) == [
        "Test figures (test accuracy, generations, their scores, reranking and test curves) read the first 200 of "
        "the 400 test questions of synthchart (evaluate.limit); training and validation do not read them."
    ]
    assert said([], 200) == []  # the limit leaves nothing out
    assert said([REPO / "config" / "gpu.yaml"], 2500) == []
