"""Build results/report/index.html and metrics.json from a run's results."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from chartrl.config import Config
from chartrl.files import write_atomically, write_json
from chartrl.report import testcurves
from chartrl.report.collect import collect, limits
from chartrl.report.figures import PANELS, curves_figure, habits_figure, reward_parts_figure
from chartrl.report.gallery import charts_by_id, gallery_items
from chartrl.report.helpers import eval_series_of_generations
from chartrl.report.order import generations_in_order, in_order
from chartrl.report.panels import report_panels


def fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _galleries(config: Config, results: Path, limit: int) -> dict[str, list[dict[str, Any]]]:
    import pyarrow.parquet as pq

    galleries = {}
    for owner, members in eval_series_of_generations(config).items():
        generations = results / "eval" / owner / "generations.parquet"
        if not generations.is_file():
            continue
        verdicts = {}
        for series in members:
            for scorer in series.scorers:
                path = results / "eval" / series.id / f"scores_{scorer}.json"
                if path.is_file():
                    items = json.loads(path.read_text())["items"]
                    verdicts[f"{series.id}:{scorer}"] = {i["id"]: i["verdict"] for i in items}
        ids = pq.read_table(generations, columns=["id"]).column("id").to_pylist()
        charts = charts_by_id(results / "data" / members[0].dataset / f"{members[0].split}.parquet", ids)
        title = f"{owner} (checkpoint of {members[0].of}, read by {', '.join(s.id for s in members)})"
        galleries[title] = gallery_items(generations, charts, verdicts, limit, base=results.parent)
    return galleries


def build_report(config: Config, results: Path, out_dir: Path) -> dict[str, Any]:
    import jinja2
    import plotly.offline

    results, out_dir = Path(results), Path(out_dir)
    metrics = collect(config, results)
    galleries = _galleries(config, results, config.evaluate.gallery_size)
    metrics["rollouts"] = {title: len(items) for title, items in galleries.items() if items}
    metrics["panels"] = report_panels(metrics, config)
    panels = {panel["id"]: panel for panel in metrics["panels"]}
    generations = {}
    for generation in generations_in_order(config):
        members = [(s.id, s.tools) for s in config.train_series if s.generation == generation]
        curve_panels = [panels[f"training/{generation}/{key}"] for key, _ in PANELS]
        generations[generation] = {
            "curves": curves_figure(
                metrics["training"],
                members,
                f"{generation}: tool policies (solid) and no-tool baselines (dashed)",
                curve_panels,
            ),
            "parts": reward_parts_figure(metrics["training"], members, f"{generation}: reward parts"),
            "panels": [*curve_panels, panels[f"training/{generation}/reward_parts"]],
        }
    tool_policies = [(s.id, s.generation) for s in in_order(config.train_series) if s.tools]
    habits = habits_figure(
        metrics["training"], tool_policies, "What the shaping acts on: the tool policies' rollouts, step by step"
    )
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("chartrl.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "html.jinja"]),
    )
    html = environment.get_template("index.html.jinja").render(
        metrics=metrics,
        limits=limits(metrics, config),
        generations=generations,
        panels=panels,
        galleries=galleries,
        plotly_js=plotly.offline.get_plotlyjs(),
        testcurves_figure=testcurves.curve_figure(metrics),
        habits_figure=habits,
        fmt=fmt,
    )
    metrics["limits"] = limits(metrics, config)
    write_json(out_dir / "metrics.json", metrics)
    write_atomically(out_dir / "index.html", lambda tmp: tmp.write_text(html))
    return metrics
