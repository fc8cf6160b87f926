"""The report's shortcut-filter section: filled from the card, or saying why not (no card; no filtered dataset)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from chartrl.config import load_config
from chartrl.data.contract import Row
from chartrl.evaluate.shortcut import decide, shortcut_card
from chartrl.report.build import build_report
from chartrl.report.panels import panel_problems

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def config():
    return load_config(root=REPO)


def _card(config) -> dict:
    settings = config.datasets["synthchart"].shortcut_filter
    rows = [
        Row(
            f"q{i}",
            [b""],
            "<image>Q?",
            "Yes",
            "synthchart",
            "v_bar",
            {"x_values": {}, "y_values": {}},
            "train",
            {"question_type": ["compare", "value"][i % 2]},
        )  # fmt: skip
        for i in range(6)
    ]
    right = {r.id: 4 if r.extra["question_type"] == "compare" else 0 for r in rows}
    answers = {
        r.id: {
            c: ["<answer>Yes</answer>"] * right[r.id] + ["<answer>No</answer>"] * (4 - right[r.id])
            for c in ("blank", "shuffled")
        }
        for r in rows
    }
    decisions = decide(rows, answers, settings)
    return shortcut_card(
        "synthchart", rows, decisions, answers, settings, kept=3, bootstrap_samples=100, confidence=0.95, seed=0,
        backend="local",
    )  # fmt: skip


def test_filled_from_the_card(config, tmp_path):
    card = tmp_path / "results" / "filter" / "synthchart" / "card.json"
    card.parent.mkdir(parents=True)
    card.write_text(json.dumps(_card(config)))
    metrics = build_report(config, tmp_path / "results", tmp_path / "report")
    [panel] = [p for p in metrics["panels"] if p["id"].startswith("shortcut_filter")]
    assert panel["id"] == "shortcut_filter/synthchart" and panel["filled"]
    shown = metrics["shortcut_filter"]["synthchart"]
    assert shown["by_question_type"]["compare"]["shortcut"] == 3 and shown["by_question_type"]["value"]["shortcut"] == 0
    assert shown["trained_on_by"] == []  # the embedded default trains no series on it
    page = (tmp_path / "report" / "index.html").read_text()
    assert 'data-shortcut="synthchart/by_question_type"' in page and "Shortcut questions (3 of 3)" in page
    assert panel_problems(tmp_path / "report") == []


def test_a_missing_card_and_no_filter_say_why(config, tmp_path):
    metrics = build_report(config, tmp_path / "results", tmp_path / "report")
    [panel] = [p for p in metrics["panels"] if p["id"].startswith("shortcut_filter")]
    assert not panel["filled"] and "results/filter/synthchart/card.json" in panel["reason"]
    assert panel_problems(tmp_path / "report") == []
    unfiltered = dataclasses.replace(
        config,
        datasets={name: dataclasses.replace(d, shortcut_filter=None) for name, d in config.datasets.items()},
    )
    metrics = build_report(unfiltered, tmp_path / "results", tmp_path / "report2")
    [panel] = [p for p in metrics["panels"] if p["id"].startswith("shortcut_filter")]
    assert panel["id"] == "shortcut_filter" and "no dataset" in panel["reason"]
    assert panel_problems(tmp_path / "report2") == []
