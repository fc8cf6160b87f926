"""An independent derivation of synthchart answers, shared by the data and workflow tests."""

from __future__ import annotations

from decimal import Decimal


def expected_answer(row) -> str:
    """An independent derivation of the answer from the chart's data (extra.chart), by question type."""
    chart = row.extra["chart"]
    qtype, text = row.extra["question_type"], row.extra["question"]
    labels, decimals = chart["labels"], chart["decimals"]
    series_index = chart["series"].index(row.extra["series"]) if row.extra["series"] else 0
    values = dict(zip(labels, (Decimal(str(v)) for v in chart["values"][series_index]), strict=True))
    fmt = lambda d: f"{d:.{decimals}f}"  # noqa: E731
    if qtype == "count":
        return str(len(labels))
    if qtype == "extreme":
        want_high = any(word in text for word in ("highest", "largest"))
        return (max if want_high else min)(values, key=values.get)
    if qtype == "value":
        (label,) = row.extra["about"]
        return fmt(values[label])
    a, b = row.extra["about"]
    if qtype == "compare":
        return "Yes" if values[a] > values[b] else "No"
    if qtype == "difference":
        return fmt(abs(values[a] - values[b]))
    if qtype == "sum":
        return fmt(values[a] + values[b])
    raise AssertionError(f"unknown question type {qtype}")
