"""The order the report shows generations in: by generation name (v1 < v2 < v3 < v10 < any other, naturally), not
by the order of the config's series mapping."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import pytest

from chartrl.config import load_config
from chartrl.report.comparisons import generation_chain
from chartrl.report.order import generations_in_order, in_generation_order, in_order, is_numbered

from conftest import REPO


@pytest.mark.parametrize(
    "names,ordered",
    [
        (["v1", "v3", "v2"], ["v1", "v2", "v3"]),  # the mapping's order does not decide
        (["v10", "v2", "v1"], ["v1", "v2", "v10"]),  # numbers compare as numbers, not as text
        (["control", "v3", "v1"], ["v1", "v3", "control"]),  # a control generation after the numbered ones
        (["hack2", "hack10", "v1", "baseline"], ["v1", "baseline", "hack2", "hack10"]),  # others: natural order
        (["v1", "v1", "v2"], ["v1", "v2"]),  # each once
        (["V1", "v1"], ["v1", "V1"]),  # only the study's lower-case v<number> counts as numbered
    ],
)
def test_generations_sort_by_name(names, ordered):
    assert in_generation_order(names) == ordered


@pytest.mark.parametrize(
    "name,numbered", [("v1", True), ("v12", True), ("control", False), ("v", False), ("v1b", False)]
)
def test_numbered_generations(name, numbered):
    assert is_numbered(name) == numbered


@pytest.fixture(scope="module")
def shuffled():
    """The default config with its series listed v1, v3, v2 (as an overlay's merge can list them), and a control
    generation's tool series first."""
    config = load_config(root=REPO)
    control = dataclasses.replace(config.series["e1"], id="h1", generation="control")
    order = ["h1", *[sid for g in ("v1", "v3", "v2") for sid, s in config.series.items() if s.generation == g]]
    series = {**config.series, "h1": control}
    return dataclasses.replace(config, series=MappingProxyType({sid: series[sid] for sid in order}))


def test_the_report_orders_series_and_generations_by_name(shuffled):
    assert list(shuffled.series)[0] == "h1" and generations_in_order(shuffled) == ["v1", "v2", "v3", "control"]
    assert [s.id for s in in_order(shuffled.train_series)] == ["e1", "e2", "e3", "e6", "e7", "e10", "e11", "e12", "h1"]


def test_the_gain_chain_runs_v1_v2_v3_and_leaves_a_control_out(shuffled):
    assert [s.id for s in generation_chain(shuffled, tools=True)] == ["e1", "e6", "e10"]
    assert [s.id for s in generation_chain(shuffled, tools=False)] == ["e3", "e7", "e11"]
