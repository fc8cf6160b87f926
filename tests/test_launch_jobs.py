"""What a launched job is given, without a cluster: the judge's keys only where its reward asks a judge."""

from __future__ import annotations

import pytest

from chartrl.launch import judge_key_names

OPENAI = {"backend": "openai", "api_key_env": "OPENROUTER_API_KEY", "panel": {"members": []}}
KEY_CASES = [
    # (judge settings, how the job grades answers, the key variables it gets)
    (OPENAI, "rule", []),  # a rule reward never holds a key
    (OPENAI, "own", []),  # a reward with its own grader (r1v, multiple_choice) neither
    (OPENAI, "judge", ["OPENROUTER_API_KEY"]),
    ({**OPENAI, "backend": "reference"}, "judge", []),  # the offline reference judge has no key
    # a panel's members inherit the judge's backend and key unless they set their own
    ({**OPENAI, "panel": {"members": [{"name": "a"}, {"name": "b", "model": "m"}]}}, "panel", ["OPENROUTER_API_KEY"]),
    (
        {**OPENAI, "panel": {"members": [{"name": "a"}, {"name": "b", "api_key_env": "OTHER_KEY"}]}},
        "panel",
        ["OPENROUTER_API_KEY", "OTHER_KEY"],
    ),
    ({**OPENAI, "panel": {"members": [{"name": "x", "backend": "reference"}]}}, "panel", []),  # all offline
    ({**OPENAI, "panel": {"members": [{"name": "x", "backend": "reference"}]}}, "judge", ["OPENROUTER_API_KEY"]),
]


@pytest.mark.parametrize("judge, accuracy, expected", KEY_CASES)
def test_judge_keys_follow_what_the_job_grades_with(judge, accuracy, expected):
    assert judge_key_names(judge, accuracy) == expected
