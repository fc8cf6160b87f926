"""ChartQA's relaxed accuracy exactly as published numbers compute it: the reference ``relaxed_correctness`` of
Pix2Struct (google-research/pix2struct, ``pix2struct/metrics.py``), which MatCha, DePlot and lmms-eval's ChartQA
task (``lmms_eval/tasks/chartqa/utils.py``) score with, quirks included. A number a user holds against a published
ChartQA result is this one.

The definition, for one prediction and one target string:

1. Each side is read as a number by Python's ``float()`` after one rule: a string ending in ``%`` has every
   trailing ``%`` removed and is divided by 100. ``float()`` decides the rest: surrounding whitespace, a sign,
   exponents, ``_`` between digits ("2_008" is 2008), "nan" and "inf" are numbers; a thousands separator
   ("509,473"), a Unicode minus ("\u22121.6"), a unit or a currency sign make the side not a number.
2. When the prediction is a number and the target is a non-zero number (a target of 0, "0.0" or "-0" falls
   through to step 3), the prediction is right when ``abs(prediction - target) / abs(target) <= 0.05`` in
   floating point. Rounding decides the exact boundary: "2.1" for "2" is 0.050000000000000044 off and wrong,
   "105" for "100" is 0.05 off and right. A NaN or infinite target is never matched in this branch.
3. Otherwise the prediction is right when ``prediction.lower() == target.lower()``: no trimming, no list parsing,
   so "[2011, 2012]" matches only itself (in any case).

chartrl's own rule, :func:`chartrl.answers.relaxed_accuracy`, is what training rewards and what the report's test
accuracy counts. It resolves these edge cases in the answer's favour where the intent is clear (separators, a
Unicode minus, zero targets, list order and brackets, surrounding whitespace, the float boundary) and refuses the
forms only ``float()`` reads ("2_008", "50%%"); with ``year_rule: strict`` it also refuses years within 5%. So on
the same answers, under the ``standard`` year rule and away from those forms, chartrl's accuracy is an upper bound
on this number; docs/evaluation.md says which of the two to compare with the literature.
"""

from __future__ import annotations

PUBLISHED_TOLERANCE = 0.05
"""The published rule's ``max_relative_change`` (Masry et al., 2022, "ChartQA", end of Sec. 5.1: within 5%)."""


def _published_number(text: str) -> float | None:
    """The value the published rule reads from ``text`` (step 1 of the module's definition), or None."""
    scale = 1.0
    if text.endswith("%"):
        text, scale = text.rstrip("%"), 100.0
    try:
        return float(text) / scale
    except ValueError:
        return None


def relaxed_correctness(prediction: str, target: str) -> bool:
    """Is ``prediction`` right for ``target`` under the published ChartQA rule (the module's definition)?"""
    predicted, expected = _published_number(prediction), _published_number(target)
    if predicted is not None and expected:  # a zero target reads as false: it is compared as a string
        return abs(predicted - expected) / abs(expected) <= PUBLISHED_TOLERANCE
    return prediction.lower() == target.lower()


def published_relaxed_accuracy(prediction: str | None, target: str) -> float:
    """1.0 if ``prediction`` is right under :func:`relaxed_correctness`, else 0.0; a missing prediction (None: the
    response has no answer tag) scores 0, as in chartrl's own rule."""
    if prediction is None:
        return 0.0
    return float(relaxed_correctness(prediction, target))
