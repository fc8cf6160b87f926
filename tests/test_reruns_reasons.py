"""How `chartrl reruns` tells why a job's params changed (chartrl.commands.reruns.param_changes): Snakemake keeps
each param of a finished job as its repr, unnamed, and reports the ones that no longer hold and the new ones."""

from __future__ import annotations

import json

import pytest

from chartrl.commands.reruns import param_changes


def code(commands: list[str], files: dict[str, str]) -> str:
    return repr(json.dumps({"commands": commands, "code": files}, sort_keys=True))


def spec(data: dict) -> str:
    return repr(json.dumps(data, sort_keys=True))


TRAIN = ["chartrl launch", "chartrl train"]
CASES = [
    # (recorded params that no longer hold, the job's new params, what chartrl reruns says)
    (
        [code(TRAIN, {"a.py": "1", "b.py": "2"})],
        [code(TRAIN, {"a.py": "1", "b.py": "3", "c.py": "4"})],
        ["code: b.py changed", "code: c.py added"],
    ),
    (
        [code(TRAIN, {"a.py": "1"})],
        [code(["chartrl launch", "chartrl verl train"], {"a.py": "1"})],
        ["commands: chartrl launch | chartrl train -> chartrl launch | chartrl verl train"],
    ),
    (
        [spec({"evaluate": {"year_rule": "standard", "seed": 0}, "series": {"id": "e4"}})],
        [spec({"evaluate": {"year_rule": "strict", "seed": 0}, "series": {"id": "e4"}})],
        ["config: evaluate.year_rule standard -> strict"],
    ),
    (
        [spec({"train": {"lr": 0.0001}}), code(TRAIN, {"a.py": "1"})],
        [spec({"train": {"lr": 0.0002, "seed": 1}}), code(TRAIN, {"a.py": "2"})],
        ["config: train.lr 0.0001 -> 0.0002", "config: train.seed added (1)", "code: a.py changed"],
    ),
    ([], [code(TRAIN, {"a.py": "1"})], ["code: no fingerprint recorded"]),  # results from before fingerprints
    (["'inline'"], ["'ray'"], ["param: ray"]),  # any other param: its new value
]


@pytest.mark.parametrize(("old", "new", "said"), CASES)
def test_what_changed_is_named(old, new, said):
    assert [line.split(" (results made")[0] for line in param_changes(old, new)] == said
