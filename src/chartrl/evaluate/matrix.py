"""The reward x scorer matrix: every checkpoint an eval series generates on, scored by every scorer.

The eval series name which scorer reads which checkpoint (e4: e1's checkpoint by the rule, e9: e6's by the judge).
The matrix scores each of those checkpoints' generations by every scorer the config can run (``rule``, ``judge``,
and ``panel`` when ``judge.panel`` has members), so a policy trained on one reward is read by every scorer. A cell
an eval series already asks for is that series' ``scores_{scorer}.json``; any other is scored once more under the
checkpoint's generating series as ``matrix_scores_{scorer}.json`` (the ``matrix_score`` rule). The DAG and the
report read the same map (:func:`matrix_files`).
"""

from __future__ import annotations

from chartrl.config import Config, EvalSeries

SCORER_ORDER = ("rule", "judge", "panel")


def checkpoint_groups(config: Config) -> dict[str, list[EvalSeries]]:
    """Generating eval series (the first in config order of each checkpoint and data) -> every eval series that
    scores its generations."""
    groups: dict[tuple, list[EvalSeries]] = {}
    for series in config.eval_series:
        groups.setdefault((series.of, str(series.checkpoint), series.dataset, series.split), []).append(series)
    return {members[0].id: members for members in groups.values()}


RECIPE_SCORERS = ("r1v", "multiple_choice")
"""A recipe overlay's own scorers (config/geoqa_r1v.yaml, config/geoqa_mc.yaml): each reads its recipe's answer form
(think/answer tags, a boxed letter), which the study's scorers do not read."""


def matrix_scorers(config: Config) -> tuple[str, ...]:
    """The scorers this config can run: the panel only when ``judge.panel`` lists members; for a config whose eval
    series use a recipe's own scorer, only the recipe scorers they name."""
    named = {scorer for series in config.eval_series for scorer in series.scorers}
    if named & set(RECIPE_SCORERS):
        return tuple(s for s in RECIPE_SCORERS if s in named)
    return tuple(s for s in SCORER_ORDER if s != "panel" or config.judge.panel.members)


def matrix_files(config: Config) -> dict[str, dict[str, str]]:
    """Generating series -> scorer -> the scores file (relative to the results folder) of that cell."""
    out: dict[str, dict[str, str]] = {}
    for owner, members in checkpoint_groups(config).items():
        cells = {}
        for scorer in matrix_scorers(config):
            named = next((s.id for s in members if scorer in s.scorers), None)
            cells[scorer] = (
                f"eval/{named}/scores_{scorer}.json" if named else f"eval/{owner}/matrix_scores_{scorer}.json"
            )
        out[owner] = cells
    return out


def extra_matrix_files(config: Config) -> list[str]:
    """The cells no eval series asks for: what the ``matrix_score`` rule adds (relative to the results folder)."""
    return [path for cells in matrix_files(config).values() for path in cells.values() if "/matrix_scores_" in path]
