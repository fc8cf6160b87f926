"""What a command declares it reads (chartrl.commands.spec.Reads) is what its job's spec holds and all it may read:
each declaration names sections and keys the schema has, a spec is refused when it holds what the command does not
read, and reading a key the declaration leaves out fails the job instead of running it with the key's default."""

from __future__ import annotations

import json

import pytest

from chartrl.commands.spec import Reads, UndeclaredConfigKey, given_spec, read_job_spec
from chartrl.config import EvaluateConfig, config_schema, load_config, to_plain
from chartrl.errors import UsageError
from chartrl.workflow import commands, job_spec

from conftest import REPO

READS = Reads("example", sections=("rollout",), keys={"evaluate": ("seed", "limit")}, entries=("series",))


def test_every_declaration_names_sections_and_keys_of_the_schema():
    schema = config_schema()["properties"]
    declared = {command: reads for command, (_, reads) in commands().items() if reads is not None}
    assert {"train", "generate", "score", "data build", "warmstart", "verl train"} <= set(declared)
    wrong = []
    for command, reads in declared.items():
        assert reads.command == command, f"READS[{command!r}] says it is {reads.command!r}"
        for section in reads.section_names:
            if section not in schema:
                wrong.append(f"{command}: no section {section}")
                continue
            keys = {**reads.keys, **reads.all_but}.get(section, ())
            known = set(schema[section].get("properties", {}))
            wrong += [f"{command}: no key {section}.{key}" for key in keys if key not in known]
    assert not wrong, "\n".join(wrong)


def test_a_key_read_without_being_declared_fails_naming_it_and_the_fix():
    given = {"series": {"id": "e4"}, "evaluate": {"dataset": "synthchart", "seed": 3, "limit": 10}}
    spec = read_job_spec(json.dumps(given), READS)
    evaluate = EvaluateConfig(**spec["evaluate"])
    assert (evaluate.seed, evaluate.limit) == (3, 10)
    for read in (lambda: evaluate.curve_rows + 1, lambda: bool(evaluate.greedy), lambda: f"{evaluate.n}"):
        with pytest.raises(UndeclaredConfigKey, match=r"chartrl example read evaluate\.\w+, which it does not declare"):
            read()
    assert spec["rollout"]["n"] >= 1  # a section read whole: every key, defaults filled


def test_what_a_job_logs_is_what_it_was_given_and_reads():
    evaluate = {"dataset": "synthchart", "seed": 3, "threads": 2}  # threads: not declared
    text = json.dumps({"series": {"id": "e4"}, "evaluate": evaluate})
    logged = given_spec(text, read_job_spec(text, READS))
    assert logged["evaluate"] == {"dataset": "synthchart", "seed": 3} and logged["series"] == {"id": "e4"}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"train": {}}, "--spec holds train, which chartrl example does not read"),
        ("not json", "--spec is not JSON"),
    ],
)
def test_a_spec_the_command_does_not_read_is_refused(spec, message):
    with pytest.raises(UsageError, match=message):
        read_job_spec(spec if isinstance(spec, str) else json.dumps(spec), READS)


def test_the_workflow_builds_a_spec_from_the_declaration():
    config = load_config(root=REPO)
    series = {"id": "e4", **to_plain(config.resolved["series"]["e4"])}
    spec = json.loads(job_spec("score", config, series=series, of={"id": "e1"}))
    required = config_schema()["properties"]["evaluate"].get("required", [])
    assert set(spec) == {"series", "of", "judge", "evaluate"}
    assert set(spec["evaluate"]) == {"year_rule", *required}  # the keys score declares, and those the schema requires
    assert json.loads(job_spec("score", config, {"judge": None}, series=series, of={"id": "e1"})).keys() == {
        "series", "of", "evaluate"
    }  # a rule scorer's job: the judge left out
    with pytest.raises(KeyError, match="takes no chosen"):
        job_spec("score", config, chosen={})
