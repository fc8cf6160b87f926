"""A verl job's GPU-hours before any GPU run: a central estimate and a range, from the tokens its trajectories hold.

A trajectory (a rollout, a validation answer, a test answer) holds three kinds of tokens (:class:`Trajectory`):

- **prompt**: the chat template, the rendered prompt (the question, the tool list and the chart's labels for a tool
  series) and the chart's image tokens, at most ``verl.max_prompt_length`` (longer prompts are filtered out);
- **decoded**: what the policy writes, each generation pass at most ``rollout.max_new_tokens``;
- **observation**: each tool turn's edited chart and its text, which vLLM reads without decoding.

Each is priced at its own rate (:class:`Rates`): prompt and observation tokens at vLLM's prefill rate, decoded
tokens at its decode rate, and, for the rollouts of a train job, every token of the sequence once per pass that
computes log-probabilities or gradients (the old policy's, the reference's, and per PPO epoch the update's forward,
its backward at two forwards' worth and the forward gradient checkpointing recomputes) at ``2 x parameters`` FLOPs a
token per forward (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", eq. 2.1) over the device's bf16
peak at a model-FLOPs utilisation. On the padded path (no flash-attn) a micro-batch is computed at its longest
sequence, so the training passes are priced at the high estimate's sequence.

Not priced: without flash-attn, verl computes log-probabilities with ``logprobs_from_logits_v2``, a Python loop over
the rows of the ``[tokens, vocabulary]`` logits (``log_softmax`` and ``gather`` per token, and autograd's backward
of each in the update). On a GPU such a loop is bound by the host issuing one small kernel after another, a cost
that only a GPU timing gives and none was made (no GPU where this is developed). A guessed rate would sit in the
central estimate as if it were known, so the plan leaves it out and says so (:data:`UNPRICED_LOOP`); the smoke
run's measured throughput includes it, and the re-plan from it (:func:`measured_hours`) is the figure to book on.

Three estimates: ``low`` (short answers, no tool call, fast rates), ``central`` and ``high`` (every pass at its cap,
slow rates). The rates are not measured on this repository's jobs (no GPU where it is developed): the central ones
reproduce EasyR1's published step (``tests/verl_backend/test_verl_gpu_hours.py``), and the smoke run's measured
throughput and fill replace them (``chartrl plan --tokens-per-gpu-second --fill``: :func:`measured_hours`).
"""

from __future__ import annotations

from dataclasses import dataclass

from chartrl import prompts
from chartrl.config import Config, TrainSeries
from chartrl.tools import tool_schemas
from chartrl.verl_backend.architectures import Architecture
from chartrl.verl_backend.overrides import TOOL_TURN_TEXT_TOKENS, passes

ESTIMATES = ("low", "central", "high")

BF16_PEAK_FLOPS = 989e12
"""Dense bf16 peak of an H100 SXM (NVIDIA's H100 datasheet; an H200 has the same compute, more memory)."""

CHAT_TEMPLATE_TOKENS = 32
"""Qwen2.5-VL's chat template around one user turn: the default system prompt, role markers, vision tags."""

CHARS_PER_TOKEN = {"low": 4.0, "central": 3.5, "high": 3.0}
"""Characters of rendered prompt per token: Qwen2's BPE reads English prose at about 4 and JSON (the tool schemas)
at about 3; the tool prompt is both."""

CHARTQA_QUESTION_CHARS = 60
CHARTQA_LABEL_CHARS = 56
"""Medians over the real ChartQA sample (``tests/fixtures/chartqa_real``): a question's characters, and a bar chart's
category labels joined by ", " (the list ``prompts.list_labels`` adds to the tool prompt)."""

CHARTQA_CHART_PIXELS = {"low": 59_984, "central": 445_600, "high": 661_920}
"""The smallest, median and largest chart of the real ChartQA sample, in pixels (width x height); the image
processor scales each into ``[model.min_pixels, model.max_pixels]``. Other datasets: the bounds themselves."""

DECODE_SHARE = {"low": 0.125, "central": 0.5, "high": 1.0}
"""A generation pass's length over its cap (``rollout.max_new_tokens``). Not known for the 3B on ChartQA before a
GPU run (the CPU miniature's tiny model writes at most 48 tokens a pass and says nothing of a 3B's reasoning): half
the cap centrally, every pass at its cap at most; the smoke run's ``response_length/mean`` replaces it (``--fill``)."""


@dataclass(frozen=True)
class Rates:
    """Per-GPU rates of one estimate (each a chosen value, not a measurement: see :data:`RATES`)."""

    prefill_tokens_per_second: float
    decode_tokens_per_second: float
    flops_utilisation: float
    """Of :data:`BF16_PEAK_FLOPS`, in the training passes."""


RATES = {
    "low": Rates(40_000, 3_000, 0.15),
    "central": Rates(20_000, 1_500, 0.08),
    "high": Rates(10_000, 750, 0.05),
}
"""The central utilisation is EasyR1's published actor MFU for Qwen2.5-VL-3B (8.1%, ``assets/baselines.md`` of
v0.3.2, 8 x H100); with it, a decode rate of 1,500 tokens per GPU-second reproduces EasyR1 v0.3.0's 180 s step
(``test_verl_gpu_hours.py``). The prefill rate is a forward pass at ~20% of the bf16 peak for the 3B. The low and
high rates are half and twice the central cost."""

UNPRICED_LOOP = (
    "not priced: without flash-attn verl computes log-probabilities in a per-token Python loop "
    "(logprobs_from_logits_v2: log_softmax and gather per token, and their backward in the update), whose time "
    "only a GPU measures and none was measured; the smoke run's tokens per GPU-second include it: re-plan from "
    "them (--tokens-per-gpu-second) before booking"
)
"""What the plan says in place of a price for verl's log-probability loop on the padded path."""

MEASURED_RANGE = (0.8, 1.5)
"""A plan from the smoke run's measured throughput and fill: the smoke run's few short steps on fewer GPUs say
little of how response lengths drift over the study's 220 steps (GRPO lengthens answers, Dr.GRPO and the length
rewards shorten them), so the range spans 0.8 to 1.5 times the measured figure."""


@dataclass(frozen=True)
class Trajectory:
    """The tokens of one trajectory, by how vLLM and the trainer process them."""

    prompt: int
    decoded: int
    observation: int

    @property
    def tokens(self) -> int:
        return self.prompt + self.decoded + self.observation


def image_tokens(config: Config, architecture: Architecture, estimate: str) -> int:
    """One chart's image tokens: the dataset's chart sizes (:data:`CHARTQA_CHART_PIXELS` for ChartQA; the pixel
    bounds for another dataset) scaled into ``[model.min_pixels, model.max_pixels]``."""
    model = config.model
    source = config.datasets[config.train.dataset].source if config.train.dataset in config.datasets else ""
    if source.startswith("chartqa"):
        pixels = CHARTQA_CHART_PIXELS[estimate]
    else:
        pixels = {"low": model.min_pixels, "central": (model.min_pixels + model.max_pixels) // 2}.get(
            estimate, model.max_pixels
        )
    return min(max(pixels, model.min_pixels), model.max_pixels) // architecture.image_token_pixels


def prompt_text_tokens(config: Config, tools: bool, estimate: str) -> int:
    """The rendered prompt of a typical ChartQA question (:data:`CHARTQA_QUESTION_CHARS`), with the tool list and
    the chart's labels for a tool series, in tokens (:data:`CHARS_PER_TOKEN`), plus the chat template."""
    question = "x" * CHARTQA_QUESTION_CHARS
    if tools:
        labels = {"x_values": ["x" * CHARTQA_LABEL_CHARS]} if config.prompts.list_labels else None
        text = prompts.render(
            config.prompts.tool_template, question=question, tools=tool_schemas(config.tools.names), labels=labels
        )
    else:
        text = prompts.render(config.prompts.no_tool_template, question=question)
    return round(len(text) / CHARS_PER_TOKEN[estimate]) + CHAT_TEMPLATE_TOKENS


def trajectory(
    config: Config, architecture: Architecture, series: TrainSeries | None, estimate: str, cap: int | None = None
) -> Trajectory:
    """The tokens of one trajectory of ``series`` (None: a no-tool answer, as the shortcut filter's) under
    ``estimate``: the low one calls no tool and answers in one short pass, the central one uses every pass at
    :data:`DECODE_SHARE` of its cap ``cap`` (``rollout.max_new_tokens``), the high one fills every pass."""
    tools = bool(series and series.tools)
    cap = config.rollout.max_new_tokens if cap is None else cap
    chart = image_tokens(config, architecture, estimate)
    prompt = min(prompt_text_tokens(config, tools, estimate) + chart, config.verl.max_prompt_length)
    calls_tool = tools and estimate != "low"
    generation_passes = passes(series, config) if series is not None and calls_tool else 1
    decoded = round(generation_passes * cap * DECODE_SHARE[estimate])
    observation = config.tools.max_tool_turns * (chart + TOOL_TURN_TEXT_TOKENS) if calls_tool else 0
    return Trajectory(prompt, decoded, observation)


def rollout_seconds(path: Trajectory, rates: Rates) -> float:
    """GPU-seconds vLLM spends on one trajectory: its prompt and observations prefilled, its answer decoded."""
    return (path.prompt + path.observation) / rates.prefill_tokens_per_second + (
        path.decoded / rates.decode_tokens_per_second
    )


def forward_passes(reference: bool, ppo_epochs: int, checkpointing: bool) -> int:
    """Forwards' worth of compute over a rollout's sequence in training: the old policy's log-probabilities, the
    reference's, and per PPO epoch the update's forward, its backward (two forwards) and, with gradient
    checkpointing, the recomputed forward."""
    return 1 + (1 if reference else 0) + ppo_epochs * (3 + (1 if checkpointing else 0))


@dataclass(frozen=True)
class TrainingShape:
    """What a train job's training passes cost depends on, beside the trajectory."""

    parameters: int
    reference: bool
    ppo_epochs: int
    checkpointing: bool
    padded_tokens: int | None
    """The padded path's sequence length (a micro-batch computed at its longest); None with remove-padding."""


def training_seconds(path: Trajectory, shape: TrainingShape, rates: Rates) -> float:
    """GPU-seconds of the training passes over one rollout (on the padded path, at the micro-batch's longest)."""
    tokens = path.tokens if shape.padded_tokens is None else max(path.tokens, shape.padded_tokens)
    forwards = forward_passes(shape.reference, shape.ppo_epochs, shape.checkpointing)
    return tokens * forwards * 2 * shape.parameters / (BF16_PEAK_FLOPS * rates.flops_utilisation)


@dataclass(frozen=True)
class Hours:
    """A job's GPU-hours: the central estimate and the range."""

    central: float
    low: float
    high: float

    def __add__(self, other: Hours) -> Hours:
        return Hours(self.central + other.central, self.low + other.low, self.high + other.high)


def measured_hours(sequences: int, longest: int, fill: float, tokens_per_gpu_second: float) -> Hours:
    """From a run's own figures (verl's ``perf/throughput`` counts prompt and response tokens of every sequence
    over the whole step): ``sequences x longest x fill`` tokens at that throughput, within :data:`MEASURED_RANGE`."""
    central = sequences * longest * fill / tokens_per_gpu_second / 3600
    return Hours(central, central * MEASURED_RANGE[0], central * MEASURED_RANGE[1])
