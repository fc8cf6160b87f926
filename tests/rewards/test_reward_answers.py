"""Answer extraction, well-formedness, option letters and ChartQA's relaxed accuracy: tables, one comment per case."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chartrl.answers import extract_answer, extract_choice, is_well_formed, parse_number, relaxed_accuracy

EXTRACTION = [
    # (response, extracted answer)
    ("<answer>42</answer>", "42"),  # the plain case
    ("I think... <answer> 42 </answer>\n", "42"),  # reasoning before, whitespace trimmed
    ("<answer>41</answer> wait, no: <answer>42</answer>", "42"),  # the LAST answer counts
    ("<answer>a<answer>b</answer>", "b"),  # nested opening tags: the innermost final answer
    ("<answer>\nline one\nline two\n</answer>", "line one\nline two"),  # multi-line content
    ("<answer></answer>", ""),  # empty content is an (empty) answer, not None
    ("<answer>42", None),  # unclosed (cut by the token limit): no answer
    ("42</answer>", None),  # a closing tag alone
    ("</answer>42<answer>", None),  # tags in the wrong order
    ("The answer is 42.", None),  # no tags at all
    ("<ANSWER>42</ANSWER>", None),  # tags are case-sensitive, as the prompt writes them
    ("", None),  # empty response
]


@pytest.mark.parametrize("response,expected", EXTRACTION)
def test_extract_answer(response, expected):
    assert extract_answer(response) == expected


WELL_FORMED = [
    # (response, well-formed?)
    ("<answer>42</answer>", True),  # just the answer
    ("Reading the bars, B is 42.\n<answer>42</answer>\n", True),  # reasoning first, trailing whitespace
    ("<think>B is tallest</think><answer>B</answer>", True),  # think tags are allowed, not required
    ("<answer>42</answer> I hope that helps!", False),  # text after the answer
    ("<answer>41</answer><answer>42</answer>", False),  # two answers
    ("<answer>  </answer>", False),  # blank content
    ("<answer>42", False),  # unclosed
    ("</answer>42<answer>", False),  # reversed tags
    ("42", False),  # no tags
    ("<answer>42</answer><tool_call>{}</tool_call>", False),  # a tool call after the answer
]


@pytest.mark.parametrize("response,expected", WELL_FORMED)
def test_is_well_formed(response, expected):
    assert is_well_formed(response) is expected


CHOICES = [
    # (response, option letter)
    ("so the answer is \\boxed{B}", "B"),  # the plain case
    ("\\boxed{A} ... on reflection \\boxed{C}", "C"),  # the last box wins
    ("\\boxed{(D)}", "D"),  # parenthesised letter
    ("\\boxed{B. 30°}", "B"),  # letter followed by the option text
    ("\\boxed{ A }", "A"),  # spaces inside the box
    ("\\boxed{B} then \\boxed{42}", None),  # the last box holds no letter: no choice
    ("\\boxed{b}", None),  # lower case is a variable, not an option
    ("\\boxed{AB}", None),  # two letters
    ("The answer is B", None),  # no box
]


@pytest.mark.parametrize("response,expected", CHOICES)
def test_extract_choice(response, expected):
    assert extract_choice(response) == expected


NUMBERS = [
    # (text, value)
    ("42", 42.0),  # integer
    (" -1.6 ", -1.6),  # negative decimal, trimmed
    ("\u22121.6", -1.6),  # Unicode minus sign
    ("+3", 3.0),  # explicit plus
    ("1,234,567", 1234567.0),  # thousands separators
    ("1,234.5", 1234.5),  # separators and decimals
    ("45%", 0.45),  # trailing percent is a percentage
    ("45 %", 0.45),  # with a space before the sign
    (".5", 0.5),  # no leading zero
    ("1e3", 1000.0),  # exponent
    ("1,23", None),  # not a thousands group
    ("12,3456", None),  # not a thousands group either
    ("$45", None),  # currency is not understood by the rule
    ("45 kg", None),  # nor units
    ("nan", None),  # not a number word
    ("inf", None),  # nor infinity
    ("1e999", None),  # overflows to infinity
    ("", None),  # empty
]


@pytest.mark.parametrize("text,expected", NUMBERS)
def test_parse_number(text, expected):
    value = parse_number(text)
    assert value == pytest.approx(expected) if expected is not None else value is None


RELAXED = [
    # (prediction, target, score)
    ("42", "42", 1.0),  # exact
    ("43", "42", 1.0),  # within 5% (2.4%)
    ("44.1", "42", 1.0),  # exactly 5% off: accepted (<=)
    ("44.2", "42", 0.0),  # just past 5%
    ("39.9", "42", 1.0),  # 5% below
    ("42.0", "42", 1.0),  # different form, same number
    ("-1.6", "-1.6", 1.0),  # negative, exact
    ("-1.55", "-1.6", 1.0),  # negative within 5% of |target|
    ("1.6", "-1.6", 0.0),  # sign matters
    ("\u22121.6", "-1.6", 1.0),  # Unicode minus reads as minus
    ("0", "0", 1.0),  # zero target, zero prediction
    ("0.0", "0", 1.0),  # zero target: numeric equality (the standard would compare strings)
    ("0.01", "0", 0.0),  # zero target: no relative slack
    ("45%", "0.45", 1.0),  # percent read as a percentage matches the fraction
    ("45%", "45", 0.0),  # ... and therefore not the bare number (ChartQA standard; the judge is lenient)
    ("0.45", "45%", 1.0),  # the same, target side
    ("45%", "45%", 1.0),  # both percentages
    ("1,234", "1234", 1.0),  # thousands separator in the prediction
    ("1234", "1,234", 1.0),  # ... or in the target
    ("1,300", "1234", 0.0),  # 5.3% off after reading separators
    ("45 kg", "45", 0.0),  # units make it a string: strict, as the standard
    ("$45", "45", 0.0),  # currency too
    ("2012", "2012", 1.0),  # a year, exact
    ("2013", "2012", 1.0),  # the standard rule: a year is a number like any other, within 5%
    ("2019", "2018", 1.0),  # ChartQA's own evaluation accepts the neighbouring year
    ("2012.0", "2012", 1.0),  # a year written as a decimal is the same year
    ("2210", "2200", 1.0),  # a quantity, 5% applies
    ("Italy", "italy", 1.0),  # strings: case-insensitive
    ("  Italy ", "Italy", 1.0),  # trimmed
    ("Italy.", "Italy", 0.0),  # but punctuation is not stripped (the judge does that)
    ("United States", "USA", 0.0),  # no synonyms
    ("yes", "Yes", 1.0),  # yes/no as strings
    ("[2011, 2012]", "[2011, 2012]", 1.0),  # list, same
    ("2012, 2011", "[2011, 2012]", 1.0),  # list without brackets, any order
    ("[1.35, 1.37]", "[1.34, 1.37]", 1.0),  # list elements by the relaxed rule
    ("[2011]", "[2011, 2012]", 0.0),  # a value missing
    ("[10, 10]", "[10, 20]", 0.0),  # one prediction cannot match two targets
    ("[2011, 2012, 2013]", "[2011, 2012]", 0.0),  # one too many
    ("2011; 2012", "[2011, 2012]", 1.0),  # semicolons separate too
    ("", "42", 0.0),  # empty answer
    (None, "42", 0.0),  # no answer tag
]


@pytest.mark.parametrize("prediction,target,score", RELAXED)
def test_relaxed_accuracy(prediction, target, score):
    assert relaxed_accuracy(prediction, target) == score
    assert relaxed_accuracy(prediction, target, "standard") == score


YEARS = [
    # (prediction, target, standard score, strict score)
    ("2019", "2018", 1.0, 0.0),  # ChartQA's evaluation accepts it; the strict rule wants the year itself
    ("2013", "2012", 1.0, 0.0),
    ("1999", "2000", 1.0, 0.0),  # 2000 reads as a year under the strict rule
    ("2101", "2100", 1.0, 0.0),  # the top of the strict rule's year range
    ("2012", "2012", 1.0, 1.0),  # the year itself: both
    ("2012.0", "2012", 1.0, 1.0),  # written as a decimal: the same year under both
    ("2200", "2100", 1.0, 0.0),  # 4.8% off: accepted by the standard, a different year under the strict rule
    ("2210", "2200", 1.0, 1.0),  # outside the year range: a quantity under both rules
    ("1790", "1799", 1.0, 1.0),  # below the year range: a quantity under both rules
    ("[2019, 2011]", "[2011, 2018]", 1.0, 0.0),  # list items follow the rule too
    ("[2011, 2011]", "[2011, 2012]", 1.0, 0.0),
    ("45%", "0.45", 1.0, 1.0),  # percentages: the same under both
    ("45%", "45", 0.0, 0.0),
    ("Italy", "italy", 1.0, 1.0),  # non-numeric: exact match ignoring case, under both
    ("Italia", "Italy", 0.0, 0.0),
]


@pytest.mark.parametrize("prediction,target,standard,strict", YEARS)
def test_year_rules(prediction, target, standard, strict):
    assert relaxed_accuracy(prediction, target, "standard") == standard
    assert relaxed_accuracy(prediction, target, "strict") == strict


def test_unknown_year_rule_names_the_valid_ones():
    with pytest.raises(ValueError, match="valid year rules: standard, strict"):
        relaxed_accuracy("1", "1", "lenient")


@given(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False).filter(lambda x: abs(x) > 1e-3))
def test_relaxed_accuracy_accepts_every_number_itself_and_rejects_its_negation(x):
    text = f"{x:.6g}"
    assert relaxed_accuracy(text, text) == 1.0
    assert relaxed_accuracy(f"{-float(text):.6g}", text) == 0.0


@given(st.text(max_size=200), st.text(max_size=20))
def test_rule_never_raises_and_is_zero_or_one(response, target):
    assert relaxed_accuracy(extract_answer(response), target) in (0.0, 1.0)
