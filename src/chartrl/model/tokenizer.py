"""A byte-level BPE tokenizer trained locally for the tiny model (no hub download).

The corpus is what the model will read and write: chart questions of every synthetic style and type, answers in
``<answer>`` tags, tool calls in the hermes format, tool observations and the prompt templates themselves.
Digits are split one per token and the pre-tokenizer is Qwen2's, so numbers tokenize the way they do for
Qwen2.5-VL. The Qwen-VL special tokens are special; the tags the protocol is made of (``<tool_call>``,
``</tool_call>``, ``<tool_response>``, ``</tool_response>``, ``<answer>``, ``</answer>``) are added as single
non-special tokens (as Qwen2.5 adds ``<tool_call>``), so they survive ``decode(skip_special_tokens=True)``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence

from chartrl.data import synthchart

SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
PROTOCOL_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<answer>", "</answer>")
# Qwen2's pre-tokenizer pattern (Qwen/Qwen2.5-VL-3B-Instruct tokenizer.json): letters runs, single digits,
# punctuation runs, whitespace.
QWEN2_PRETOKENIZE = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
LETTER_LABELS = tuple("ABCDEFGH")


# Prompt templates only a model behind an endpoint reads (the best-of-N external scorer's), never the policy: they stay
# out of the corpus, since any text added to it changes the tokenizer's merges, hence the tiny model and every result
# built on it (adding rerank_score.jinja did). The judge templates were in the corpus before this rule and stay, for
# the same reason.
ENDPOINT_ONLY_TEMPLATES = ("rerank_score",)
# The recipe overlays' prompts (config/geoqa_r1v.yaml, config/geoqa_mc.yaml) stay out for the same reason: the embedded
# default's tokenizer, hence its tiny model and every result, must not change when a recipe's template is added
# (tests/test_geoqa_recipes.py compares the default corpus's digest with the one before these templates).
RECIPE_TEMPLATES = ("r1v", "multiple_choice")


def corpus(seed: int, tool_names: Sequence[str], n_charts: int = 1500) -> Iterator[str]:
    """Deterministic training text for the tokenizer."""
    from chartrl import prompts
    from chartrl.tools import tool_schemas
    from chartrl.tools.registry import tool_spec

    rng = random.Random(f"tokenizer-corpus:{seed}")
    options = {
        "styles": {style: 1 for style in synthchart.CHART_TYPE_OF_STYLE},
        "min_categories": 2,
        "max_categories": 8,
        "value_labels": 0.5,
    }
    schemas = tool_schemas(tool_names)
    for _ in range(n_charts):
        chart = synthchart.plan_chart(rng, options)
        for qtype in synthchart.QUESTION_TYPES:
            question = synthchart.make_question(qtype, chart, rng)
            yield question.text
            yield f"<answer>{question.answer}</answer>"
        labels = list(chart.labels)
        yield " ".join(labels) + " " + chart.title + " " + chart.axis_title
        name = rng.choice(list(tool_names))
        axis = tool_spec(name).axis or "x_values"  # a tool without labels is written with labels too: only words matter
        keep = rng.sample(labels, rng.randint(1, min(2, len(labels))))
        yield "<tool_call>\n" + json.dumps({"name": name, "arguments": {axis: keep}}) + "\n</tool_call>"
    letters = list(LETTER_LABELS)
    for _ in range(200):
        keep = rng.sample(letters, rng.randint(1, 2))
        yield f"What is the value of {keep[0]}? <answer>{rng.randint(1, 10) * 10}</answer>"
    for template in prompts.template_names():
        if template in ENDPOINT_ONLY_TEMPLATES or template in RECIPE_TEMPLATES:
            continue
        yield prompts.template_source(template)
        if template.startswith("tool_use"):
            yield prompts.render(template, question="What is the value for 2019?", tools=schemas, labels=None)
        elif template == "no_tool":
            yield prompts.render(template, question="How many bars are shown in the chart?")


def train_tokenizer(seed: int, vocab_size: int, tool_names: Sequence[str]):
    """A ``PreTrainedTokenizerFast`` with the Qwen-VL special tokens and the protocol tags."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus(seed, tool_names), trainer)
    tokenizer.add_tokens([AddedToken(tag, special=False, normalized=False) for tag in PROTOCOL_TOKENS])
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=list(SPECIAL_TOKENS[1:]),
        model_max_length=8192,
        padding_side="left",
    )
