"""Training curves per reward generation, tool policy beside its no-tool baseline (plotly, rendered to divs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PANELS = (
    ("val/accuracy", "validation accuracy"),
    ("val_shuffled_images/accuracy", "validation accuracy, shuffled-image control"),
    ("val/accuracy_value", "validation accuracy, value questions"),
    ("reward/overall", "reward (overall)"),
    ("rollout/tool_call_ratio", "tool-call ratio"),
    ("rollout/correct_label_ratio", "calls keeping the asked labels (rollouts)"),
    ("rollout/tool_success", "tool success"),
    ("val/format_rate", "answers in format (validation)"),
    ("rollout/response_length", "response length (sampled tokens)"),
)


def curves_figure(training: Mapping[str, Any], members: list[tuple[str, bool]], title: str) -> str:
    """One figure of the PANELS; a trace per series (solid: tools, dashed: no-tool baseline)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    figure = make_subplots(rows=3, cols=3, subplot_titles=[label for _, label in PANELS], vertical_spacing=0.12)
    colors = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")
    for index, (sid, tools) in enumerate(members):
        curves = training.get(sid, {}).get("curves", {})
        for panel, (key, _) in enumerate(PANELS):
            points = curves.get(key, [])
            figure.add_trace(
                go.Scatter(
                    x=[p[0] for p in points],
                    y=[p[1] for p in points],
                    mode="lines+markers" if key.startswith("val") else "lines",
                    name=f"{sid} ({'tools' if tools else 'no tools'})",
                    legendgroup=sid,
                    showlegend=panel == 0,
                    line={"color": colors[index % len(colors)], "dash": "solid" if tools else "dash"},
                ),
                row=panel // 3 + 1,
                col=panel % 3 + 1,
            )
    figure.update_layout(title=title, height=780, margin={"l": 40, "r": 20, "t": 70, "b": 40}, template="plotly_white")
    figure.update_xaxes(title_text="step")
    return figure.to_html(full_html=False, include_plotlyjs=False)


def reward_parts_figure(training: Mapping[str, Any], members: list[tuple[str, bool]], title: str) -> str:
    """Each reward part of each series over steps (the parts add up to reward/overall)."""
    import plotly.graph_objects as go

    figure = go.Figure()
    for sid, tools in members:
        curves = training.get(sid, {}).get("curves", {})
        for key in sorted(k for k in curves if k.startswith("reward/") and k != "reward/overall"):
            points = curves[key]
            if not any(p[1] for p in points):
                continue  # a part that is always 0 (switched off) adds nothing to read
            figure.add_trace(
                go.Scatter(
                    x=[p[0] for p in points],
                    y=[p[1] for p in points],
                    mode="lines",
                    name=f"{sid} {key.removeprefix('reward/')}",
                    line={"dash": "solid" if tools else "dash"},
                )
            )
    figure.update_layout(title=title, height=360, template="plotly_white", xaxis_title="step", yaxis_title="mean part")
    return figure.to_html(full_html=False, include_plotlyjs=False)
