"""verl's generation dump, written by verl's own writer (``PPOTrainer._write_generations``, what
``trainer.validation_data_dir`` produces) with the fields our generation reward returns, converted into our
generations contract."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from chartrl.rollout.generations import SCHEMA
from chartrl.verl_backend.generations import DumpError, convert_dump, dump_file

TURN = "\nuser\n<tool_response>\n{obs}\n</tool_response>\nassistant\n"


def call(labels):
    body = json.dumps({"name": "focus_on_x_values_with_mask", "arguments": {"x_values": labels}})
    return f"<tool_call>\n{body}\n</tool_call>"


@pytest.fixture(scope="module")
def dumped(synth_rows, default_config, tmp_path_factory):
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    from chartrl.verl_backend.rewards import generation_record

    rows = [r for r in synth_rows["val"] if r.chart_type == "v_bar" and r.extra.get("about")][:2]
    first, second = rows
    outputs = [
        (first, call(first.extra["about"]) + TURN.format(obs="Masked.") + f"<answer>{first.answer}</answer>"),
        (first, "<answer>wrong</answer>"),  # the same question's second sample
        (second, '<tool_call>\n{"name": }\n</tool_call>'),  # malformed: verl ended the episode there
    ]
    records = [generation_record(r.data_source, text, r.answer, {"id": r.id}) for r, text in outputs]
    folder = tmp_path_factory.mktemp("dump")
    PPOTrainer._write_generations(
        inputs=[f"user\n{r.problem}\nassistant\n" for r, _ in outputs],
        outputs=[text for _, text in outputs],
        gts=[r.answer for r, _ in outputs],
        scores=[rec["score"] for rec in records],
        reward_extra_infos_dict={
            "reward": [rec["score"] for rec in records],
            **{key: [rec[key] for rec in records] for key in ("acc", "row_id")},
            "uid": [f"u{i}_0_0" for i in range(len(outputs))],
        },
        dump_path=str(folder / "dumps"),
        global_steps=0,
    )
    return {"rows": synth_rows["val"], "folder": folder, "first": first, "second": second}


def test_the_dump_becomes_the_generations_contract(dumped, tiny_model_dir, default_config):
    out = dumped["folder"] / "generations.parquet"
    records = convert_dump(
        dumped["folder"] / "dumps",
        dumped["rows"],
        out,
        tools=default_config.tools.names,
        max_calls=1,
        tokenizer_path=tiny_model_dir,
        image_dir=dumped["folder"] / "images",
        model="merged-e10",
    )
    table = pq.read_table(out)
    assert table.schema.equals(SCHEMA) and table.num_rows == 3
    executed, wrong, malformed = records
    first = dumped["first"]
    assert (executed["id"], executed["sample"], wrong["id"], wrong["sample"]) == (first.id, 0, first.id, 1)
    assert executed["tool_outcome"] == "executed" and executed["answer"] == first.answer
    assert len(json.loads(executed["edited_images"])) == 1  # the call was run again on the chart
    turns = json.loads(executed["turns"])
    assert [t["role"] for t in turns] == ["assistant", "tool", "assistant"] and turns[1]["image"] is True
    assert executed["response_tokens"] == turns[0]["tokens"] + turns[2]["tokens"]
    assert (wrong["tool_outcome"], wrong["tool_called"], wrong["answer"]) == ("none", False, "wrong")
    assert malformed["tool_outcome"] == "malformed" and json.loads(malformed["tool_error_kinds"]) == ["bad_json"]
    assert malformed["answer"] is None and malformed["model"] == "merged-e10"


def test_a_missing_or_foreign_dump_fails_loudly(dumped, tmp_path, tiny_model_dir):
    with pytest.raises(DumpError, match="did verl run with trainer.val_only"):
        dump_file(tmp_path)
    with pytest.raises(DumpError, match="names rows the data does not have"):
        convert_dump(
            dumped["folder"] / "dumps",
            dumped["rows"][:1],
            tmp_path / "g.parquet",
            tools=[],
            max_calls=1,
            tokenizer_path=tiny_model_dir,
            image_dir=tmp_path,
            model="m",
        )


def _convert(dumped, rows, out, tiny_model_dir, **kw):
    return convert_dump(
        dumped["folder"] / "dumps",
        rows,
        out,
        tools=[],
        max_calls=1,
        tokenizer_path=tiny_model_dir,
        image_dir=out.parent,
        model="m",
        **kw,
    )


def test_a_dump_that_does_not_cover_the_split_fails_naming_the_questions(dumped, tmp_path, tiny_model_dir, caplog):
    """verl drops an over-long prompt and a failed agent loop from its dump without a word: a test score over what
    came back would not be the split's. The dump holds 2 samples of the first question and 1 of the second."""
    first, second = dumped["first"], dumped["second"]
    third = next(r for r in dumped["rows"] if r.id not in (first.id, second.id))
    out = tmp_path / "g.parquet"
    with pytest.raises(DumpError, match=rf"covers 1 of the 2 questions .*2 samples each.*1 have fewer: {second.id}"):
        _convert(dumped, [first, second], out, tiny_model_dir, samples_per_question=2)
    with pytest.raises(
        DumpError, match=rf"covers 2 of the 3 questions.*1 have fewer: {third.id}.*1 have more: {first.id}"
    ):
        _convert(dumped, [first, second, third], out, tiny_model_dir, samples_per_question=1)
    assert not out.exists()  # nothing written that a scorer could read
    records = _convert(dumped, [first, second, third], out, tiny_model_dir)  # no count asked: the shortfall is logged
    assert len(records) == 3 and f"the dump lacks 1 of the 3 questions: {third.id}" in caplog.text
