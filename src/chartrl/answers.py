"""Reading answers out of responses and comparing them with the truth: the rule scorer's whole vocabulary, below
the rollout, the judge and the rewards, which all read answers this way.

- :func:`answer_accuracy`: one episode's score, the relaxed accuracy of its final answer; what the trainer, the
  evaluation, the warm-start check, the rule reward and the verl generation reward all count.
- :func:`extract_answer`: the content of the last ``<answer>...</answer>`` in the response (no tag: no answer,
  accuracy 0 and a format failure).
- :func:`is_well_formed`: what the format term calls well-formed.
- :func:`extract_choice`: the letter in the last ``\\boxed{...}`` (multiple-choice GeoQA).
- :func:`relaxed_accuracy`: ChartQA's relaxed accuracy (Masry et al., 2022, "ChartQA", Sec. 5; the evaluation code
  of Pix2Struct / MatCha, ``relaxed_correctness``), with the edge cases below resolved and documented.

Relaxed accuracy, as the ChartQA standard defines it: when prediction and target both read as numbers (a
trailing ``%`` read as a percentage, i.e. divided by 100) they match when the relative error is at most 5%;
otherwise they match when they are equal ignoring case after trimming whitespace. Where the standard is silent
or does something surprising, this module decides as follows:

- **Zero target.** The standard falls back to string matching for a target of 0 (its test is ``if target:``), so
  "0.0" does not match "0". Here a zero target needs a prediction that is numerically exactly 0.
- **Percent vs fraction.** As the standard: "45%" reads 0.45, so it matches "0.45" and does *not* match "45";
  "45%" matches "45%". (The reference judge is the lenient one and accepts "45%" for "45", so the diagonal
  evaluation shows the difference.)
- **Thousands separators.** "1,234,567" reads 1234567 (the standard's ``float()`` would fail and compare strings).
  Only well-formed groups of three digits count as separators ("1,23" is not a number).
- **Negatives.** A leading "-" or "+" (the Unicode minus sign too) is part of the number; the relative error is
  taken against ``abs(target)``, so "-5" does not match "5".
- **Units.** A number with anything else around it ("45 kg", "$45", "45 million") is not a number; it is compared
  as a string (as in the standard). Only the trailing ``%`` is understood.
- **Years** (the ``year_rule`` option, :data:`YEAR_RULES`). ``standard`` (the default, as ChartQA's own evaluation
  computes it): every target that reads as a number gets the 5% tolerance, years included, so "2019" for "2018"
  is accepted; numbers published against ChartQA are computed this way. ``strict``: a target that is a plain
  four-digit integer between 1800 and 2100 is read as a year and must match exactly (5% of 2012 is a century,
  which makes year questions nearly free; a count of, say, 2000 units is thereby compared exactly too). Rewards
  take it as their ``year_rule`` param, scorers and the test evaluation as ``evaluate.year_rule``; every scores
  file records the rule it used.
- **Multi-value answers.** A target in square brackets ("[2011, 2012]", as in ChartQA's augmented split) is a list;
  the prediction, with or without brackets, is split on commas or semicolons, and it matches when both have the
  same number of values and each target value is matched by a distinct predicted value (any order), each by
  these same rules. Thousands separators cannot be told from list separators inside a list; ChartQA lists do not
  use them.
- **Not-a-number words.** "nan", "inf" and exponents too large for a float are not numbers.
"""

from __future__ import annotations

import functools
import math
import re

ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"

RELATIVE_TOLERANCE = 0.05
"""ChartQA's relaxed accuracy: numbers within 5% relative error match (Masry et al., 2022)."""
YEAR_RANGE = (1800, 2100)
YEAR_RULES = ("standard", "strict")
"""``standard``: ChartQA's relaxed accuracy, years within 5% like any number; ``strict``: years must match exactly."""
DEFAULT_YEAR_RULE = "standard"

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_GROUPED_NUMBER = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_YEAR = re.compile(r"\d{4}")
_LIST_SEPARATOR = re.compile(r"[,;]")
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_CHOICE = re.compile(r"\(?([A-Z])\)?(?:[.:)]\s*.*)?", re.DOTALL)


def extract_answer(text: str) -> str | None:
    """The stripped content of the last ``<answer>...</answer>`` in ``text``; None without a closed pair.

    "Last" means the last closing tag and the last opening tag before it, so with nested or repeated tags the
    innermost, final answer wins. An unclosed ``<answer>`` (a generation cut by the token limit) gives None.
    """
    close = text.rfind(ANSWER_CLOSE)
    if close < 0:
        return None
    start = text.rfind(ANSWER_OPEN, 0, close)
    if start < 0:
        return None
    return text[start + len(ANSWER_OPEN) : close].strip()


def is_well_formed(text: str) -> bool:
    """A response is well-formed when it has exactly one ``<answer>`` and one ``</answer>``, in that order, with
    non-blank content between them and nothing but whitespace after the closing tag. Reasoning before the
    answer is free-form (no ``<think>`` tags are required)."""
    if text.count(ANSWER_OPEN) != 1 or text.count(ANSWER_CLOSE) != 1:
        return False
    start, close = text.index(ANSWER_OPEN), text.index(ANSWER_CLOSE)
    if close < start or not text[start + len(ANSWER_OPEN) : close].strip():
        return False
    return not text[close + len(ANSWER_CLOSE) :].strip()


def extract_choice(text: str) -> str | None:
    """The option letter in the last ``\\boxed{...}`` of ``text``, or None.

    The last box decides: if it holds no option letter (``\\boxed{42}``) the answer is None even when an earlier
    box held one. Accepted forms: ``\\boxed{B}``, ``\\boxed{(B)}``, ``\\boxed{B. 30°}``; letters are upper-case,
    as the GeoQA reader writes them (a lower-case letter in a geometry answer is a variable, not an option).
    """
    boxes = _BOXED.findall(text)
    if not boxes:
        return None
    match = _CHOICE.fullmatch(boxes[-1].strip())
    return match.group(1) if match else None


def parse_number(text: str) -> float | None:
    """The value of ``text`` if it is a number and nothing else (sign, thousands separators, decimals, exponent,
    an optional trailing ``%`` that divides by 100); None otherwise."""
    s = text.strip().replace("\u2212", "-")
    percent = s.endswith("%")
    if percent:
        s = s[:-1].rstrip()
    if _GROUPED_NUMBER.fullmatch(s):
        s = s.replace(",", "")
    if not _NUMBER.fullmatch(s):
        return None
    value = float(s)
    if not math.isfinite(value):
        return None
    return value / 100 if percent else value


def _is_year(target: str) -> bool:
    return bool(_YEAR.fullmatch(target)) and YEAR_RANGE[0] <= int(target) <= YEAR_RANGE[1]


def check_year_rule(year_rule: str) -> str:
    if year_rule not in YEAR_RULES:
        raise ValueError(f"unknown year rule {year_rule!r}; valid year rules: {', '.join(YEAR_RULES)}")
    return year_rule


def _scalar_match(prediction: str, target: str, year_rule: str = DEFAULT_YEAR_RULE) -> bool:
    prediction, target = prediction.strip(), target.strip()
    target_value, predicted_value = parse_number(target), parse_number(prediction)
    if target_value is not None and predicted_value is not None:
        if (year_rule == "strict" and _is_year(target)) or target_value == 0:
            return predicted_value == target_value
        return abs(predicted_value - target_value) / abs(target_value) <= RELATIVE_TOLERANCE + 1e-12
    return prediction.lower() == target.lower()


def split_list(text: str) -> list[str] | None:
    """The values of a bracketed list ("[2011, 2012]"), or None when ``text`` is not one."""
    text = text.strip()
    if not (text.startswith("[") and text.endswith("]")):
        return None
    return _list_items(text[1:-1])


def _list_values(prediction: str) -> list[str]:
    text = prediction.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    return _list_items(text)


def _list_items(text: str) -> list[str]:
    """The non-blank items of ``text`` split on commas or semicolons, each stripped. (Splitting on
    ``\\s*[,;]\\s*`` instead is quadratic: on "1" + 30,000 spaces + "2" the regex tries every space as the start
    of a separator and scans the run each time.)"""
    return [item for item in (part.strip() for part in _LIST_SEPARATOR.split(text)) if item]


def match_unordered(predicted: list[str], targets: list[str], same) -> bool:
    """Each target matched by a distinct prediction (``same(prediction, target)``), as many of each."""
    if len(predicted) != len(targets):
        return False
    unused = list(predicted)
    for target in targets:
        hit = next((i for i, p in enumerate(unused) if same(p, target)), None)
        if hit is None:
            return False
        unused.pop(hit)
    return True


def relaxed_accuracy(prediction: str | None, target: str, year_rule: str = DEFAULT_YEAR_RULE) -> float:
    """1.0 if ``prediction`` matches ``target`` under ChartQA's relaxed accuracy (see the module docstring for
    the edge cases; ``year_rule``: ``standard`` or ``strict``), else 0.0. A missing prediction (None: no answer
    tag) scores 0."""
    check_year_rule(year_rule)
    if prediction is None:
        return 0.0
    targets = split_list(target)
    if targets is not None:
        if prediction.strip().lower() == target.strip().lower():
            return 1.0
        same = functools.partial(_scalar_match, year_rule=year_rule)
        return float(match_unordered(_list_values(prediction), targets, same))
    return float(_scalar_match(prediction, target, year_rule))


def answer_accuracy(response: str, truth: str, year_rule: str = DEFAULT_YEAR_RULE) -> float:
    """One episode's score: the relaxed accuracy of the answer in ``response`` (its last ``<answer>...</answer>``)
    against ``truth`` under ``year_rule``; 0 without an answer tag."""
    return relaxed_accuracy(extract_answer(response), truth, year_rule)
