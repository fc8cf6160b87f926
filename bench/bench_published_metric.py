"""chartrl's relaxed accuracy against the published ChartQA rule (part of `make bench`).

Answer pairs are built from the golds of the real ChartQA sample (tests/fixtures/chartqa_real): each gold answered
in the forms a model writes (the same text, another case, numbers scaled by 1% to 10% and exactly 5% in
decimal, with thousands separators, as a percentage, with ".0", a Unicode minus, Python's "_" grouping, list golds
reordered or rebracketed). Every pair is scored by both rules; the section gives how often they agree and, per
form, where they part and in whose favour. Deterministic: no sampling, no timing. No form pads the answer with
whitespace: the test tables score the extracted answer, which is trimmed. The sample has no zero gold.

Run alone: ``python bench/run.py --only bench_published_metric --out /tmp/published.md``.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from bench_rewards import chartqa_answers

FACTORS = ("0.90", "0.95", "0.96", "0.99", "1.01", "1.04", "1.05", "1.06", "1.10")
"""Scalings of a numeric gold, as exact decimals: 0.95 and 1.05 are exactly 5% off."""


def _decimal(text: str) -> Decimal | None:
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def _plain(value: Decimal) -> str:
    """``value`` as plain decimal text, without an exponent or trailing zeros."""
    text = f"{value.normalize():f}"
    return "0" if text in ("-0", "") else text


def answer_forms(gold: str) -> list[tuple[str, str]]:
    """(form, prediction) pairs for one gold: every form that applies to it."""
    forms = [("same", gold), ("upper", gold.upper()), ("lower", gold.lower())]
    value = _decimal(gold)
    if value is not None:
        forms += [(f"scaled {factor}", _plain(value * Decimal(factor))) for factor in FACTORS]
        forms.append(("percent", f"{_plain(value * 100)}%"))
        if value == value.to_integral_value():
            forms.append(("trailing .0", f"{gold}.0"))
        if abs(value) >= 1000 and value == value.to_integral_value():
            forms.append(("thousands separators", f"{int(value):,}"))
        if len(gold) > 1 and gold.isdigit():
            forms.append(("underscore grouping", f"{gold[0]}_{gold[1:]}"))
        if value < 0:
            forms.append(("Unicode minus", gold.replace("-", "\u2212")))
    if gold.startswith("[") and gold.endswith("]"):
        items = [item.strip() for item in gold[1:-1].split(",")]
        forms += [
            ("list reordered", f"[{', '.join(reversed(items))}]"),
            ("list without brackets", ", ".join(items)),
            ("list with semicolons", f"[{'; '.join(items)}]"),
            ("list without spaces", f"[{','.join(items)}]"),
        ]
    return forms


def answer_pairs() -> list[tuple[str, str, str]]:
    """(form, prediction, gold) for every gold of the sample and every form that applies to it."""
    return [(form, prediction, gold) for gold in chartqa_answers() for form, prediction in answer_forms(gold)]


def bench_agreement() -> list[str]:
    from chartrl.answers import relaxed_accuracy
    from chartrl.evaluate.published_metric import relaxed_correctness

    pairs = answer_pairs()
    verdicts = [(relaxed_accuracy(p, g) == 1.0, relaxed_correctness(p, g)) for _, p, g in pairs]
    n = len(pairs)
    agree = sum(ours == published for ours, published in verdicts)
    by_form: dict[str, list[int]] = {}
    for (form, _, _), (ours, published) in zip(pairs, verdicts, strict=True):
        counts = by_form.setdefault(form, [0, 0, 0])
        counts[0] += 1
        counts[1] += ours and not published
        counts[2] += published and not ours
    examples = {}
    for (form, prediction, gold), (ours, published) in zip(pairs, verdicts, strict=True):
        if ours != published:
            examples.setdefault(form, f"`{prediction}` for `{gold}`")
    lines = [
        "## chartrl's relaxed accuracy against the published ChartQA rule",
        "",
        f"{n} answer pairs from the {len(chartqa_answers())} golds of tests/fixtures/chartqa_real, each gold in the "
        "forms that apply to it (bench/bench_published_metric.py); the published rule is "
        "`chartrl.evaluate.published_metric.relaxed_correctness` (Pix2Struct's).",
        "",
        f"They agree on **{agree} of {n} ({agree / n:.1%})**. Accepted: chartrl "
        f"{sum(v[0] for v in verdicts)}, published rule {sum(v[1] for v in verdicts)}.",
        "",
        "| form | pairs | only chartrl accepts | only the published rule accepts | example |",
        "|---|---|---|---|---|",
    ]
    for form, (count, ours_only, published_only) in by_form.items():
        if ours_only or published_only:
            lines.append(f"| {form} | {count} | {ours_only} | {published_only} | {examples[form]} |")
    same = [form for form, (_, a, b) in by_form.items() if not a and not b]
    return lines + ["", f"No difference on: {', '.join(same)}.", ""]


def sections(args) -> list[str]:
    return bench_agreement()
