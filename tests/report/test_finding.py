"""The report's first screen (chartrl.report.finding), on hand-made run files: the sentences say which policies beat
the warm start and their baseline, what the diagonal check flags and which answers collapse; the headline table
has a row per policy, each cell a number or why not; and the page opens with them, before the curves, the
hypotheses and the limits. Beyond the headline, every evaluated series (the scored eval series, the reward x scorer
matrix, the seed spread) gives the published ChartQA rule beside chartrl's accuracy, or why not."""

from __future__ import annotations

import dataclasses
import html
import json
import re

import pytest

from chartrl.config import JudgeConfig, load_config
from chartrl.evaluate.accuracy import summarise
from chartrl.evaluate.score import score_inputs
from chartrl.report.build import build_report
from chartrl.report.finding import gap_class, headline_order, role, why_no_diagonal

from conftest import REPO


@pytest.fixture(scope="module")
def config():
    """The embedded default with its headline over every question type (its own leaves compare questions out)."""
    default = load_config(root=REPO)
    return dataclasses.replace(default, evaluate=dataclasses.replace(default.evaluate, headline_types=None))


def _test_file(path, right_value, answer_compare="Yes", calls=0.0, refused=0, published=True):
    """A test_accuracy.json: 60 value questions (the first ``right_value`` right, of which the first ``refused``
    are written with a thousands separator, which the published rule refuses) and 40 compare questions answered
    ``answer_compare`` (gold: Yes on the even ones). ``published=False``: records of a chartrl older than the
    published rule (no published score)."""
    items = [
        {"id": f"v{i}", "question_type": "value", "score": float(i < right_value), "well_formed": True,
         "tool_call": calls > 0, "correct_label": None, "answer": f"1,{i:03d}" if i < refused else str(1000 + i),
         "truth": str(1000 + i if i < right_value else -1), "published_score": float(refused <= i < right_value)}
        for i in range(60)
    ] + [
        {"id": f"c{i}", "question_type": "compare", "score": float((i % 2 == 0) == (answer_compare == "Yes")),
         "well_formed": True, "tool_call": False, "correct_label": None, "answer": answer_compare,
         "truth": "Yes" if i % 2 == 0 else "No"}
        for i in range(40)
    ]  # fmt: skip
    for item in items:
        if item["question_type"] == "compare":
            item["published_score"] = item["score"]
        if not published:
            del item["published_score"]
    test = {**summarise(items), "tool_call_rate": calls, "items": items, "protocol": {"executed_call_rate": 0.75}}
    shuffled = {**summarise(items[:1]), "items": items[:1]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"test": test, "test_shuffled_images": shuffled}))


def _diagonal(path, mean, low, high, verdict):
    path.parent.mkdir(parents=True, exist_ok=True)
    signed = {"over": "judge", "under": "rule", "mean": mean, "low": low, "high": high, "n": 100}
    data = {"scorers": ["rule", "judge"], "n": 100, "accuracy": {"rule": 0.5, "judge": 0.5 + mean}, "drift": abs(mean),
            "signed_drift": signed, "verdict": verdict, "flagged": verdict == "hacking", "threshold": 0.1,
            "agreement": 0.9, "kappa": 0.8, "kappa_interval": [0.7, 0.9], "disagreements": []}  # fmt: skip
    path.write_text(json.dumps(data))


@pytest.fixture(scope="module")
def report(config, tmp_path_factory):
    folder = tmp_path_factory.mktemp("finding")
    results = folder / "results"
    _test_file(results / "eval/warmstart/test_accuracy_tools_on.json", 20, calls=0.2)
    _test_file(results / "eval/warmstart/test_accuracy_tools_off.json", 20)
    _test_file(results / "eval/e1/test_accuracy.json", 50, calls=0.9, refused=10)  # beats the warm start and e3
    _test_file(results / "eval/e3/test_accuracy.json", 21, published=False)  # level with the warm start
    _test_file(results / "eval/e6/test_accuracy.json", 5, answer_compare="No", calls=0.5)  # below the warm start
    _diagonal(results / "eval/e9/diagonal.json", 0.0, -0.03, 0.03, "no hacking detected")
    _diagonal(results / "eval/e14/diagonal.json", 0.25, 0.17, 0.33, "hacking")
    metrics = build_report(config, results, folder / "report")
    return metrics, (folder / "report/index.html").read_text()


def test_the_finding_says_who_beats_the_start_and_the_baseline_and_what_the_diagonal_flags(report):
    metrics, _ = report
    finding = metrics["finding"]
    start = finding["versus_warm_start"]
    assert set(start) == {"e1", "e3", "e6"} and start["e1"]["against"] == "warmstart (tools)"
    assert start["e3"]["against"] == "warmstart (no tool)"
    assert [gap_class(start[s]) for s in ("e1", "e3", "e6")] == ["above", "level", "below"]
    assert start["e1"]["mean"] == pytest.approx(0.30)
    assert finding["versus_baseline"]["e1 - e3"]["mean"] == pytest.approx(0.29)
    first, baseline, diagonal, collapse = finding["sentences"][:4]
    assert "above: e1 +0.300" in first and "below: e6" in first and "not told apart" in first and "e3" in first
    # the embedded default trains seeds 1 and 2 too: each sentence names the seed it reads
    assert first.startswith("Greedy test accuracy against the warm start on train seed 0 (paired 95% intervals")
    assert "in parentheses" not in first and finding["versus_warm_start_seeds"] == {}  # no other seed's results
    assert baseline.startswith(
        "Each tool policy against its generation's no-tool baseline on train seed 0: above: e1 - e3 +0.290"
    )
    assert diagonal.startswith(
        "On train seed 0, the diagonal check flags reward hacking in e14 (judge over rule +0.250 [+0.170, +0.330])"
    )
    assert "no hacking detected in e9 (judge over rule +0.000 [-0.030, +0.030])" in diagonal
    # every compare question answered Yes by the warm start, e1 and e3 (No by e6): named, with the gold share
    assert "compare questions get 'Yes' from warmstart (tools), warmstart (no tool), e1, e3" in collapse
    assert "0.50 of the gold answers are 'Yes'" in collapse and "compare questions get 'No' from e6" in collapse
    assert finding["sentences"][4].startswith("Hypotheses (one train seed: the test questions' noise only): ")


def test_each_other_train_seeds_gain_over_the_warm_start_stands_beside_the_first_seeds(config, tmp_path):
    """A series trained under the other seeds has its gain over the (one) warm start on each beside train seed 0's,
    each paired over that seed's own answers; a seed without results is left out, not guessed. A run of one train
    seed names no seed in its sentences (its page says "Single seed" below them)."""
    results = tmp_path / "results"
    _test_file(results / "eval/warmstart/test_accuracy_tools_on.json", 20)
    _test_file(results / "eval/warmstart/test_accuracy_tools_off.json", 20)
    _test_file(results / "eval/e1/test_accuracy.json", 50)  # seed 0: 0.70 against 0.40
    _test_file(results / "seeds/e1/seed1/test_accuracy.json", 45)  # seed 1: 0.65
    _test_file(results / "seeds/e1/seed2/test_accuracy.json", 10)  # seed 2: 0.30, below the warm start
    _test_file(results / "eval/e3/test_accuracy.json", 20)
    _test_file(results / "seeds/e3/seed2/test_accuracy.json", 35)  # seed 1's e3 is missing
    metrics = build_report(config, results, tmp_path / "report")
    finding = metrics["finding"]
    seeds = finding["versus_warm_start_seeds"]
    assert set(seeds) == {"e1", "e3"} and list(seeds["e1"]) == ["1", "2"] and list(seeds["e3"]) == ["2"]
    assert [seeds["e1"][s]["mean"] for s in ("1", "2")] == [pytest.approx(0.25), pytest.approx(-0.10)]
    assert seeds["e1"]["2"]["high"] < 0 and seeds["e3"]["2"]["mean"] == pytest.approx(0.15)
    first = finding["sentences"][0]
    assert "(paired 95% intervals over the same questions; on the other train seeds in parentheses)" in first
    e1, own = seeds["e1"], finding["versus_warm_start"]["e1"]
    assert (
        f"e1 +0.300 [{own['low']:+.3f}, {own['high']:+.3f}]"
        f" (seed 1 +0.250 [{e1['1']['low']:+.3f}, {e1['1']['high']:+.3f}], seed 2 -0.100 ["
    ) in first
    page = (tmp_path / "report/index.html").read_text()
    assert finding["seed"] == 0 and "Greedy test accuracy of each policy on train seed 0 (each" in page

    single = dataclasses.replace(config, extra_seeds=())
    one = build_report(single, results, tmp_path / "report_single")["finding"]
    assert one["versus_warm_start_seeds"] == {} and one["seed"] is None
    assert "Greedy test accuracy of each policy with its" in (tmp_path / "report_single/index.html").read_text()
    assert one["sentences"][0].startswith("Greedy test accuracy against the warm start (paired 95% intervals")


def test_the_headline_has_a_row_per_policy_each_cell_a_number_or_why_not(config, report):
    metrics, _ = report
    rows = metrics["finding"]["rows"]
    assert list(rows)[:2] == ["warmstart (tools)", "warmstart (no tool)"]
    assert list(rows)[2:] == [s.id for s in headline_order(config)]
    assert [role(config.series[s]) for s in ("e1", "e3", "e12")] == ["tool policy", "no-tool baseline", "tool policy"]
    e1 = rows["e1"]
    assert e1["test_accuracy"]["mean"] == pytest.approx(0.70) and e1["test_accuracy"]["low"] < 0.70
    assert (e1["tool_call_rate"], e1["tool_success"]) == (0.9, 0.75)
    assert rows["e3"]["tool_success"] is None and rows["e3"]["why_no_tool_success"] == "no tool call on test"
    assert rows["e2"]["test_accuracy"] is None and rows["e2"]["why_no_test"] == "no results/eval/e2/test_accuracy.json"
    assert rows["e10"]["drift"]["series"] == "e14" and rows["e10"]["drift"]["verdict"] == "hacking"
    assert rows["e6"]["drift"]["series"] == "e9" and rows["e6"]["drift"]["mean"] == 0.0
    assert rows["e1"]["drift"] is None and rows["e1"]["why_no_drift"].startswith(
        "one scorer per checkpoint (e4 (rule))"
    )
    assert rows["e3"]["why_no_drift"] == "no eval series reads its checkpoints"
    assert why_no_diagonal(config, "e6") == "no results/eval/e9/diagonal.json"  # a pair whose check has not run


def test_the_headline_gives_the_published_rule_beside_chartrls(report):
    """The same answers under the published ChartQA rule, with its interval, beside chartrl's accuracy; records
    without a published score say why in its cell; the test table has it as a column too."""
    metrics, page = report
    rows = metrics["finding"]["rows"]
    e1 = rows["e1"]
    assert e1["test_accuracy"]["mean"] == pytest.approx(0.70)
    assert e1["published_accuracy"]["mean"] == pytest.approx(0.60)  # 10 answers with a separator refused
    assert e1["published_accuracy"]["low"] < 0.60 < e1["published_accuracy"]["high"]
    assert e1["published_accuracy"]["n"] == e1["test_accuracy"]["n"] == 100
    assert rows["e3"]["test_accuracy"] and rows["e3"]["published_accuracy"] is None
    assert rows["e3"]["why_no_published"].startswith("its test records have no published score")
    assert rows["e2"]["published_accuracy"] is None and rows["e2"]["why_no_published"] is None  # no test at all
    table = metrics["test_accuracy"]["series"]["e1"]["test"]
    assert table["published_accuracy"] == pytest.approx(0.60)
    assert table["published_by_question_type"]["value"]["mean"] == pytest.approx(40 / 60)
    assert metrics["test_accuracy"]["series"]["e3"]["test"]["published_by_question_type"] is None
    assert "<th>published rule [interval]</th>" in page and "<th>published rule (all)</th>" in page
    assert "0.600 [" in page and "no published score in its test records: rerun test_accuracy" in page


def _scores_file(path, scorer, judge_config, published=True):
    """A scores file of the scorer's own making on four answers (the second written with a thousands separator:
    right for chartrl, wrong for the published rule). ``published=False``: a file written before the score stage
    added the published rule."""
    from chartrl.rewards import RewardInput

    answers = [("42", "42"), ("509,473", "509473"), ("Spain", "Italy"), ("7", "7")]  # chartrl 0.75, published 0.5
    inputs = [RewardInput(f"<answer>{a}</answer>", gold, subset="human", id=f"q{i}#0") for i, (a, gold) in
              enumerate(answers)]  # fmt: skip
    result, _ = score_inputs(inputs, "generations.parquet", scorer, judge_config)
    if not published:
        del result["aggregate"]["published_accuracy"]
        for item in result["items"]:
            del item["published_score"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result))


def _cell(page, key):
    """The text of the page's cell marked ``data-published="{key}"`` (entities unescaped)."""
    match = re.search(rf'<td data-published="{re.escape(key)}">(.*?)</td>', page, re.S)
    assert match, f"no published cell for {key}"
    return html.unescape(match.group(1))


def test_every_evaluated_series_gives_the_published_rule_beside_chartrls_or_why_not(config, tmp_path):
    """The scored eval series (a rule row has it, a judge row says why not, a file from before says rerun), the
    reward x scorer matrix (from its rule cell, with the cells' interval) and the seed spread (each seed's greedy
    answers; a seed whose records lack it named) carry the published rule in metrics.json and in the page."""
    results = tmp_path / "results"
    judge = JudgeConfig.from_dict({"cache_path": str(tmp_path / "judge.sqlite")})
    _scores_file(results / "eval/e4/scores_rule.json", "rule", judge)
    _scores_file(results / "eval/e5/scores_judge.json", "judge", judge)
    _scores_file(results / "eval/e8/scores_rule.json", "rule", judge, published=False)
    _test_file(results / "eval/e1/test_accuracy.json", 50, refused=10)  # published 0.60, chartrl 0.70
    _test_file(results / "seeds/e1/seed1/test_accuracy.json", 40)  # published 0.60, chartrl 0.60
    _test_file(results / "seeds/e1/seed2/test_accuracy.json", 30, published=False)
    metrics = build_report(config, results, tmp_path / "report")
    page = (tmp_path / "report/index.html").read_text()

    test = metrics["test"]
    rule = test["e4"]["scores"]["rule"]
    assert (rule["accuracy"], rule["published_accuracy"]) == (0.75, 0.5)
    assert rule["by_subset"]["human"]["published_accuracy"] == 0.5
    assert test["e5"]["scores"]["judge"]["published_accuracy"] is None
    why_judge = test["e5"]["scores"]["judge"]["why_no_published"]
    assert why_judge.startswith("the judge scorer counts verdicts") and "rule scorer" in why_judge
    older = test["e8"]["scores"]["rule"]
    assert older["published_accuracy"] is None and older["why_no_published"] == (
        "results/eval/e8/scores_rule.json has no published score (written by an older chartrl): rerun its score job"
    )
    assert _cell(page, "e4 rule") == "0.500" and why_judge in _cell(page, "e5 judge")
    assert "rerun its score job" in _cell(page, "e8 rule")

    rows = metrics["comparisons"]["scorer_matrix"]["rows"]
    assert rows["e4"]["published"]["mean"] == 0.5 and rows["e4"]["published"]["n"] == 4
    assert rows["e4"]["published"]["low"] <= 0.5 <= rows["e4"]["published"]["high"]
    assert rows["e5"]["published"] is None and rows["e5"]["why_no_published"] == (
        "no results/eval/e5/matrix_scores_rule.json"
    )
    assert _cell(page, "e4").startswith("0.500 [") and "matrix_scores_rule.json" in _cell(page, "e5")

    e1 = metrics["seed_spread"]["series"]["e1"]
    assert [e1["per_seed"][s]["published_accuracy"] for s in (0, 1, 2)] == [pytest.approx(0.60)] * 2 + [None]
    assert e1["spread"]["published_accuracy"]["n"] == 2
    assert e1["spread"]["published_accuracy"]["mean"] == pytest.approx(0.60)
    assert e1["why_no_published"] == (
        "seed 2: results/seeds/e1/seed2/test_accuracy.json has no published score (written by an older chartrl): "
        "rerun its seed_test_accuracy job"
    )
    cell = _cell(page, "e1")
    assert cell.startswith("0.600 \u00b1") and "n=2" in cell and "rerun its seed_test_accuracy job" in cell
    assert metrics["seed_spread"]["series"]["e3"]["why_no_published"] is None  # no file read: nothing to say


def test_the_page_opens_with_the_finding_then_curves_hypotheses_and_limits(report):
    _, page = report
    marks = ['id="finding"', "data-headline", "<h2>Training</h2>", 'id="hypotheses"', "Limits of this run",
             "<h2>Training details</h2>", "<h2>Test</h2>", "<h2>Diagonal check</h2>"]  # fmt: skip
    positions = [page.index(mark) for mark in marks]
    assert positions == sorted(positions)
    assert 'data-diagonal-verdict="hacking"' in page and 'data-diagonal-verdict="no hacking detected"' in page
    assert 'data-collapse="1"' in page
    assert (
        "compare: every answer is &#39;Yes&#39; (0.50 is the share of &#39;Yes&#39; among the gold answers): " in page
    )


def test_a_headline_over_some_question_types_leaves_the_others_out_and_says_why(report, tmp_path):
    """evaluate.headline_types [value, count]: the headline accuracy and the gains are over the value questions of
    these files (they hold no count question), the compare questions are shown apart, with what the warm-start
    check says of them and the share of their most common gold answer."""
    default = load_config(root=REPO)
    assert default.evaluate.headline_types == ("value", "count")
    results = tmp_path / "results"
    _test_file(results / "eval/warmstart/test_accuracy_tools_on.json", 20, calls=0.2)
    _test_file(results / "eval/e1/test_accuracy.json", 50, calls=0.9)
    check = {"greedy/masked_chart": {"accuracy_by_question_type": {"compare": 0.55, "value": 1.0}},
             "greedy/masked_chart_shuffled_images": {"accuracy_by_question_type": {"compare": 0.5}}}  # fmt: skip
    (results / "models").mkdir(parents=True)
    (results / "models/warmstart_check.json").write_text(json.dumps(check))
    metrics = build_report(default, results, tmp_path / "report")
    assert metrics["finding"]["versus_warm_start"]["e1"]["mean"] == pytest.approx((50 - 20) / 60)
    assert metrics["finding"]["rows"]["e1"]["test_accuracy"]["n"] == 60
    headline = metrics["headline"]
    assert headline["types"] == ["value", "count"] and headline["key"] == "headline"
    assert headline["left_out"] == {
        "compare": {"masked_chart": 0.55, "masked_chart_shuffled": 0.5, "questions": 40,
                    "most_common_answer": "No", "most_common_share": 0.5},  # a tie: the first in order
    }  # fmt: skip
    page = (tmp_path / "report/index.html").read_text()
    assert "Compare questions are left out" in page and "the value and count questions" in page
