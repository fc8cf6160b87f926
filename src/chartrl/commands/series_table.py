"""The README's table of the study's series, rendered from the config (``chartrl config series --out README.md``),
so that a series added to ``config/series.yaml`` is one line of config and one command, never a table kept by hand.
A test fails while the README's table is not what the config renders to."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chartrl.config import Config, ConfigError, RewardSpec, TrainSeries, parse_reward_spec

BEGIN = "<!-- the series table: `chartrl config series --out README.md` writes it from config/series.yaml -->"
END = "<!-- end of the series table -->"


def shown(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{key} {shown(item)}" for key, item in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(map(shown, value))
    return str(value).lower() if isinstance(value, bool) else str(value)


def reward_text(reward: RewardSpec, judge: Mapping[str, Any] | None) -> str:
    """The reward's name and the parameters it sets apart from their defaults; the series' own judge keys."""
    defaults = parse_reward_spec({"name": reward.name}).params
    own = {key: value for key, value in reward.params.items() if defaults.get(key) != value}
    text = reward.name + (f" ({', '.join(f'{k}: {shown(v)}' for k, v in own.items())})" if own else "")
    return text + (f"; judge: {shown(judge)}" if judge else "")


def render_series_table(config: Config) -> str:
    """One row per series of ``config``, in its order: id, generation, kind, tools, the reward (a train series) or
    the scorers (an eval series), the algorithm, and its description."""
    lines = [
        "| id | generation | kind | tools | reward or scorers | algorithm | what it is |",
        "|---|---|---|---|---|---|---|",
    ]
    for series in config.series.values():
        if isinstance(series, TrainSeries):
            judge = config.resolved["series"][series.id].get("judge")
            cells = ["train", "yes" if series.tools else "no", reward_text(series.reward, judge), series.algorithm]
        else:
            checkpoint = "" if series.checkpoint == "last" else f" (checkpoint {series.checkpoint})"
            scorers = " and ".join(series.scorers) + (" scorers" if len(series.scorers) > 1 else " scorer")
            cells = [f"eval of {series.of}{checkpoint}", "", scorers, ""]
        lines.append("| " + " | ".join([series.id, series.generation, *cells, series.description]) + " |")
    return "\n".join(lines) + "\n"


def with_series_table(text: str, table: str) -> str:
    """``text`` (the README) with ``table`` between its markers."""
    if BEGIN not in text or END not in text:
        raise ConfigError(f"the file has no series table to replace: its place is marked by the lines {BEGIN} and {END}")
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:start] + "\n" + table + text[end:]
