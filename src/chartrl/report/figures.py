"""Training curves per reward generation, tool policy beside its no-tool baseline (plotly, rendered to divs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


HABIT_PANELS = (
    ("rollout/format_rate", "answers with a format error", True),
    ("rollout/preamble_rate", "answers restating the question first", False),
    ("rollout/failed_call_rate", "calls that failed or did not parse", False),
    ("rollout/unhelpful_call_rate", "calls that ran before a wrong answer", False),
    ("reward/bonus_on_wrong", "shaping bonus paid per wrong answer", False),
    ("rollout/wrong_answer_length", "sampled tokens of a wrong answer", False),
)
"""What the generations' shaping acts on, per training step of the tool policies' rollouts: (key, title, plotted as
1 - the value)."""


def habits_figure(training: Mapping[str, Any], members: list[tuple[str, str]], title: str) -> str:
    """The HABIT_PANELS over steps, a trace per tool policy (``members``: its id and generation). A reward without
    shaping parts (v1) logs no bonus on wrong answers: its trace is absent from that panel."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    figure = make_subplots(rows=2, cols=3, subplot_titles=[label for _, label, _ in HABIT_PANELS])
    colors = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
    for index, (sid, generation) in enumerate(members):
        curves = training.get(sid, {}).get("curves", {})
        for panel, (key, _, complement) in enumerate(HABIT_PANELS):
            points = curves.get(key, [])
            figure.add_trace(
                go.Scatter(
                    x=[p[0] for p in points],
                    y=[1 - p[1] if complement else p[1] for p in points],
                    mode="lines",
                    name=f"{sid} ({generation})",
                    legendgroup=sid,
                    showlegend=panel == 0,
                    line={"color": colors[index % len(colors)]},
                ),
                row=panel // 3 + 1,
                col=panel % 3 + 1,
            )
    figure.update_layout(title=title, height=560, margin={"l": 40, "r": 20, "t": 70, "b": 40}, template="plotly_white")
    figure.update_xaxes(title_text="step")
    return figure.to_html(full_html=False, include_plotlyjs=False)


def _wrap(text: str, width: int = 48) -> str:
    """``text`` in lines of about ``width`` characters, for a plotly annotation (<br> between lines)."""
    import textwrap

    return "<br>".join(textwrap.wrap(text, width))


def curves_figure(
    training: Mapping[str, Any],
    members: list[tuple[str, bool]],
    title: str,
    panels: Sequence[Mapping[str, Any]] | None = None,
) -> str:
    """One figure of the PANELS; a trace per series (solid: tools, dashed: no-tool baseline). ``panels``
    (``chartrl.report.panels.curve_panels``, in PANELS order) names the key each series plots in each subplot and,
    for an empty one, the reason, written in its place."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    figure = make_subplots(rows=3, cols=3, subplot_titles=[label for _, label in PANELS], vertical_spacing=0.12)
    colors = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")
    for index, (sid, tools) in enumerate(members):
        curves = training.get(sid, {}).get("curves", {})
        for panel, (key, _) in enumerate(PANELS):
            plotted = panels[panel]["keys"].get(sid, key) if panels else key
            points = curves.get(plotted, [])
            figure.add_trace(
                go.Scatter(
                    x=[p[0] for p in points],
                    y=[p[1] for p in points],
                    mode="lines+markers" if plotted.startswith("val") else "lines",
                    name=f"{sid} ({'tools' if tools else 'no tools'})",
                    legendgroup=sid,
                    showlegend=panel == 0,
                    line={"color": colors[index % len(colors)], "dash": "solid" if tools else "dash"},
                ),
                row=panel // 3 + 1,
                col=panel % 3 + 1,
            )
    for panel, info in enumerate(panels or []):
        text = info.get("reason") if not info["filled"] else info.get("note")
        if text:
            axis = "" if panel == 0 else str(panel + 1)
            figure.add_annotation(
                text=_wrap(("not shown: " if not info["filled"] else "") + text),
                xref=f"x{axis} domain",
                yref=f"y{axis} domain",
                x=0.5,
                y=0.5 if not info["filled"] else 0.98,
                showarrow=False,
                font={"size": 10, "color": "#b42318" if not info["filled"] else "#555"},
                bgcolor="rgba(255,255,255,0.8)",
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
        # training rollouts' parts (reward/<part>); a verl run logs them only at validation (val_reward/<part>)
        prefix = "reward/" if any(k.startswith("reward/") and k != "reward/overall" for k in curves) else "val_reward/"
        for key in sorted(k for k in curves if k.startswith(prefix) and k != f"{prefix}overall"):
            points = curves[key]
            if not any(p[1] for p in points):
                continue  # a part that is always 0 (switched off) adds nothing to read
            figure.add_trace(
                go.Scatter(
                    x=[p[0] for p in points],
                    y=[p[1] for p in points],
                    mode="lines" if prefix == "reward/" else "lines+markers",
                    name=f"{sid} {key.removeprefix(prefix)}{' (validation)' if prefix == 'val_reward/' else ''}",
                    line={"dash": "solid" if tools else "dash"},
                )
            )
    figure.update_layout(title=title, height=360, template="plotly_white", xaxis_title="step", yaxis_title="mean part")
    return figure.to_html(full_html=False, include_plotlyjs=False)
