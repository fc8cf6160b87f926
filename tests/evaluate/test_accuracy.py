"""The per-question-type summary of a policy on the test split."""

from __future__ import annotations

import pytest

from chartrl.evaluate.accuracy import summarise


def _record(qtype, score, *, well_formed=True, tool_call=False, correct_label=None):
    return {
        "id": f"{qtype}-{score}-{tool_call}-{correct_label}",
        "question_type": qtype,
        "score": score,
        "well_formed": well_formed,
        "tool_call": tool_call,
        "correct_label": correct_label,
    }


def test_summary_by_question_type_and_label_share():
    records = [
        _record("value", 1.0, tool_call=True, correct_label=True),
        _record("value", 0.0, tool_call=True, correct_label=False),
        _record("value", 0.0, tool_call=True, correct_label=False),
        _record("count", 1.0),  # no labels named: not in the correct-label share
        _record("count", 0.0, well_formed=False, tool_call=True),
    ]
    out = summarise(records)
    assert out["n"] == 5 and out["accuracy"] == pytest.approx(0.4)
    assert out["accuracy_by_question_type"] == {"count": 0.5, "value": pytest.approx(1 / 3)}
    assert out["n_by_question_type"] == {"count": 2, "value": 3}
    assert out["format_rate"] == pytest.approx(0.8) and out["tool_call_rate"] == pytest.approx(0.8)
    assert out["correct_label_share"] == pytest.approx(1 / 3)


def test_published_accuracy_beside_chartrls_and_none_for_older_records():
    """Each record's score under the published ChartQA rule is summarised beside chartrl's; records written before
    the published score existed give None (not a number computed from part of them)."""
    records = [
        {**_record("value", 1.0), "published_score": 0.0},  # e.g. "509,473" for "509473"
        {**_record("value", 1.0), "published_score": 1.0},
        {**_record("count", 0.0), "published_score": 0.0},
    ]
    out = summarise(records)
    assert out["accuracy"] == pytest.approx(2 / 3) and out["published_accuracy"] == pytest.approx(1 / 3)
    assert out["published_accuracy_by_question_type"] == {"count": 0.0, "value": 0.5}
    older = summarise([*records, _record("value", 1.0)])
    assert older["published_accuracy"] is None and older["published_accuracy_by_question_type"] is None
    assert older["accuracy"] == pytest.approx(3 / 4)


def test_habits_are_shares_of_the_answers_that_say():
    """What v2's terms and v3's gate act on, per answer: format errors, preambles (a restated question before the
    answer), calls that failed or did not parse, calls that ran before a wrong answer. A record written without a
    field (an older run) is left out of that share, not counted as a habit."""
    records = [
        {**_record("value", 1.0, tool_call=True), "preamble": True, "tool_outcome": "executed"},
        {**_record("value", 0.0, tool_call=True), "preamble": False, "tool_outcome": "executed"},
        {**_record("value", 0.0, tool_call=True, well_formed=False), "preamble": False, "tool_outcome": "failed"},
        {**_record("count", 1.0), "preamble": None, "tool_outcome": "malformed"},  # no answer tag: no preamble
        _record("count", 1.0),  # an older record: neither field
    ]
    out = summarise(records)
    assert out["format_error_rate"] == pytest.approx(1 / 5)
    assert out["preamble_rate"] == pytest.approx(1 / 3)
    assert out["failed_call_rate"] == pytest.approx(2 / 4)
    assert out["unhelpful_call_rate"] == pytest.approx(1 / 4)


def test_episode_habits_match_the_record_habits(warm_model_dir, synth_rows, default_config):
    """The trainer's per-step habit rates (rollout statistics of episodes) and the test summary's (records of the
    same episodes) are the same numbers."""
    import torch

    from chartrl.evaluate.accuracy import episode_record
    from chartrl.model.policy import load_policy
    from chartrl.rollout.episodes import run_episodes
    from chartrl.rollout.sampling import SamplingParams
    from chartrl.rollout.statistics import rollout_statistics

    policy = load_policy(warm_model_dir, threads=2)
    torch.manual_seed(0)
    episodes = run_episodes(
        policy,
        synth_rows["val"][:8],
        with_tools=True,
        n=2,
        params=SamplingParams(max_new_tokens=default_config.rollout.max_new_tokens),
        prompt_config=default_config.prompts,
        tools=default_config.tools,
        batch_size=16,
    )
    statistics, summary = rollout_statistics(episodes), summarise([episode_record(e) for e in episodes])
    for name in ("preamble_rate", "failed_call_rate", "unhelpful_call_rate"):
        assert statistics[name] == pytest.approx(summary[name] or 0.0), name
    wrong = [e.sampled_tokens for e, r in zip(episodes, map(episode_record, episodes), strict=True) if not r["score"]]
    assert statistics["wrong_answer_tokens"] == pytest.approx(sum(wrong) / len(wrong) if wrong else 0.0)


def test_no_calls_means_no_label_share():
    assert summarise([_record("value", 1.0)])["correct_label_share"] is None


def test_greedy_shuffled_and_sampled_conditions(warm_model_dir, synth_rows, default_config):
    """Greedy decoding is deterministic, so the greedy condition repeats exactly; the sampled condition reads the
    same questions at temperature 1 (different answers from the greedy ones on some of them)."""
    from chartrl.evaluate.accuracy import CONDITIONS, test_accuracy
    from chartrl.model.policy import load_policy

    policy = load_policy(warm_model_dir, threads=2)
    rows = synth_rows["val"][:8]
    kwargs = dict(
        with_tools=True,
        prompts=default_config.prompts,
        tools=default_config.tools,
        max_new_tokens=default_config.rollout.max_new_tokens,
        batch_size=8,
        seed=0,
    )
    first, second = test_accuracy(policy, rows, **kwargs), test_accuracy(policy, rows, **kwargs, temperature=1.0)
    assert set(CONDITIONS) <= set(first) and [i["id"] for i in first["test_sampled"]["items"]] == [r.id for r in rows]
    assert first["test"]["items"] == second["test"]["items"]
    assert first["test_sampled"]["items"] == second["test_sampled"]["items"]  # seeded
    greedy_episodes = first["test"]["protocol"]
    assert greedy_episodes and first["test_sampled"]["protocol"] != greedy_episodes
    # the tool-placebo control: the same questions, greedy, each call shown the unedited chart
    assert [i["id"] for i in first["test_placebo"]["items"]] == [r.id for r in rows]
    assert first["year_rule"] == "standard"
    no_tool = test_accuracy(policy, rows[:2], **{**kwargs, "with_tools": False}, conditions=("test", "test_placebo"))
    assert "test_placebo" not in no_tool and "test_shuffled_images" not in no_tool and no_tool["test"]["n"] == 2
    with pytest.raises(ValueError, match="valid conditions"):
        test_accuracy(policy, rows, **kwargs, conditions=("test_blank",))


def test_generations_in_the_contract_read_as_the_local_rollouts_are():
    """What the report reads on the verl backend: a question's first sample in the generations contract."""
    import json
    from types import SimpleNamespace

    from chartrl.evaluate.accuracy import generation_test_records

    def call(labels):
        arguments = {"x_values": labels}  # a calling turn's text, as the contract's tool_calls hold them
        return (
            f"<tool_call>\n{json.dumps({'name': 'focus_on_x_values_with_mask', 'arguments': arguments})}\n</tool_call>"
        )

    rows = [
        SimpleNamespace(id="a", answer="4", extra={"question_type": "value", "about": ["2019"]}),
        SimpleNamespace(id="b", answer="7", extra={"question_type": "count"}),
        SimpleNamespace(id="c", answer="2", extra={"question_type": "value"}),
    ]
    generations = [
        # question a: sample 1 (ignored) listed first; sample 0 called, the call kept the asked label, right
        {"id": "a", "sample": 1, "tool_calls": "[]", "tool_error_kinds": "[]", "tool_called": False,
         "answer": "0", "final_response": "<answer>0</answer>"},
        {"id": "a", "sample": 0, "tool_calls": json.dumps([call(["2020"]), call(["2019"])]),
         "tool_error_kinds": json.dumps(["label_not_on_chart", ""]), "tool_called": True, "tool_outcome": "failed",
         "response_tokens": 31, "answer": "4", "final_response": "<answer>4</answer>"},
        # question b: no answer tag
        {"id": "b", "sample": 0, "tool_calls": "[]", "tool_error_kinds": "[]", "tool_called": False,
         "answer": None, "final_response": "seven"},
        # question c: exactly 5% off, right by chartrl's rule, wrong by the published one (its float rounding)
        {"id": "c", "sample": 0, "tool_calls": "[]", "tool_error_kinds": "[]", "tool_called": False,
         "answer": "2.1", "final_response": "<answer>2.1</answer>"},
    ]  # fmt: skip
    records = {r["id"]: r for r in generation_test_records(generations, rows)}
    assert records["a"] == {
        "id": "a", "question_type": "value", "score": 1.0, "published_score": 1.0,  # chartrl's rule, the published
        "well_formed": True, "tool_call": True,
        "correct_label": True,  # the executed call's labels, not the refused one's
        "answer": "4", "truth": "4",  # what it answered, beside the gold answer (the report's collapse check)
        "response": "<answer>4</answer>", "preamble": False,  # the answer and what came before it
        "tool_outcome": "failed", "sampled_tokens": 31,  # the episode's worst call outcome and its length
    }  # fmt: skip
    assert records["b"]["score"] == 0.0 and not records["b"]["well_formed"] and records["b"]["correct_label"] is None
    assert (records["b"]["answer"], records["b"]["truth"]) == (None, "7")
    assert (records["c"]["score"], records["c"]["published_score"]) == (1.0, 0.0)
    summary = summarise(list(records.values()))
    assert summary["accuracy_by_question_type"] == {"count": 0.0, "value": 1.0}
    assert summary["published_accuracy_by_question_type"] == {"count": 0.0, "value": 0.5}
    assert summary["published_accuracy"] == pytest.approx(1 / 3)
