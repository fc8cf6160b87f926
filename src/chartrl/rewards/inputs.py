"""What a reward sees of one sampled response: the response text, the truth and the metadata of the episode."""

from __future__ import annotations

from dataclasses import dataclass, fields

from chartrl.tools.calls import OUTCOMES as TOOL_OUTCOMES  # one definition: the tools say what happened

"""Did the policy call a tool, and did it run: ``none`` (no call), ``executed`` (parsed and ran), ``malformed``
(a call the parser rejected), ``failed`` (a well-formed call the tool refused, e.g. a label not on the chart)."""


@dataclass(frozen=True)
class RewardInput:
    """One sampled response with what every reward and scorer may read about it (nothing else: rewards are pure)."""

    response: str
    """The final assistant turn's text. For a tool-use series this is the answer pass (after the edited chart);
    the answer is the content of its last ``<answer>...</answer>``."""
    ground_truth: str
    """The dataset's answer (``answer`` column of the data contract)."""
    question: str = ""
    """The question as asked, without the image placeholder; judges see it, rule rewards ignore it."""
    data_source: str = ""
    """The row's ``data_source`` (``synthchart``, ``chartqa_human``, ``geoqa_mc``, ...)."""
    subset: str = ""
    """``human``, ``augmented`` or ``synthetic`` (from the row's ``extra.subset``); scorers report accuracy per
    subset."""
    tool_outcome: str = "none"
    """One of :data:`TOOL_OUTCOMES`; the tool term and the conditional tool bonus read it."""
    tool_calls: int = 0
    """How many tool calls the policy emitted in the episode (well-formed or not)."""
    response_tokens: int = 0
    """Model-sampled tokens over all assistant turns of the episode (tool output and images excluded): what the
    length term counts."""
    id: str = ""
    """The row id (plus a sample suffix when several samples per question are scored); scorers key verdicts by it."""

    def __post_init__(self) -> None:
        # A wrong value here is a bug in the caller (rollout, converter), not a model mistake: fail loudly.
        if self.tool_outcome not in TOOL_OUTCOMES:
            raise ValueError(f"tool_outcome {self.tool_outcome!r} is not one of {', '.join(TOOL_OUTCOMES)}")
        for name in ("tool_calls", "response_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, not {value!r}")
        if not isinstance(self.response, str) or not isinstance(self.ground_truth, str):
            raise ValueError("response and ground_truth must be strings")


REWARD_INPUT_FIELDS = tuple(f.name for f in fields(RewardInput))
METADATA_FIELDS = tuple(n for n in REWARD_INPUT_FIELDS if n not in ("response", "ground_truth"))
"""The fields that travel as metadata (``--meta`` of ``chartrl reward``, verl's ``extra_info``)."""
