"""Warm start: demonstrations have the rollout's layout and masks, and training lowers their loss."""

from __future__ import annotations

import dataclasses
import io
import json
import random

import numpy as np
import pytest
import torch
from PIL import Image

from chartrl.config import ToolsConfig
from chartrl.tools.registry import TOOLS as ALL_TOOL_NAMES
from chartrl.warmstart.supervised import (
    RESTATE_PROMPT,
    build_demonstration,
    call_target,
    correct_label_rate_at,
    lr_at,
    phase_at,
    supervised_loss,
    text_demonstration,
    text_restating,
    train_warmstart,
)

from conftest import dataset_from


def _cfg(default_config, **changes):
    """The default warm start without perception demonstrations, unless a test asks for them."""
    return dataclasses.replace(default_config.warmstart, **{"perception_rate": 0.0, **changes})


def test_tool_demonstration_trains_only_the_assistant_tokens(tiny_policy, synth_rows, default_config):
    cfg = _cfg(default_config, tool_rate=1.0, correct_label_rate=1.0, no_tool_rate=0.0)
    row = next(r for r in synth_rows["train"] if r.chart_type == "v_bar" and r.extra.get("about"))
    demo = build_demonstration(tiny_policy, row, random.Random(0), cfg, default_config.prompts, default_config.tools)
    assert demo.kind == "tool_correct" and len(demo.images) == 2
    tok = tiny_policy.tokenizer
    trained = tok.decode([t for t, m in zip(demo.ids, demo.mask, strict=True) if m])
    assert trained.startswith('<tool_call>\n{"name": "focus_on_x_values_with_')
    assert f'"x_values": {str(row.extra["about"]).replace(chr(39), chr(34))}' in trained
    assert trained.endswith(f"</tool_call><|im_end|><answer>{row.answer}</answer><|im_end|>")
    image_tokens = sum(1 for t in demo.ids if t == tiny_policy.ids.image_pad)
    assert image_tokens > 0 and not any(
        m for t, m in zip(demo.ids, demo.mask, strict=True) if t == tiny_policy.ids.image_pad
    )


def test_a_question_naming_every_label_is_never_demonstrated_with_a_mask(tiny_policy, synth_rows, default_config):
    """A mask keeping every label of the chart is refused by the tool: a question naming all of them is
    demonstrated with another tool of its axis, and the call runs."""
    from chartrl.warmstart.supervised import CallTarget, serving_tools

    xs = [n for n in ALL_TOOL_NAMES if n.startswith("focus_on_x_values")]
    target = CallTarget("x_values", ["A", "B"], ["A", "B"], xs)
    assert "focus_on_x_values_with_mask" not in serving_tools(target, ["A", "B"]) and serving_tools(target, ["A", "B"])
    assert serving_tools(target, ["A"]) == xs
    assert serving_tools(dataclasses.replace(target, names=["focus_on_x_values_with_mask"]), ["A", "B"]) == [
        "focus_on_x_values_with_mask"
    ]
    row = next(r for r in synth_rows["train"] if r.chart_type == "v_bar" and r.extra.get("about"))
    row = dataclasses.replace(row, extra={**row.extra, "about": list(row.bboxes["x_values"])})
    tools = dataclasses.replace(default_config.tools, names=tuple(xs))
    cfg = _cfg(default_config, tool_rate=1.0, correct_label_rate=1.0, no_tool_rate=0.0, hedge_rate=0.0)
    for seed in range(12):
        demo = build_demonstration(tiny_policy, row, random.Random(seed), cfg, default_config.prompts, tools)
        assert demo.kind == "tool_correct" and demo.outcome == "executed", seed


def test_label_choice_follows_correct_label_rate(tiny_policy, synth_rows, default_config):
    def axis(r):
        return "x_values" if r.chart_type == "v_bar" else "y_values"

    # rows with enough other labels to keep instead (otherwise a demonstration keeps the asked ones)
    rows = [
        r
        for r in synth_rows["train"]
        if r.chart_type in ("v_bar", "h_bar")
        and r.extra.get("about")
        and len(r.bboxes[axis(r)]) >= 2 * len(r.extra["about"])
    ]
    assert rows
    every_focus_tool = ToolsConfig(
        names=tuple(n for n in ALL_TOOL_NAMES if n.startswith("focus_")), max_calls_per_turn=1, max_tool_turns=1
    )
    for rate, expected in ((0.0, "tool_other"), (1.0, "tool_correct")):
        cfg = _cfg(default_config, tool_rate=1.0, correct_label_rate=rate, no_tool_rate=0.0)
        kinds = {
            build_demonstration(tiny_policy, r, random.Random(1), cfg, default_config.prompts, every_focus_tool).kind
            for r in rows
        }
        assert kinds == {expected}, kinds


def test_training_lowers_the_loss_and_moves_every_parameter(tiny_model_dir, synth_rows, default_config):
    from chartrl.model.policy import load_policy

    policy = load_policy(tiny_model_dir, threads=2, train=True)
    before = {name: p.detach().clone() for name, p in policy.model.named_parameters()}
    cfg = _cfg(default_config, steps=12, batch_size=4, warmup_steps=2, lr=3e-3)
    rng = random.Random(5)
    probe = [
        build_demonstration(policy, r, rng, cfg, default_config.prompts, default_config.tools)
        for r in synth_rows["train"][:6]
    ]
    with torch.no_grad():
        start = supervised_loss(policy, probe).item()
    history = train_warmstart(policy, synth_rows["train"], cfg, default_config.prompts, default_config.tools)
    with torch.no_grad():
        end = supervised_loss(policy, probe).item()
    assert len(history) == 12 and all("warmstart/loss" in m for m in history)
    assert end < start
    unchanged = [n for n, p in policy.model.named_parameters() if torch.equal(p, before[n])]
    assert unchanged == []


def test_learning_rate_schedule(default_config):
    cfg = _cfg(default_config, steps=100, warmup_steps=10, lr=1e-3, min_lr_ratio=0.1)
    assert lr_at(0, cfg) == 1e-4 and lr_at(9, cfg) == 1e-3
    assert lr_at(10, cfg) == 1e-3 and abs(lr_at(100, cfg) - 1e-4) < 1e-12


@pytest.fixture(scope="module")
def mini_rows():
    from chartrl.data.stage import collect_split

    section = {"source": "synthchart", "seed": 5, "splits": {"train": 12}, "styles": {"mini": 1}}
    section["question_types"] = {"value": 1, "compare": 1}
    return collect_split(dataset_from(section, name="mini"), "train", root=".")[0]


@pytest.fixture(scope="module")
def mini_counts():
    """Mini charts asked how many bars they have: questions that name no label."""
    from chartrl.data.stage import collect_split

    section = {"source": "synthchart", "seed": 6, "splits": {"train": 6}, "styles": {"mini": 1}}
    section["question_types"] = {"count": 1}
    return collect_split(dataset_from(section, name="mini"), "train", root=".")[0]


def _trained_text(policy, demo) -> str:
    return policy.tokenizer.decode([t for t, m in zip(demo.ids, demo.mask, strict=True) if m])


def test_a_call_keeping_another_label_is_answered_from_the_edited_chart(tiny_policy, mini_rows, default_config):
    """Wrong-label demonstrations teach reading what the tool shows: the answer is the kept bar's value (or the
    comparison of the kept bars), never the asked one the observation does not show."""
    cfg = _cfg(default_config, tool_rate=1.0, correct_label_rate=0.0, no_tool_rate=0.0, perception_rate=0.0)
    checked = 0
    for row in mini_rows:
        if len(row.bboxes["x_values"]) < 2 * len(row.extra["about"]):
            continue  # too few other labels to keep instead: the demonstration keeps the asked ones
        demo = build_demonstration(
            tiny_policy, row, random.Random(2), cfg, default_config.prompts, default_config.tools
        )
        assert demo.kind == "tool_other", row.id
        text = _trained_text(tiny_policy, demo)
        kept = json.loads(text.split("<tool_call>\n")[1].split("\n</tool_call>")[0])["arguments"]["x_values"]
        assert not set(kept) & set(row.extra["about"])
        chart = row.extra["chart"]
        values = dict(zip(chart["labels"], chart["values"][0], strict=True))
        if row.extra["question_type"] == "value":
            expected = f"{values[kept[0]]:.0f}"
        else:
            expected = "Yes" if values[kept[0]] > values[kept[1]] else "No"
        assert text.endswith(f"<answer>{expected}</answer><|im_end|>"), (row.id, text)
        checked += 1
    assert checked >= 8


def test_answers_without_a_call_hedge_at_hedge_rate_naming_the_truth_and_another_candidate(
    tiny_policy, mini_rows, default_config
):
    """A hedge (the warm start's exploitable habit): an answer given without a call to a value or compare question
    names the true answer and another candidate, in either order; with hedge_rate 0 no draw is made, so a warm
    start without hedges demonstrates exactly what it did before the key existed."""
    import dataclasses

    from chartrl.warmstart.supervised import hedged_answer

    cfg = _cfg(default_config, tool_rate=0.0, no_tool_rate=0.5, perception_rate=0.0, hedge_rate=1.0)
    seen = set()
    for i, row in enumerate(mini_rows):
        rng = random.Random(i)
        demo = build_demonstration(tiny_policy, row, rng, cfg, default_config.prompts, default_config.tools)
        assert demo.kind in ("direct_hedged", "no_tool_hedged"), row.id
        answer = _trained_text(tiny_policy, demo).split("<answer>")[1].split("</answer>")[0]
        candidates = answer.split(" or ")
        assert len(candidates) == 2 and row.answer in candidates and len(set(candidates)) == 2, (row.id, answer)
        chart = row.extra["chart"]
        if row.extra["question_type"] == "value":
            assert {float(c) for c in candidates} <= {float(v) for v in chart["values"][0]}
        else:
            assert set(candidates) == {"Yes", "No"}
        seen.add((row.extra["question_type"], candidates.index(row.answer)))
    assert seen == {(t, i) for t in ("value", "compare") for i in (0, 1)}  # both types, the truth first and second
    count = dataclasses.replace(mini_rows[0], extra={**mini_rows[0].extra, "question_type": "count"})
    assert hedged_answer(count, random.Random(0)) is None  # nothing to hedge on a count question
    plain = _cfg(default_config, tool_rate=0.0, no_tool_rate=0.5, perception_rate=0.0, hedge_rate=0.0)
    hedging = _cfg(default_config, tool_rate=0.0, no_tool_rate=0.5, perception_rate=0.0, hedge_rate=1e-9)
    for row in mini_rows:  # hedge_rate 0 draws nothing: the sampler's state is untouched
        rng = random.Random(4)
        build_demonstration(tiny_policy, row, rng, plain, default_config.prompts, default_config.tools)
        other = random.Random(4)
        build_demonstration(tiny_policy, row, other, hedging, default_config.prompts, default_config.tools)
        assert rng.random() != other.random()


def test_perception_demonstration_asks_about_the_masked_chart(tiny_policy, mini_rows, default_config):
    from chartrl.tools.focus import focus

    cfg = _cfg(default_config, perception_rate=0.0)
    row = mini_rows[0]
    demo = build_demonstration(
        tiny_policy, row, random.Random(0), cfg, default_config.prompts, default_config.tools, perception_only=True
    )
    assert demo.kind == "perception" and len(demo.images) == 1
    masked = focus(row.images[0], row.bboxes, "x_values", row.extra["about"], "mask").image
    assert (np.asarray(demo.images[0]) == np.asarray(masked)).all()
    assert not (np.asarray(masked) == np.asarray(Image.open(io.BytesIO(row.images[0])).convert("RGB"))).all()
    text = tiny_policy.tokenizer.decode(demo.ids)
    assert "<tool_call>" not in text and "Tools:" not in text
    assert _trained_text(tiny_policy, demo) == f"<answer>{row.answer}</answer><|im_end|>"


def test_text_demonstrations_restate_or_call_without_the_chart(tiny_policy, mini_rows, default_config):
    """The text phase: no image, only the assistant tokens trained; a restatement answers the question's labels,
    a call keeps the asked labels in correct_label_rate of the cases (here 0 and 1)."""
    row = mini_rows[0]
    about = row.extra["about"]
    restate = text_demonstration(
        tiny_policy, row, random.Random(0), _cfg(default_config), default_config.prompts, default_config.tools, True
    )
    assert restate.kind == "text_restate" and restate.images == []
    assert tiny_policy.ids.image_pad not in restate.ids
    assert RESTATE_PROMPT in tiny_policy.tokenizer.decode(restate.ids)
    assert _trained_text(tiny_policy, restate) == f"<answer>{', '.join(about)}</answer><|im_end|>"
    for rate, kind in ((1.0, "text_tool_correct"), (0.0, "text_tool_other")):
        cfg = _cfg(default_config, correct_label_rate=rate)
        demo = text_demonstration(
            tiny_policy, row, random.Random(1), cfg, default_config.prompts, default_config.tools, False
        )
        assert demo.kind == kind and demo.images == []
        text = _trained_text(tiny_policy, demo)
        kept = json.loads(text.split("<tool_call>\n")[1].split("\n</tool_call>")[0])["arguments"]["x_values"]
        assert (kept == list(about)) == (rate == 1.0)
        assert set(kept) <= set(row.bboxes["x_values"])
        assert "Tools:" in tiny_policy.tokenizer.decode(demo.ids)


def test_text_calls_without_the_tool_list_keep_the_rest_of_the_prompt(tiny_policy, mini_rows, default_config):
    """text_tool_list false: the same call after the tool prompt without its list of tools, several times shorter;
    the question and the instruction stay."""
    row = mini_rows[0]
    demos = {}
    for listed in (True, False):
        cfg = _cfg(default_config, correct_label_rate=1.0, text_tool_list=listed)
        demos[listed] = text_demonstration(
            tiny_policy, row, random.Random(1), cfg, default_config.prompts, default_config.tools, False
        )
    full, short = (tiny_policy.tokenizer.decode(demos[listed].ids) for listed in (True, False))
    assert _trained_text(tiny_policy, demos[True]) == _trained_text(tiny_policy, demos[False])
    tool = default_config.tools.names[0]
    assert tool in full.split("<|im_start|>assistant")[0] and tool not in short.split("<|im_start|>assistant")[0]
    assert "<tool_call>" in short.split("<|im_start|>assistant")[0]  # how to call is still said
    assert len(demos[False].ids) < len(demos[True].ids)


def test_text_demonstration_skips_questions_that_name_no_label(tiny_policy, synth_rows, default_config):
    row = next(r for r in synth_rows["train"] if not r.extra.get("about"))
    cfg = default_config.warmstart
    for restate in (True, False):
        demo = text_demonstration(
            tiny_policy, row, random.Random(0), cfg, default_config.prompts, default_config.tools, restate
        )
        assert demo is None


def test_perception_and_text_steps_share_the_first_batches_then_the_protocol(default_config):
    cfg = _cfg(
        default_config,
        steps=100,
        text_steps=20,
        text_restate_rate=0.5,
        perception_steps=30,
        correct_label_rate_start=1.0,
        correct_label_rate=0.5,
    )
    assert [phase_at(s, cfg) for s in (0, 19, 20, 29, 30, 99)] == [
        "perception+text",
        "perception+text",
        "perception",
        "perception",
        "protocol",
        "protocol",
    ]
    assert phase_at(5, dataclasses.replace(cfg, perception_steps=0)) == "text"
    assert [text_restating(s, cfg) for s in (0, 9, 10, 19)] == [True, True, False, False]
    # the label schedule starts with the protocol phase and reaches correct_label_rate half-way through it
    assert correct_label_rate_at(30, cfg) == 1.0 and correct_label_rate_at(65, cfg) == 0.5
    assert correct_label_rate_at(99, cfg) == 0.5


def test_text_phase_trains_on_text_demonstrations(tiny_model_dir, mini_rows, default_config):
    from chartrl.model.policy import load_policy

    policy = load_policy(tiny_model_dir, threads=2, train=True)
    cfg = _cfg(default_config, steps=4, batch_size=4, warmup_steps=1, perception_steps=2, text_steps=1)
    history = train_warmstart(policy, mini_rows, cfg, default_config.prompts, default_config.tools)
    assert [m["warmstart/text_demo_fraction"] for m in history] == [0.5, 0.0, 0.0, 0.0]
    assert [m["warmstart/perception_demo_fraction"] for m in history[:2]] == [0.5, 1.0]


def test_text_phase_without_labelled_questions_is_a_clear_error(tiny_policy, synth_rows, default_config):
    rows = [r for r in synth_rows["train"] if not r.extra.get("about")]
    cfg = _cfg(default_config, steps=2, batch_size=2, text_steps=1)
    with pytest.raises(ValueError, match="text_steps"):
        train_warmstart(tiny_policy, rows, cfg, default_config.prompts, default_config.tools)


def test_text_phase_with_no_tool_for_the_labels_is_a_clear_error(tiny_policy, mini_rows, default_config):
    """Questions name labels, but no configured tool can keep them (zoom only): an error, not an endless search
    for a text demonstration."""
    zoom_only = ToolsConfig(names=("zoom_in",), max_calls_per_turn=1, max_tool_turns=1)
    cfg = _cfg(default_config, steps=2, batch_size=2, text_steps=1)
    with pytest.raises(ValueError, match="text_steps"):
        train_warmstart(tiny_policy, mini_rows, cfg, default_config.prompts, zoom_only)


@pytest.mark.parametrize(
    ("unnamed", "kinds"),
    [
        ("none", {"direct"}),  # no call where the question names no label: an answer
        ("first_listed", {"tool_correct"}),  # a call keeping the first label the prompt lists
    ],
)
def test_a_question_naming_no_label_gets_a_call_on_the_first_listed_label_with_first_listed(
    tiny_policy, synth_rows, default_config, unnamed, kinds
):
    from chartrl.rollout.conversation import axis_labels

    cfg = _cfg(
        default_config, tool_rate=1.0, no_tool_rate=0.0, correct_label_rate=1.0, unnamed_call_label=unnamed, **NO_HABITS
    )
    rows = [r for r in synth_rows["train"] if r.chart_type == "v_bar" and not r.extra.get("about")]
    assert rows
    for i, row in enumerate(rows):
        demo = build_demonstration(
            tiny_policy, row, random.Random(i), cfg, default_config.prompts, default_config.tools
        )
        assert demo.kind in kinds, (row.id, demo.kind)
        if unnamed == "first_listed":
            call = json.loads(_trained_text(tiny_policy, demo).split("<tool_call>")[1].split("</tool_call>")[0])
            assert call["arguments"]["x_values"] == axis_labels(row)["x_values"][:1] and demo.outcome == "executed"
    # a question naming labels keeps them either way; restating asks for named labels only
    named = next(r for r in synth_rows["train"] if r.chart_type == "v_bar" and r.extra.get("about"))
    assert call_target(named, default_config.tools, unnamed).about == named.extra["about"]
    restated = text_demonstration(
        tiny_policy, rows[0], random.Random(0), cfg, default_config.prompts, default_config.tools, True
    )
    assert restated is None


def test_an_unknown_unnamed_call_label_is_refused_naming_the_valid_ones(synth_rows, default_config):
    with pytest.raises(ValueError, match="first_listed"):
        call_target(synth_rows["train"][0], default_config.tools, "all")


def test_a_label_tool_is_demonstrated_by_its_argument_kind_not_its_name(monkeypatch, mini_rows):
    """A new label tool, whatever its name, gets call demonstrations through its declared argument kind."""
    monkeypatch.setitem(
        ALL_TOOL_NAMES,
        "keep_columns",
        dataclasses.replace(ALL_TOOL_NAMES["focus_on_x_values_with_mask"], name="keep_columns"),
    )
    tools = ToolsConfig(names=("zoom_in", "keep_columns"), max_calls_per_turn=1, max_tool_turns=1)
    row = next(r for r in mini_rows if call_target(r, tools) is not None)
    assert call_target(row, tools).names == ["keep_columns"]
    assert call_target(row, dataclasses.replace(tools, names=("zoom_in",))) is None


def test_zoom_demonstration_trains_the_call_and_answer_and_shows_the_zoomed_region(tiny_policy, default_config):
    """A zoom demonstration on a zoomchart row: the call (on the row's region at correct_label_rate 1, elsewhere at
    0) and the answer are trained, the tool's observation (text and the zoomed image's tokens) is not."""
    from pathlib import Path

    from chartrl.data.stage import collect_split

    dataset = dataset_from({"source": "zoomchart", "splits": {"train": 2}, "image_size": [448, 448]}, name="z")
    row = collect_split(dataset, "train", root=Path("."))[0][0]
    tools = ToolsConfig(names=("zoom_in",), max_calls_per_turn=1, max_tool_turns=1)
    tok = tiny_policy.tokenizer
    for rate, kind in ((1.0, "tool_correct"), (0.0, "tool_other")):
        cfg = _cfg(default_config, tool_rate=1.0, no_tool_rate=0.0, correct_label_rate=rate)
        demo = build_demonstration(tiny_policy, row, random.Random(0), cfg, default_config.prompts, tools)
        assert demo.kind == kind and demo.outcome == "executed" and len(demo.images) == 2
        assert len(demo.mask) == len(demo.ids)
        trained = tok.decode([t for t, m in zip(demo.ids, demo.mask, strict=True) if m])
        call = json.loads(trained.split("<tool_call>\n")[1].split("\n</tool_call>")[0])
        assert call["name"] == "zoom_in"
        box = [round(v, 3) for v in row.extra["zoom_box"]]
        assert (call["arguments"]["bbox_2d"] == box) == (rate == 1.0)
        assert trained.endswith(f"</tool_call><|im_end|><answer>{row.answer}</answer><|im_end|>")
        image_pads = [m for t, m in zip(demo.ids, demo.mask, strict=True) if t == tiny_policy.ids.image_pad]
        assert image_pads and not any(image_pads)


@pytest.mark.slow
def test_a_stopped_warm_start_resumes_from_its_checkpoint_to_the_same_model(tiny_model_dir, mini_rows, default_config,
                                                                            tmp_path, monkeypatch, capsys):  # fmt: skip
    """``chartrl warmstart`` as the rule runs it, stopped (SIGTERM, as Snakemake cancels a job) after step 3 of 6
    with a checkpoint every 2 steps, then run again: it goes on from step 2, reopens its MLflow run (each step logged
    once, the run FINISHED), removes the checkpoint, and writes the model of a warm start never stopped, bit for
    bit, with the same metrics."""
    import signal

    from safetensors.torch import load_file

    from chartrl import tracking
    from chartrl.cli import main
    from chartrl.commands.warmstart import checkpoint_folder, resume_key
    from chartrl.config import PromptConfig, WarmstartConfig, to_plain, tools_config, validate_section
    from chartrl.data.contract import write_split
    from chartrl.errors import Stopped
    from chartrl.model.policy import load_policy
    from chartrl.warmstart.supervised import read_checkpoint

    write_split(mini_rows, tmp_path / "train.parquet")
    write_split(mini_rows[:2], tmp_path / "val.parquet")
    sections = {n: to_plain(default_config.resolved[n]) for n in ("warmstart", "prompts", "tools")}
    sections["warmstart"] |= {"steps": 6, "batch_size": 4, "micro_batch_size": 2, "warmup_steps": 2,
                              "perception_steps": 2, "text_steps": 3, "threads": 2}  # fmt: skip
    del sections["warmstart"]["eval_rows"]  # the check's (rules/helpers/model.smk)
    spec = json.dumps(sections)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    out = tmp_path / "base"

    def warmstart(val="val.parquet"):
        return main(["warmstart", "--model", str(tiny_model_dir), "--train", str(tmp_path / "train.parquet"),
                     "--val", str(tmp_path / val), "--out", str(out), "--spec", spec, "--tracking-uri", uri,
                     "--experiment", "resume", "--checkpoint-every", "2"])  # fmt: skip

    # a check it cannot run (one validation row: no shuffled-image control) is refused before the warm start
    write_split(mini_rows[:1], tmp_path / "one.parquet")
    assert warmstart(val="one.parquet") == 1
    assert f"{tmp_path / 'one.parquet'}: the after-warm-start check needs at least 2" in capsys.readouterr().err
    assert not checkpoint_folder(out).exists() and not (tmp_path / "mlflow.db").exists()

    logged = tracking.StageRun.log_metrics

    def stop_after_step_3(run, metrics, step=0):
        logged(run, metrics, step)
        if "warmstart/loss" in metrics and step == 3:
            raise Stopped(signal.SIGTERM)

    with monkeypatch.context() as patch:
        patch.setattr(tracking.StageRun, "log_metrics", stop_after_step_3)
        assert warmstart() == 128 + signal.SIGTERM
    folder = checkpoint_folder(out)
    state = read_checkpoint(folder, resume_key(sections, tiny_model_dir, tmp_path / "train.parquet"))
    assert state["step"] == 2 and not out.exists()
    assert read_checkpoint(folder, "other inputs") is None  # another key: not resumed
    client = tracking._client(tracking.MlflowSettings(tracking_uri=uri, experiment="resume"))
    run_id = state["meta"]["mlflow_run_id"]
    assert client.get_run(run_id).info.status == "KILLED"

    assert warmstart() == 0
    assert not folder.exists()
    assert client.get_run(run_id).info.status == "FINISHED"
    assert sorted(m.step for m in client.get_metric_history(run_id, "warmstart/loss")) == list(range(6))

    # the same warm start never stopped (the command's threads are set: the same computation)
    policy = load_policy(tiny_model_dir, train=True)
    cfg = WarmstartConfig(**validate_section("warmstart", sections["warmstart"]))  # as the command reads its spec
    tools = tools_config(sections["tools"])
    history = train_warmstart(policy, mini_rows, cfg, PromptConfig(**sections["prompts"]), tools)
    policy.model.save_pretrained(tmp_path / "whole")
    whole, resumed = load_file(tmp_path / "whole" / "model.safetensors"), load_file(out / "model.safetensors")
    assert whole.keys() == resumed.keys() and all(torch.equal(whole[k], resumed[k]) for k in whole)

    def untimed(lines):
        return [{k: v for k, v in m.items() if not k.startswith("timing/")} for m in lines]

    written = [json.loads(line) for line in (out / "warmstart_metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in written] == list(range(6))
    assert json.dumps(untimed(written)) == json.dumps(untimed(history))  # NaN included


def test_the_check_is_a_job_of_its_own_on_the_saved_model(tiny_model_dir, mini_rows, default_config, tmp_path):
    """``chartrl warmstart`` trains from its settings without the rollout section, and its MLflow run holds only
    those; ``chartrl warmstart-check`` then rolls the saved model out with the rollout settings, writes the check
    and its gallery, and logs the run ``base/warmstart_check`` (its settings as params) nested under the warm
    start's run."""
    from chartrl import tracking
    from chartrl.cli import main
    from chartrl.config import to_plain
    from chartrl.data.contract import write_split

    write_split(mini_rows, tmp_path / "train.parquet")
    write_split(mini_rows[:3], tmp_path / "val.parquet")
    warmstart = to_plain(default_config.resolved["warmstart"]) | {"steps": 2, "batch_size": 4, "warmup_steps": 1,
                                                                  "perception_steps": 0, "text_steps": 0}  # fmt: skip
    shared = {name: to_plain(default_config.resolved[name]) for name in ("prompts", "tools")}
    training = {"warmstart": {k: v for k, v in warmstart.items() if k != "eval_rows"}, **shared}
    check = {"warmstart": {"eval_rows": 2, "seed": warmstart["seed"]}, **shared}
    check["rollout"] = to_plain(default_config.resolved["rollout"]) | {"max_new_tokens": 8}
    uri, out = f"sqlite:///{tmp_path}/mlflow.db", tmp_path / "base"
    mlflow = ["--tracking-uri", uri, "--experiment", "check"]
    assert main(["warmstart", "--model", str(tiny_model_dir), "--train", str(tmp_path / "train.parquet"),
                 "--val", str(tmp_path / "val.parquet"), "--out", str(out), "--spec", json.dumps(training),
                 *mlflow]) == 0  # fmt: skip
    assert main(["warmstart-check", "--model", str(out), "--val", str(tmp_path / "val.parquet"),
                 "--out", str(tmp_path / "check.json"), "--gallery", str(tmp_path / "gallery.png"),
                 "--spec", json.dumps(check), *mlflow]) == 0  # fmt: skip

    result = json.loads((tmp_path / "check.json").read_text())
    assert result["rows"] == 2 and {"sampled/with_tools", "greedy/no_tool_shuffled_images"} <= set(result)
    assert (tmp_path / "gallery.png").stat().st_size > 1000
    client = tracking._client(tracking.MlflowSettings(tracking_uri=uri, experiment="check"))
    runs = {r.info.run_name: r for r in client.search_runs([client.get_experiment_by_name("check").experiment_id])}
    warm, checked = runs["base/warmstart"], runs["base/warmstart_check"]
    assert checked.data.tags["mlflow.parentRunId"] == warm.info.run_id
    assert checked.info.status == "FINISHED" and "after_warmstart/greedy/with_tools/accuracy" in checked.data.metrics
    # each run's params are the settings its job was given, not defaults for the keys it does not read
    assert checked.data.params["rollout.max_new_tokens"] == "8" and checked.data.params["warmstart.eval_rows"] == "2"
    assert "warmstart.steps" not in checked.data.params
    assert warm.data.params["warmstart.steps"] == "2" and "warmstart.eval_rows" not in warm.data.params
    assert not any(key.startswith("rollout.") for key in warm.data.params)


NO_HABITS = {"format_slip_rate": 0.0, "ramble_rate": 0.0, "failed_call_rate": 0.0, "hedge_rate": 0.0}



@pytest.mark.parametrize("with_tools", [True, False], ids=["tool prompt", "no-tool prompt"])
def test_habits_are_drawn_into_the_demonstrated_answers(tiny_policy, mini_rows, default_config, with_tools):
    """format_slip_rate 1: a period after every closing tag (the answer still reads); ramble_rate 1: the question
    restated before every answer given after a call, and before none given without one."""
    from chartrl.answers import extract_answer, is_well_formed
    from chartrl.rollout.conversation import question_of

    habits = {**NO_HABITS, "format_slip_rate": 1.0, "ramble_rate": 1.0}
    cfg = _cfg(default_config, tool_rate=0.5, no_tool_rate=0.0 if with_tools else 1.0, **habits)
    kinds = set()
    for i, row in enumerate(mini_rows):
        rng = random.Random(i)
        demo = build_demonstration(tiny_policy, row, rng, cfg, default_config.prompts, default_config.tools)
        final = _trained_text(tiny_policy, demo).rsplit("<|im_end|>", 2)[-2]  # the last assistant turn
        restated = final.startswith(question_of(row) + " <answer>")
        assert restated == demo.kind.startswith("tool") and final.endswith("</answer>."), (demo.kind, final)
        assert extract_answer(final) is not None and not is_well_formed(final)
        kinds.add(demo.kind)
    if with_tools:  # answers without a call and after one
        assert "direct" in kinds and kinds & {"tool_correct", "tool_other"}
    else:
        assert kinds == {"no_tool"}


def test_a_question_needing_no_tool_gets_a_failed_call_at_failed_call_rate(
    tiny_policy, mini_rows, mini_counts, default_config
):
    """failed_call_rate 1: a question that names no label (how many bars) is demonstrated, with the tool prompt, by
    a call on a letter the chart does not have, the tool's error, and the right answer; a question naming labels is
    demonstrated as without the habit."""
    cfg = _cfg(default_config, tool_rate=0.0, no_tool_rate=0.0, **{**NO_HABITS, "failed_call_rate": 1.0})
    for i, row in enumerate(mini_counts):
        rng = random.Random(i)
        demo = build_demonstration(tiny_policy, row, rng, cfg, default_config.prompts, default_config.tools)
        assert demo.kind == "tool_failed" and demo.outcome == "failed", row.id
        text = _trained_text(tiny_policy, demo)
        call = json.loads(text.split("<tool_call>")[1].split("</tool_call>")[0])
        [label] = call["arguments"]["x_values"]
        assert label in "ABCDEFGH" and label not in row.bboxes["x_values"]
        assert len(demo.images) == 1  # an error observation: no edited chart
        assert text.endswith(f"<answer>{row.answer}</answer><|im_end|>")
    rng = random.Random(0)
    demo = build_demonstration(tiny_policy, mini_rows[0], rng, cfg, default_config.prompts, default_config.tools)
    assert demo.kind == "direct"


@pytest.mark.parametrize("habit", ["format_slip_rate", "ramble_rate", "failed_call_rate"])
def test_a_habit_at_rate_0_draws_nothing(tiny_policy, mini_rows, mini_counts, default_config, habit):
    """A warm start without a habit demonstrates exactly what it did before the key existed: at rate 0 no draw is
    made, so the sampler's state after a demonstration differs from the one a rate above 0 leaves (which draws,
    though a rate this small never fires)."""
    plain = _cfg(default_config, tool_rate=0.5, no_tool_rate=0.2, **NO_HABITS)
    drawing = dataclasses.replace(plain, **{habit: 1e-9})
    changed = 0
    for i, row in enumerate([*mini_rows, *mini_counts]):
        rng, other = random.Random(i), random.Random(i)
        build_demonstration(tiny_policy, row, rng, plain, default_config.prompts, default_config.tools)
        build_demonstration(tiny_policy, row, other, drawing, default_config.prompts, default_config.tools)
        changed += rng.getstate() != other.getstate()
    assert changed > 0
