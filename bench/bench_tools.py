"""Tool benchmarks (part of `make bench`): per-call latency of each visual tool on 800x600 charts.

Synthetic bar charts are rendered at 800x600 with their exact boxes (chartrl.data.synthchart); each tool is
called CALLS_PER_TOOL times through ``apply_tool_call`` (argument checks, label matching, the pixel edit; the
chart already decoded, as in the rollout), cycling over the charts; the x-value tools run on vertical and grouped
bar charts, the y-value tools on horizontal ones, zoom_in on all with seeded random boxes. Parsing the call text
(``parse_tool_calls``) is timed on its own. Reported: p50 / p95 / max in milliseconds.
"""

from __future__ import annotations

import io
import random
import statistics
import time

CHART_SIZE = (800, 600)
CHARTS_PER_STYLE = 4
CALLS_PER_TOOL = 300


def _charts():
    from PIL import Image

    from chartrl.data.synthchart import plan_chart, render_chart

    from conftest import dataset_from

    options = dict(dataset_from({"source": "synthchart", "splits": {"test": 1}}, name="bench").options)
    charts = []
    for style in ("vbar", "grouped", "hbar"):
        for index in range(CHARTS_PER_STYLE):
            plan = plan_chart(random.Random(f"bench-tools:{style}:{index}"), {**options, "styles": {style: 1}})
            rendered = render_chart(plan, CHART_SIZE)
            charts.append((Image.open(io.BytesIO(rendered.png)).convert("RGB"), rendered.bboxes))
    return charts


def _calls_for(name: str, charts, rng: random.Random):
    from chartrl.tools import TOOLS, ToolCall

    axis = TOOLS[name].axis
    usable = [(image, boxes) for image, boxes in charts if axis is None or boxes[axis]]
    for k in range(CALLS_PER_TOOL):
        image, boxes = usable[k % len(usable)]
        if axis is None:
            x1, y1 = rng.uniform(0, 0.8), rng.uniform(0, 0.8)
            arguments = {"bbox_2d": [x1, y1, rng.uniform(x1 + 0.01, 1.0), rng.uniform(y1 + 0.01, 1.0)]}
        else:
            labels = list(boxes[axis])
            arguments = {axis: rng.sample(labels, rng.randint(1, len(labels) - 1))}
        yield image, boxes, ToolCall(name, arguments)


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered) * 1e3:.2f} | {p95 * 1e3:.2f} | {ordered[-1] * 1e3:.2f}"


def bench_tool_latency() -> list[str]:
    from chartrl.tools import TOOLS, apply_tool_call, format_tool_call, parse_tool_calls

    charts = _charts()
    rows = []
    for name in TOOLS:
        samples = []
        for image, boxes, call in _calls_for(name, charts, random.Random(f"bench-tools:{name}")):
            start = time.perf_counter()
            result = apply_tool_call(image, boxes, call)
            samples.append(time.perf_counter() - start)
            assert result.ok, result.observation
        rows.append(f"| `{name}` | {_ms(samples)} |")
    texts = [
        format_tool_call(call.name, call.arguments) for _, _, call in _calls_for("zoom_in", charts, random.Random(0))
    ]
    samples = []
    for text in texts:
        start = time.perf_counter()
        parse_tool_calls(text)
        samples.append(time.perf_counter() - start)
    rows.append(f"| parse_tool_calls (one zoom_in call) | {_ms(samples)} |")
    return [
        "## Visual tools: per-call latency",
        "",
        f"`apply_tool_call` on {len(charts)} synthetic bar charts of {CHART_SIZE[0]}x{CHART_SIZE[1]} "
        f"({CALLS_PER_TOOL} calls per tool, one process); milliseconds.",
        "",
        "| tool | p50 | p95 | max |",
        "|---|---|---|---|",
        *rows,
        "",
    ]


def sections(args) -> list[str]:
    return bench_tool_latency()
