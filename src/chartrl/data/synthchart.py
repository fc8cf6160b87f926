"""Synthetic ChartQA-like charts rendered with matplotlib, with exact per-label boxes and exact answers.

A chart is first *planned* (its data, labels, colours: cheap, deterministic by seed, split and index), then
*rendered* (matplotlib Agg, in parallel). Boxes are read from the rendered artists, so they are exact: for a
vertical bar chart each x label gets a band around its bar (or bar group) half-way to the neighbouring
bars, from the top of the plot area to the bottom of the tick label, the same shape as the boxes ReFocus released
for ChartQA; horizontal bars get the transposed band for each y label. Lines and pies get no boxes (the ReFocus
tools are defined on bar charts).

No chart is shared across splits: splits are planned in the order test, val, train and a later split redraws any
chart whose data an earlier split already holds. So the test split depends only on the test size and the seed,
and growing the train split never changes what is evaluated.
"""

from __future__ import annotations

import io
import logging
import random
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from decimal import Decimal
from typing import Any

from chartrl.config import Config, DatasetConfig, config_check, to_plain
from chartrl.data.bands import half_way_intervals
from chartrl.data.contract import IMAGE_PLACEHOLDER, Row, empty_bboxes, normalise_box
from chartrl.data.sources import dataset_source
from chartrl.progress import Progress

log = logging.getLogger(__name__)

SPLIT_PRIORITY = ("test", "val", "train")
CHART_TYPE_OF_STYLE = {
    "mini": "v_bar",
    "vbar": "v_bar",
    "grouped": "v_bar",
    "hbar": "h_bar",
    "line": "line",
    "pie": "pie",
}
BOX_AXIS_OF_STYLE = {"mini": "x_values", "vbar": "x_values", "grouped": "x_values", "hbar": "y_values"}
"""The axis whose label boxes a style's charts carry (lines and pies carry none)."""
QUESTION_TYPES = ("count", "extreme", "value", "compare", "difference", "sum")
DPI = 100

# (noun used in questions, labels). Ordered domains (years, age groups, months) keep their order on the axis.
DOMAINS: dict[str, tuple[str, tuple[str, ...], bool]] = {
    "countries": (
        "country",
        (
            "Germany",
            "France",
            "Italy",
            "Spain",
            "Japan",
            "China",
            "Brazil",
            "India",
            "Canada",
            "Mexico",
            "Kenya",
            "Norway",
            "Chile",
            "Egypt",
            "Peru",
            "Poland",
            "Turkey",
            "Vietnam",
        ),
        False,
    ),
    "years": ("year", tuple(str(y) for y in range(2005, 2024)), True),
    "fruits": (
        "fruit",
        ("Apples", "Bananas", "Cherries", "Grapes", "Lemons", "Mangoes", "Oranges", "Pears", "Plums", "Kiwis"),
        False,
    ),
    "companies": (
        "company",
        ("Acme", "Borealis", "Cobalt", "Dynamo", "Everest", "Fjord", "Granite", "Helix", "Ion", "Juniper"),
        False,
    ),
    "age_groups": ("age group", ("18-24", "25-34", "35-44", "45-54", "55-64", "65+"), True),
    "months": ("month", ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), True),
    "platforms": (
        "platform",
        ("Facebook", "YouTube", "Instagram", "TikTok", "LinkedIn", "Pinterest", "Snapchat", "Reddit"),
        False,
    ),
}
METRICS = (
    ("Revenue", "in million U.S. dollars"),
    ("Sales", "in billion euros"),
    ("Number of users", "in millions"),
    ("Production", "in thousand tonnes"),
    ("Share of respondents", "in %"),
    ("Average price", "in U.S. dollars"),
    ("Number of visitors", "in thousands"),
)
SERIES_SETS = (("Men", "Women"), ("2019", "2020", "2021"), ("Urban", "Rural"), ("Online", "In store"), ("Q1", "Q2"))
# The mini layout, sizes in pixels. The slot is one merged patch (14 px patches, 2 x 2 merge). Measured on this
# kind of CPU with a 2.4 M-parameter model trained from scratch for 10 minutes: in this layout value reading is
# learned on the masked chart (1.00 on 300 held-out charts, 0.10 with shuffled images) but not on the full chart
# (0.18-0.20), so the tool turns an unreadable question into a solved one; tall plots (140 px) were not learned.
MINI_SIZE = (168, 56)
MINI_SLOT = 28
MINI_SLOTS = 6
MINI_BAR_WIDTH = 20
MINI_PLOT_ROW = 28
"""The bars stand in the top row (a value of 100 is MINI_PX_PER_UNIT * 100 px tall), the letters in the bottom."""
MINI_PX_PER_UNIT = 0.26
MINI_LETTERS = tuple("ABCDEFGH")
MINI_VALUES = tuple(range(10, 101, 10))
MINI_BAR_COLOUR = "#1f77b4"
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")


@dataclass(frozen=True)
class ChartData:
    """Everything a chart shows; the answers of its questions are functions of this alone."""

    style: str
    title: str
    noun: str
    axis_title: str
    labels: tuple[str, ...]
    series: tuple[str, ...]
    values: tuple[tuple[float, ...], ...]
    """values[series_index][label_index]"""
    decimals: int
    value_labels: bool
    colors: tuple[str, ...]

    def key(self) -> tuple:
        return (self.style, self.labels, self.series, self.values)

    def as_dict(self) -> dict[str, Any]:
        return to_plain(asdict(self))


@dataclass(frozen=True)
class Question:
    type: str
    text: str
    answer: str
    difficulty: int
    about: tuple[str, ...]
    """The labels the question is about (a tool that keeps them makes the question readable)."""
    series: str | None = None


# --------------------------------------------------------------------------------------------------------------
# Planning (data only, no rendering)
# --------------------------------------------------------------------------------------------------------------


def format_number(value: float | Decimal, decimals: int) -> str:
    return f"{Decimal(str(value)):.{decimals}f}"


def _distinct_values(rng: random.Random, n: int, decimals: int) -> tuple[float, ...]:
    top = rng.choice((10, 50, 100, 500, 1000))
    scale = 10**decimals
    low = max(1, top * scale // 20)
    picks = rng.sample(range(low, top * scale + 1), n)
    return tuple(round(p / scale, decimals) for p in picks)


def _pie_shares(rng: random.Random, n: int) -> tuple[float, ...]:
    """n distinct integer percentages, each at least 3, summing to 100."""
    while True:
        cuts = sorted(rng.sample(range(1, 100), n - 1))
        shares = [b - a for a, b in zip([0, *cuts], [*cuts, 100], strict=True)]
        if min(shares) >= 3 and len(set(shares)) == n:
            return tuple(float(s) for s in shares)


def plan_mini(rng: random.Random, options: Mapping[str, Any]) -> ChartData:
    """A mini chart: 3-6 bars (within min/max_categories) with distinct random letters in random order, each a
    distinct multiple of 10 from 10 to 100."""
    lo = min(max(options["min_categories"], 3), MINI_SLOTS)
    hi = min(max(options["max_categories"], lo), MINI_SLOTS)
    n = rng.randint(lo, hi)
    labels = tuple(rng.sample(MINI_LETTERS, n))
    values = (tuple(float(v) for v in rng.sample(MINI_VALUES, n)),)
    return ChartData(
        style="mini",
        title="",
        noun="letter",
        axis_title="",
        labels=labels,
        series=("",),
        values=values,
        decimals=0,
        value_labels=False,
        colors=(MINI_BAR_COLOUR,),
    )


def plan_chart(rng: random.Random, options: Mapping[str, Any]) -> ChartData:
    styles = list(options["styles"])
    style = rng.choices(styles, weights=[options["styles"][s] for s in styles])[0]
    if style == "mini":
        return plan_mini(rng, options)
    lo, hi = options["min_categories"], options["max_categories"]
    if style == "pie":
        lo, hi = min(lo, 6), min(hi, 6)
    n = rng.randint(lo, hi)
    domain_names = [d for d in DOMAINS if len(DOMAINS[d][1]) >= n]
    if style == "line":  # a line needs an ordered axis
        domain_names = [d for d in domain_names if DOMAINS[d][2]]
    noun, vocabulary, ordered = DOMAINS[rng.choice(domain_names)]
    if ordered:
        start = rng.randint(0, len(vocabulary) - n)
        labels = tuple(vocabulary[start : start + n])
    else:
        labels = tuple(rng.sample(vocabulary, n))

    metric, unit = rng.choice(METRICS)
    if style == "pie":
        series: tuple[str, ...] = ("",)
        values = (_pie_shares(rng, n),)
        decimals, axis_title = 0, "Share in %"
        title = f"Share of {metric.lower()} by {noun}"
        colors = tuple(rng.sample(PALETTE, n))
    else:
        series = rng.choice(SERIES_SETS) if style == "grouped" else ("",)
        decimals = rng.choice((0, 0, 1))
        values = tuple(_distinct_values(rng, n, decimals) for _ in series)
        axis_title = f"{metric} {unit}"
        title = f"{metric} by {noun}"
        colors = tuple(rng.sample(PALETTE, len(series)))
    return ChartData(
        style=style,
        title=title,
        noun=noun,
        axis_title=axis_title,
        labels=labels,
        series=series,
        values=values,
        decimals=decimals,
        value_labels=rng.random() < options["value_labels"],
        colors=colors,
    )


def _plan_one_split(seed: int, split: str, count: int, options: Mapping[str, Any], taken: set) -> list[ChartData]:
    charts = []
    for index in range(count):
        attempt = 0
        while True:
            chart = plan_chart(random.Random(f"synthchart:{seed}:{split}:{index}:{attempt}"), options)
            if chart.key() not in taken:
                break
            attempt += 1
        taken.add(chart.key())
        charts.append(chart)
    return charts


def plan_split(options: Mapping[str, Any], split: str) -> list[ChartData]:
    """The charts of ``split``. Only splits before it in SPLIT_PRIORITY (and their sizes) influence it."""
    taken: set = set()
    for name in SPLIT_PRIORITY:
        if name not in options["splits"]:
            continue
        charts = _plan_one_split(options["seed"], name, options["splits"][name], options, taken)
        if name == split:
            return charts
    raise KeyError(f"split {split!r} is not configured; configured: {', '.join(options['splits'])}")


def narrow_options(options: Mapping[str, Any], split: str) -> dict[str, Any]:
    """The part of the options ``split`` depends on: split sizes after it in SPLIT_PRIORITY are left out."""
    order = SPLIT_PRIORITY[: SPLIT_PRIORITY.index(split) + 1]
    narrowed = dict(options)
    narrowed["splits"] = {s: n for s, n in options["splits"].items() if s in order}
    return narrowed


# --------------------------------------------------------------------------------------------------------------
# Questions
# --------------------------------------------------------------------------------------------------------------


def _count_question(chart: ChartData) -> Question:
    text = {
        "mini": "How many bars are shown in the chart?",
        "vbar": "How many bars are shown in the chart?",
        "hbar": "How many bars are shown in the chart?",
        "grouped": "How many groups of bars are shown in the chart?",
        "line": "How many data points does the line have?",
        "pie": "How many segments does the pie chart have?",
    }[chart.style]
    return Question("count", text, str(len(chart.labels)), 1, ())


def make_question(qtype: str, chart: ChartData, rng: random.Random) -> Question:
    if qtype == "count":
        return _count_question(chart)
    if chart.style == "mini":
        # A mini label is quoted ("B"), so the question holds the same token a tool call writes (["B"]), making the
        # label in a call a plain token copy (learned in the warm start's text steps, chartrl.warmstart.supervised).
        chart = replace(chart, labels=tuple(f'"{label}"' for label in chart.labels))
        question = make_question(qtype, replace(chart, style="vbar"), rng)
        return replace(
            question, about=tuple(label.strip('"') for label in question.about), answer=(question.answer.strip('"'))
        )
    s = rng.randrange(len(chart.series))
    values = chart.values[s]
    series = chart.series[s] or None
    value_word = f"{series} value" if series else "value"  # "the Rural value for Acme"
    noun = chart.noun
    if qtype == "extreme":
        highest = rng.random() < 0.5
        pick = max if highest else min
        i = pick(range(len(values)), key=values.__getitem__)
        if chart.style == "pie":
            word = "largest share" if highest else "smallest share"
        else:
            word = f"{'highest' if highest else 'lowest'} {value_word}"
        return Question("extreme", f"Which {noun} has the {word}?", chart.labels[i], 2, (), series)
    if qtype == "value":
        i = rng.randrange(len(values))
        label = chart.labels[i]
        text = f"What share does {label} have?" if chart.style == "pie" else f"What is the {value_word} for {label}?"
        difficulty = 1 if chart.value_labels else 2
        return Question("value", text, format_number(values[i], chart.decimals), difficulty, (label,), series)
    i, j = rng.sample(range(len(values)), 2)
    a, b = chart.labels[i], chart.labels[j]
    va, vb = Decimal(str(values[i])), Decimal(str(values[j]))
    if qtype == "compare":
        text = f"Is the {value_word} for {a} greater than the {value_word} for {b}?"
        return Question("compare", text, "Yes" if va > vb else "No", 2, (a, b), series)
    if qtype == "difference":
        text = f"What is the difference between the {value_word}s of {a} and {b}?"
        return Question("difference", text, format_number(abs(va - vb), chart.decimals), 3, (a, b), series)
    if qtype == "sum":
        text = f"What is the sum of the {value_word}s of {a} and {b}?"
        return Question("sum", text, format_number(va + vb, chart.decimals), 3, (a, b), series)
    raise KeyError(f"unknown question type {qtype!r}; known: {', '.join(QUESTION_TYPES)}")


def answer_about(chart: Mapping[str, Any], question_type: str, labels: Sequence[str]) -> str | None:
    """The answer of a ``question_type`` question asked about ``labels`` of a single-series ``chart`` (as stored in
    a row's ``extra.chart``): what a reader of a chart edited to keep those labels would truthfully answer. None
    when the type or chart does not define one (count, extreme, several series)."""
    if len(chart["series"]) != 1 or any(label not in chart["labels"] for label in labels):
        return None
    values = {label: Decimal(str(v)) for label, v in zip(chart["labels"], chart["values"][0], strict=True)}
    picked = [values[label] for label in labels]
    decimals = chart["decimals"]
    if question_type == "value" and len(picked) == 1:
        return format_number(picked[0], decimals)
    if len(picked) != 2:
        return None
    a, b = picked
    if question_type == "compare":
        return "Yes" if a > b else "No"
    if question_type == "difference":
        return format_number(abs(a - b), decimals)
    if question_type == "sum":
        return format_number(a + b, decimals)
    return None


def questions_for(chart: ChartData, rng: random.Random, weights: Mapping[str, float], k: int) -> list[Question]:
    """k distinct questions; types drawn by weight, without replacement while types remain."""
    questions: list[Question] = []
    available = dict(weights)
    for _ in range(100 * k):
        if len(questions) == k:
            break
        if not available:
            available = dict(weights)
        types = list(available)
        qtype = rng.choices(types, weights=[available[t] for t in types])[0]
        question = make_question(qtype, chart, rng)
        if all(question.text != q.text for q in questions):
            questions.append(question)
            available.pop(qtype, None)
    return questions


# --------------------------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RenderedChart:
    png: bytes
    width: int
    height: int
    bboxes: dict[str, dict[str, list[float]]]
    plot_area: list[float]
    marks: dict[str, dict[str, list[float]]]
    """series name ('' for a single series) -> label -> normalised box of the bar (bar charts only)."""


def _image_box(extent, height: int) -> list[float]:
    """A matplotlib display-space Bbox (origin bottom left) -> pixel box [x1, y1, x2, y2] (origin top left)."""
    return [extent.x0, height - extent.y1, extent.x1, height - extent.y0]


def _rendered(fig, canvas, width: int, height: int):
    """Draw ``fig`` and check matplotlib kept the requested pixel size; returns the renderer."""
    canvas.draw()
    if canvas.get_width_height() != (width, height):
        raise RuntimeError(f"matplotlib rendered {canvas.get_width_height()} instead of {width}x{height}")
    return canvas.get_renderer()


def _png(canvas, width: int, height: int) -> bytes:
    from PIL import Image

    rgba = Image.frombuffer("RGBA", (width, height), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    buffer = io.BytesIO()
    rgba.convert("RGB").save(buffer, format="PNG")
    return buffer.getvalue()


def render_mini(chart: ChartData) -> RenderedChart:
    """The mini layout through matplotlib: axes spanning the figure in pixel coordinates (y down), bars without
    anti-aliasing so their edges fall on pixel boundaries. Each label's box is the 28-px slot around its rendered
    bar, full height (bar row and letter row), i.e. whole merged patches."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    width, height = MINI_SIZE
    fig = Figure(figsize=(width / DPI, height / DPI), dpi=DPI, facecolor="white")
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)  # pixel rows, top down
    ax.set_axis_off()
    values = chart.values[0]
    centres = [MINI_SLOT * i + MINI_SLOT / 2 for i in range(len(chart.labels))]
    heights = [round(v * MINI_PX_PER_UNIT) for v in values]
    bars = ax.bar(
        centres,
        heights,
        width=MINI_BAR_WIDTH,
        bottom=[MINI_PLOT_ROW - h for h in heights],
        color=chart.colors[0],
        linewidth=0,
        antialiased=False,
    )
    for centre, label in zip(centres, chart.labels, strict=True):
        ax.text(centre, MINI_PLOT_ROW + MINI_SLOT / 2, label, ha="center", va="center", fontsize=14, color="black")
    renderer = _rendered(fig, canvas, width, height)
    bboxes = empty_bboxes()
    marks: dict[str, dict[str, list[float]]] = {"": {}}
    for label, bar in zip(chart.labels, bars, strict=True):
        box = _image_box(bar.get_window_extent(renderer), height)
        marks[""][label] = normalise_box(box, width, height)
        slot = round((box[0] + box[2]) / 2 // MINI_SLOT)
        bboxes["x_values"][label] = normalise_box([slot * MINI_SLOT, 0, (slot + 1) * MINI_SLOT, height], width, height)
    return RenderedChart(
        png=_png(canvas, width, height),
        width=width,
        height=height,
        bboxes=bboxes,
        plot_area=[0.0, 0.0, 1.0, MINI_PLOT_ROW / height],
        marks=marks,
    )


def render_chart(chart: ChartData, size: Sequence[int]) -> RenderedChart:
    """Render ``chart`` at ``size`` (the mini style has its own fixed size, MINI_SIZE)."""
    if chart.style == "mini":
        return render_mini(chart)
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    width, height = int(size[0]), int(size[1])
    fig = Figure(figsize=(width / DPI, height / DPI), dpi=DPI)
    canvas = FigureCanvasAgg(fig)
    left = 0.2 if chart.style == "hbar" else 0.12
    fig.subplots_adjust(left=left, right=0.96, top=0.88, bottom=0.16)
    ax = fig.add_subplot()
    ax.set_title(chart.title, fontsize=11)
    n = len(chart.labels)
    fmt = lambda v: format_number(v, chart.decimals)  # noqa: E731
    bar_groups: list[list] = []  # per series, the bar artists in label order

    if chart.style in ("vbar", "grouped", "hbar"):
        k = len(chart.series)
        bar_width = 0.6 if k == 1 else 0.8 / k
        for s, (name, vals, color) in enumerate(zip(chart.series, chart.values, chart.colors, strict=True)):
            offsets = [i + (s - (k - 1) / 2) * bar_width for i in range(n)]
            if chart.style == "hbar":
                bars = ax.barh(offsets, vals, height=bar_width, color=color, label=name or None)
            else:
                bars = ax.bar(offsets, vals, width=bar_width, color=color, label=name or None)
            if chart.value_labels:
                ax.bar_label(bars, labels=[fmt(v) for v in vals], fontsize=7, padding=2)
            bar_groups.append(list(bars))
        if chart.style == "hbar":
            ax.set_yticks(range(n), chart.labels, fontsize=9)
            ax.invert_yaxis()  # first label on top, as Statista draws them
            ax.set_xlabel(chart.axis_title, fontsize=9)
            ax.grid(axis="x", alpha=0.3)
        else:
            ax.set_xticks(range(n), chart.labels, fontsize=9 if n <= 6 else 7)
            ax.set_ylabel(chart.axis_title, fontsize=9)
            ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
        if k > 1:
            ax.legend(fontsize=8, frameon=False)
        # Room for the value labels at the end of the longest bar, inside the plot area.
        ax.margins(x=0.08, y=0.02) if chart.style == "hbar" else ax.margins(x=0.02, y=0.08)
    elif chart.style == "line":
        vals = chart.values[0]
        ax.plot(range(n), vals, marker="o", color=chart.colors[0])
        if chart.value_labels:
            for i, v in enumerate(vals):
                ax.annotate(fmt(v), (i, v), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
        ax.set_xticks(range(n), chart.labels, fontsize=9)
        ax.set_ylabel(chart.axis_title, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    elif chart.style == "pie":
        vals = chart.values[0]
        ax.pie(
            vals,
            labels=chart.labels,
            colors=chart.colors,
            startangle=90,
            counterclock=False,
            autopct=(lambda pct: f"{pct:.0f}%") if chart.value_labels else None,
            textprops={"fontsize": 8},
        )
        ax.set_aspect("equal")
    else:
        raise KeyError(f"unknown chart style {chart.style!r}; known: {', '.join(CHART_TYPE_OF_STYLE)}")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)

    renderer = _rendered(fig, canvas, width, height)
    plot = _image_box(ax.get_window_extent(renderer), height)
    bboxes = empty_bboxes()
    marks: dict[str, dict[str, list[float]]] = {}

    if bar_groups:
        bar_boxes = [[_image_box(b.get_window_extent(renderer), height) for b in group] for group in bar_groups]
        for name, group in zip(chart.series, bar_boxes, strict=True):
            marks[name] = {
                label: normalise_box(box, width, height) for label, box in zip(chart.labels, group, strict=True)
            }
        if chart.style == "hbar":
            ticks = [_image_box(t.get_window_extent(renderer), height) for t in ax.get_yticklabels()]
            centres = [sum((g[i][1] + g[i][3]) / 2 for g in bar_boxes) / len(bar_boxes) for i in range(n)]
            x1 = min(t[0] for t in ticks) - 2
            x2 = max([plot[2]] + [b[2] for g in bar_boxes for b in g]) + 2
            for label, (y1, y2) in zip(chart.labels, half_way_intervals(centres, plot[1], plot[3]), strict=True):
                bboxes["y_values"][label] = normalise_box([x1, y1, x2, y2], width, height)
        else:
            ticks = [_image_box(t.get_window_extent(renderer), height) for t in ax.get_xticklabels()]
            centres = [sum((g[i][0] + g[i][2]) / 2 for g in bar_boxes) / len(bar_boxes) for i in range(n)]
            y1 = plot[1]
            y2 = max([plot[3]] + [t[3] for t in ticks]) + 2
            for label, (x1, x2) in zip(chart.labels, half_way_intervals(centres, plot[0], plot[2]), strict=True):
                bboxes["x_values"][label] = normalise_box([x1, y1, x2, y2], width, height)

    return RenderedChart(
        png=_png(canvas, width, height),
        width=width,
        height=height,
        bboxes=bboxes,
        plot_area=normalise_box(plot, width, height),
        marks=marks,
    )


# --------------------------------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------------------------------


def rows_for_chart(job: tuple[str, str, int, ChartData, Mapping[str, Any]]) -> list[Row]:
    """Render one chart and ask its questions (a top-level function so worker processes can run it)."""
    dataset_name, split, index, chart, options = job
    rendered = render_chart(chart, options["image_size"])
    rng = random.Random(f"synthchart-questions:{options['seed']}:{split}:{index}")
    rows = []
    for q_index, question in enumerate(
        questions_for(chart, rng, options["question_types"], options["questions_per_chart"])
    ):
        rows.append(
            Row(
                id=f"{dataset_name}-{split}-{index:05d}-{q_index}",
                images=[rendered.png],
                problem=f"{IMAGE_PLACEHOLDER}\n{question.text}",
                answer=question.answer,
                data_source="synthchart",
                chart_type=CHART_TYPE_OF_STYLE[chart.style],
                bboxes=rendered.bboxes,
                split=split,
                extra={
                    "question": question.text,
                    "question_type": question.type,
                    "difficulty": question.difficulty,
                    "about": list(question.about),
                    "series": question.series,
                    "subset": "synthetic",
                    "style": chart.style,
                    "chart_index": index,
                    "chart": chart.as_dict(),
                    "plot_area": rendered.plot_area,
                    "marks": rendered.marks,
                    "image_size": [rendered.width, rendered.height],
                },
            )
        )
    return rows


def box_axes(dataset: DatasetConfig, split: str) -> frozenset[str]:
    """The axes whose label boxes the configured chart styles draw (bar charts; not lines or pies)."""
    return frozenset(BOX_AXIS_OF_STYLE[s] for s in dataset.options["styles"] if s in BOX_AXIS_OF_STYLE)


@config_check("synthchart categories")
def category_problems(config: Config) -> list[str]:
    """A synthchart dataset's ``min_categories`` is at most its ``max_categories``."""
    problems = []
    for name, dataset in config.datasets.items():
        opts = dataset.options
        if dataset.source == "synthchart" and opts["min_categories"] > opts["max_categories"]:
            problems.append(
                f"config key 'datasets.{name}.min_categories': value {opts['min_categories']} is larger than "
                f"max_categories ({opts['max_categories']}); make min_categories <= max_categories"
            )
    return problems


@dataset_source("synthchart", narrow_options, box_axes=box_axes)
def read_synthchart(dataset: DatasetConfig, split: str, *, threads: int = 1, **_: Any) -> Iterator[Row]:
    """Plan and render the charts of ``split``, in parallel over ``threads`` processes, with progress lines."""
    options = dataset.options
    charts = plan_split(options, split)
    jobs = [(dataset.name, split, i, chart, to_plain(options)) for i, chart in enumerate(charts)]
    progress = Progress(f"{dataset.name}/{split} rendering", len(jobs), log, unit="charts")
    if threads <= 1 or len(jobs) < 8:
        results: Iterator[list[Row]] = map(rows_for_chart, jobs)
        for rows in results:
            progress.advance()
            yield from rows
        return
    import multiprocessing

    with ProcessPoolExecutor(max_workers=threads, mp_context=multiprocessing.get_context("spawn")) as pool:
        for rows in pool.map(rows_for_chart, jobs, chunksize=4):
            progress.advance()
            yield from rows
