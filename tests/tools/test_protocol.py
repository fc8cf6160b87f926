"""The tool-call parser: a table of model outputs with the calls or the error each gives, then hypothesis with
10,000 generated malformed calls (none may raise; each gives an error, or a call where the text happens to be
valid)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from chartrl.tools import (
    ERROR_KINDS,
    TOOLS,
    ParseResult,
    ToolCall,
    format_tool_call,
    parse_tool_calls,
    run_tool_text,
)
from chartrl.tools.observations import MAX_OBSERVATION
from chartrl.tools.registry import check_arguments

from conftest import examples

MASK = "focus_on_x_values_with_mask"
LABELS = {"x_values": ["2019", "2020", "United States"], "y_values": []}


def call_text(name: str = MASK, arguments: object = None, **fields) -> str:
    body = {"name": name, "arguments": {"x_values": ["2019"]} if arguments is None else arguments, **fields}
    return f"<tool_call>{json.dumps(body)}</tool_call>"


VALID = [
    # the canonical Qwen2.5 layout: newlines inside the tags
    ('<tool_call>\n{"name": "zoom_in", "arguments": {"bbox_2d": [0.1, 0.2, 0.5, 0.6]}}\n</tool_call>', None),
    # reasoning before the call, spaces and tabs inside the tags
    ("I need 2019.\n<tool_call> \t" + call_text()[11:-12] + "  </tool_call>", None),
    # text after the call is ignored
    (call_text() + " and then I will answer.", None),
    # extra top-level keys are ignored, as verl's hermes parser ignores them
    (call_text(id="call_1"), None),
    # unicode labels pass through unchanged (the parser does not match labels without `labels`)
    (call_text(arguments={"x_values": ["Zürich", "東京"]}), None),
    # labels checked against the sample: case and whitespace do not matter
    (call_text(arguments={"x_values": [" united  states "]}), LABELS),
    # integer coordinates are numbers (a zoom on the whole image)
    (call_text("zoom_in", {"bbox_2d": [0, 0, 1, 1]}), None),
]


@pytest.mark.parametrize("text,labels", VALID)
def test_valid_calls_parse(text, labels):
    result = parse_tool_calls(text, labels=labels)
    assert result.error is None and result.called and len(result.calls) == 1
    call = result.calls[0]
    assert call.name in TOOLS and check_arguments(TOOLS[call.name], call.arguments) is None


def test_a_call_round_trips_through_format_tool_call():
    text = format_tool_call(MASK, {"x_values": ["2019", "2020"]})
    assert text.startswith("<tool_call>\n{") and text.endswith("}\n</tool_call>")
    assert parse_tool_calls(text).calls == (ToolCall(MASK, {"x_values": ["2019", "2020"]}),)


@pytest.mark.parametrize(
    "text,kind,message",
    [
        # no tag at all: not a call, not an error
        ("The answer is 42.", None, None),
        # the empty string
        ("", None, None),
        # an opening tag never closed (generation cut off mid-call)
        ('<tool_call>{"name": "zoom_in", "arguments": {"bbox_2d": [0.1, ', "bad_tag", "never closed"),
        # a closing tag without an opening one
        ('{"name": "zoom_in"}</tool_call>', "bad_tag", "without an opening"),
        # the tags in the wrong order
        ("</tool_call>{}<tool_call>", "bad_tag", "comes before its"),
        # a call nested in a call
        ("<tool_call><tool_call>" + call_text()[11:] + "</tool_call>", "bad_tag", "inside another"),
        # nothing between the tags
        ("<tool_call></tool_call>", "bad_json", "not valid JSON"),
        # JSON cut off inside the tags
        ('<tool_call>{"name": "zoom_in", "arguments": {</tool_call>', "bad_json", "not valid JSON"),
        # single quotes: a Python dict, not JSON
        ("<tool_call>{'name': 'zoom_in', 'arguments': {}}</tool_call>", "bad_json", "not valid JSON"),
        # NaN is not JSON (Python's json module would accept it)
        ('<tool_call>{"name": "zoom_in", "arguments": {"bbox_2d": [NaN, 0, 1, 1]}}</tool_call>', "bad_json", "NaN"),
        # a JSON list instead of an object
        ("<tool_call>[1, 2]</tool_call>", "bad_json", 'a JSON object with "name" and "arguments", got an array'),
        # the OpenAI layout with "parameters" instead of "arguments"
        (
            '<tool_call>{"name": "zoom_in", "parameters": {}}</tool_call>',
            "bad_json",
            "got an object with keys 'name', 'parameters'",
        ),
        # a name that is not a string
        ('<tool_call>{"name": 3, "arguments": {}}</tool_call>', "bad_json", '"name" must be a string'),
        # an unknown tool: the error lists the tools offered
        (call_text("zoom"), "unknown_tool", "unknown tool 'zoom'; available tools: focus_on_x_values_with_draw"),
        # the tool name in another case is another name
        (call_text(MASK.upper()), "unknown_tool", "unknown tool"),
        # arguments as a JSON string (some models double-encode them)
        (call_text(arguments='{"x_values": ["2019"]}'), "bad_arguments", "must be a JSON object, got a string"),
        # a label list given as one string
        (call_text(arguments={"x_values": "2019"}), "bad_arguments", "argument 'x_values' must be an array"),
        # a year as a number
        (call_text(arguments={"x_values": [2019]}), "bad_arguments", "must hold only strings; item 0 is a number"),
        # the other axis' argument name
        (call_text(arguments={"y_values": ["2019"]}), "bad_arguments", "missing argument 'x_values'"),
        # an argument the tool does not take
        (
            call_text(arguments={"x_values": ["2019"], "colour": "red"}),
            "bad_arguments",
            "unexpected argument 'colour'",
        ),
        # a zoom box of three numbers
        (call_text("zoom_in", {"bbox_2d": [0.1, 0.2, 0.3]}), "bad_arguments", "exactly 4 items, got 3"),
        # booleans are not numbers
        (call_text("zoom_in", {"bbox_2d": [True, 0, 1, 1]}), "bad_arguments", "item 0 is a boolean"),
        # two calls when one is allowed
        (call_text() + call_text(), "too_many_calls", "2 tool calls; at most 1 call per turn"),
        # JSON nested past Python's recursion limit
        ("<tool_call>" + "[" * 100_000 + "]" * 100_000 + "</tool_call>", "bad_json", "not valid JSON"),
    ],
)
def test_parse_errors(text, kind, message):
    result = parse_tool_calls(text)
    assert result.calls == ()
    if kind is None:
        assert result.error is None and not result.called
        return
    assert result.called and result.error.kind == kind
    assert message in result.error.message, result.error.message
    assert "\n" not in result.error.observation


@pytest.mark.parametrize(
    "text,kind,message",
    [
        # a label the chart does not have
        (call_text(arguments={"x_values": ["2018"]}), "unknown_label", "unknown x value '2018'; valid x values:"),
        # an empty selection
        (call_text(arguments={"x_values": []}), "empty_selection", "x_values is empty"),
        # keeping every label: nothing would be masked
        (call_text(arguments={"x_values": ["2019", "2020", "United States"]}), "selects_everything", "masks nothing"),
        # a y tool on a chart with x labels only
        (
            call_text("focus_on_y_values_with_draw", {"y_values": ["2019"]}),
            "no_boxes",
            "this chart has no y values",
        ),
    ],
)
def test_label_errors_when_the_sample_labels_are_given(text, kind, message):
    result = parse_tool_calls(text, labels=LABELS)
    assert result.error.kind == kind and message in result.error.message
    assert parse_tool_calls(text).error is None  # without labels the same call parses


def test_only_the_offered_tools_can_be_called():
    result = parse_tool_calls(call_text("zoom_in", {"bbox_2d": [0, 0, 1, 1]}), tool_names=[MASK])
    assert result.error.kind == "unknown_tool"
    assert result.error.message.endswith(f"available tools: {MASK}")
    # two calls are fine when two are allowed
    assert len(parse_tool_calls(call_text() + call_text(), max_calls=2).calls) == 2


def test_unknown_tool_names_offered_are_a_programming_error():
    with pytest.raises(KeyError, match="unknown tool 'mask'; known tools: focus_on_x_values_with_draw, "):
        parse_tool_calls("", tool_names=["mask"])


CHART = Image.new("RGB", (48, 32), "white")
BOXES = {
    "x_values": {"2019": [0.0, 0.5, 0.4, 1.0], "2020": [0.4, 0.5, 1.0, 1.0], "United States": [0.0, 0.0, 1.0, 0.5]},
    "y_values": {},
}


@pytest.mark.parametrize(
    "text,outcome,error_kind,observation",
    [
        # no call: nothing to show, no image
        ("The answer is 7.", "none", None, ""),
        # a call that runs
        (call_text(), "executed", None, "Masked all x values except 2019."),
        # a malformed call
        (call_text("zoom"), "malformed", "unknown_tool", "Error: unknown tool 'zoom'"),
        # a well-formed call the tool refuses
        (call_text(arguments={"x_values": ["2018"]}), "failed", "unknown_label", "Error: unknown x value '2018'"),
    ],
)
def test_run_tool_text_outcomes(text, outcome, error_kind, observation):
    result = run_tool_text(text, CHART, BOXES)
    assert result.outcome == outcome and result.error_kind == error_kind
    assert result.observation.startswith(observation)
    assert (result.image is not None) == (outcome == "executed")
    assert result.called == (outcome != "none") and result.parsed == (outcome in ("executed", "failed"))


def test_run_tool_text_runs_each_call_on_the_original_chart():
    chart = Image.new("RGB", (480, 320), (10, 20, 30))
    text = call_text() + call_text("zoom_in", {"bbox_2d": [0.5, 0.5, 1.0, 1.0]})
    result = run_tool_text(text, chart, json.dumps(BOXES), max_calls=2)
    assert result.outcome == "executed" and len(result.images) == 2
    # the zoom shows the original chart's corner, not the masked (white) one
    assert result.images[1].size == (480, 320) and result.images[1].getcolors() == [(480 * 320, (10, 20, 30))]
    assert result.observation == "Masked all x values except 2019. Zoomed in on [0.5, 0.5, 1, 1]."


# ----------------------------------------------------------------------------------------------------------------
# Property-based: 10,000 generated calls, most of them malformed
# ----------------------------------------------------------------------------------------------------------------

# Hypothesis spends its time drawing, not parsing: the pieces are drawn from fixed corpora of nasty values (a few
# draws per example) so that 10,000 examples run in seconds.
NAMES = st.sampled_from(
    [*TOOLS, *TOOLS, "zoom", "focus_on_x_values", "", " zoom_in", "ZOOM_IN", "focus_on_x_values_with_mask\n", "東京"]
)
ARGUMENTS = st.sampled_from(
    [
        {"x_values": ["2019"]},
        {"x_values": ["2019", "2020"]},
        {"x_values": [" united states "]},
        {"x_values": ["2019", "2020", "United States"]},
        {"x_values": []},
        {"x_values": ["2018"]},
        {"x_values": ["東京", "Zürich", "\u0000", "a\nb"]},
        {"x_values": "2019"},
        {"x_values": [2019]},
        {"x_values": [None]},
        {"x_values": [["2019"]]},
        {"x_values": {"2019": True}},
        {"x_values": ["2019"], "colour": "red"},
        {"y_values": ["2019"]},
        {"y_values": []},
        {"bbox_2d": [0.1, 0.2, 0.5, 0.6]},
        {"bbox_2d": [0, 0, 1, 1]},
        {"bbox_2d": [0.5, 0.5, 0.5, 0.5]},
        {"bbox_2d": [0.6, 0.2, 0.1, 0.5]},
        {"bbox_2d": [-0.1, 0.0, 1.2, 1.0]},
        {"bbox_2d": [100, 50, 400, 300]},
        {"bbox_2d": [0.1, 0.2, 0.3]},
        {"bbox_2d": [0.1, 0.2, 0.3, 0.4, 0.5]},
        {"bbox_2d": ["0.1", "0.2", "0.3", "0.4"]},
        {"bbox_2d": [True, False, True, True]},
        {"bbox_2d": [1e308, -1e308, 1e-308, 0]},
        {"bbox_2d": "[0.1, 0.2, 0.3, 0.4]"},
        {"bbox_2d": [0.1, 0.2, 0.3, 0.4], "label": "the bar"},
        {},
        None,
        [],
        "x_values",
        42,
        [{"x_values": ["2019"]}],
    ]
)
RAW_BODIES = st.sampled_from(
    [
        "",
        "{",
        "}",
        "null",
        "[NaN]",
        "Infinity",
        '{"name": "zoom_in"}',
        '{"arguments": {}}',
        "{'name': 'zoom_in', 'arguments': {}}",
        '{"name": "zoom_in", "arguments": {"bbox_2d": [0.1, 0.2, 0.5, 0.6]},}',
        '{"name": "zoom_in", "arguments": {"bbox_2d": [0.1, 0.2, 0.5, 0.6]}} {"name": "zoom_in"}',
        '{"name": "focus_on_x_values_with_mask", "arguments": {"x_values": ["2019"]}',
        "1" * 5000,
        "[" * 5000 + "]" * 5000,
        '"\ud800"',
        "<tool_call>",
    ]
)
LABEL_LISTS = st.sampled_from(
    [[], ["2019"], ["2019", "2020"], [" united states "], ["2019", "2020", "United States"], ["2018"], ["東京", "a\nb"]]
)
BOXES_2D = st.sampled_from(
    [[0.1, 0.2, 0.5, 0.6], [0, 0, 1, 1], [0.5, 0.5, 0.5, 0.5], [0.6, 0.2, 0.1, 0.5], [-1, 0, 2, 1]]
)


@st.composite
def matched_calls(draw) -> str:
    """A call whose arguments fit its tool's schema: it parses, then succeeds or fails on the chart's labels."""
    name = draw(st.sampled_from(list(TOOLS)))
    axis = TOOLS[name].axis
    arguments = {"bbox_2d": draw(BOXES_2D)} if axis is None else {axis: draw(LABEL_LISTS)}
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=draw(st.booleans()))


BODIES = st.one_of(
    matched_calls(),
    matched_calls(),
    st.builds(lambda name, arguments: json.dumps({"name": name, "arguments": arguments}), NAMES, ARGUMENTS),
    st.builds(
        lambda name, arguments: json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False),
        NAMES,
        ARGUMENTS,
    ),
    RAW_BODIES,
    st.text(max_size=12),
)
SPACES = st.sampled_from(["", "\n", " ", "\t", "\n\n  "])
PROSE = st.sampled_from(["", "Let me look. ", "<tool_call>", "</tool_call>", "<answer>7</answer>", "\n", "東京 "])


@st.composite
def model_texts(draw) -> str:
    bodies = [draw(BODIES) for _ in range(draw(st.sampled_from([1, 1, 1, 1, 1, 0, 2, 3])))]
    space = draw(SPACES)
    text = "".join(f"<tool_call>{space}{body}{space}</tool_call>" for body in bodies)
    mutation = draw(
        st.sampled_from(["none"] * 6 + ["truncate", "drop_tag", "nest", "prose", "huge", "unicode", "splice"])
    )
    if mutation == "truncate":  # generation stopped mid-call
        text = text[: draw(st.integers(0, len(text)))]
    elif mutation == "drop_tag":
        tag = draw(st.sampled_from(["<tool_call>", "</tool_call>"]))
        text = text.replace(tag, "", 1)
    elif mutation == "nest":
        text = f"<tool_call>{text}</tool_call>"
    elif mutation == "prose":  # reasoning around the calls, possibly mentioning tags
        text = draw(PROSE) + text + draw(PROSE)
    elif mutation == "huge":  # a huge label, or a huge text after the call
        blob = draw(st.sampled_from(["a", "é", "\n", "[", "{", "<tool_call>"])) * draw(st.integers(1_000, 100_000))
        text = text.replace("2019", blob, 1) if "2019" in text else text + blob
    elif mutation == "unicode":
        text = draw(st.text(max_size=8)) + text
    elif mutation == "splice" and text:  # random characters inserted somewhere
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(["{", "}", '"', ",", "<", "/", "\\", "\n", "]"])) + text[at:]
    return text


def check_parse(result: ParseResult, text: str, labels, max_calls: int) -> None:
    assert isinstance(result, ParseResult)
    has_tag = "<tool_call>" in text or "</tool_call>" in text
    assert result.called == has_tag
    if not has_tag:
        assert result.calls == () and result.error is None
        return
    assert (result.error is None) != (result.calls == ()), "a tagged text gives calls or an error, never both"
    if result.error is not None:
        assert result.error.kind in ERROR_KINDS
        assert "\n" not in result.error.observation and len(result.error.observation) <= MAX_OBSERVATION + 10
        return
    assert 1 <= len(result.calls) <= max_calls
    for call in result.calls:
        assert call.name in TOOLS and check_arguments(TOOLS[call.name], call.arguments) is None
        if labels is not None and TOOLS[call.name].axis is not None:
            assert parse_tool_calls(format_tool_call(call.name, call.arguments), labels=labels).error is None


@settings(
    max_examples=examples(10_000),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(text=model_texts(), with_labels=st.booleans(), max_calls=st.integers(1, 2))
def test_no_model_output_makes_the_parser_raise(text, with_labels, max_calls):
    labels = LABELS if with_labels else None
    check_parse(parse_tool_calls(text, labels=labels, max_calls=max_calls), text, labels, max_calls)


@settings(
    max_examples=examples(1_000),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(text=model_texts())
def test_no_model_output_makes_a_tool_raise(text):
    outcome = run_tool_text(text, CHART, BOXES, max_calls=2)
    assert outcome.outcome in ("none", "executed", "malformed", "failed")
    assert "\n" not in outcome.observation
    if outcome.outcome == "executed":
        assert outcome.image is not None and outcome.image.mode == "RGB"
    if outcome.error_kind is not None:
        assert outcome.error_kind in ERROR_KINDS


@settings(max_examples=examples(300), deadline=None)
@given(
    name=st.sampled_from([name for name in TOOLS if name != "zoom_in"]),
    labels=st.lists(st.sampled_from(list(BOXES["x_values"])), min_size=1, max_size=2, unique=True),
    before=st.text(max_size=30).filter(lambda t: "tool_call>" not in t),
    inside=SPACES,
)
def test_generated_valid_calls_parse_to_themselves(name, labels, before, inside):
    axis = TOOLS[name].axis
    body = json.dumps({"name": name, "arguments": {axis: labels}}, ensure_ascii=False)
    result = parse_tool_calls(f"{before}<tool_call>{inside}{body}{inside}</tool_call>")
    assert result.error is None and result.calls == (ToolCall(name, {axis: labels}),)
