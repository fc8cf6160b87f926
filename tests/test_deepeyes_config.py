"""The config keys the recipe overlays use: `run_series` (an overlay runs its own series, the study's stay
defined) and a series' generation by name; the DeepEyes overlay and its CPU variant load and pass every check."""

from __future__ import annotations

import pytest
import yaml

from chartrl.config import ConfigError, load_config

from conftest import REPO

DEEPEYES = REPO / "config" / "deepeyes.yaml"
CPU = [DEEPEYES, REPO / "config" / "smoke.yaml", REPO / "config" / "deepeyes_cpu.yaml"]


def test_without_run_series_every_series_runs():
    config = load_config(root=REPO)
    assert "run_series" not in config.resolved  # no default filled in: the resolved default config is unchanged
    series = yaml.safe_load((REPO / "config" / "series.yaml").read_text())["series"]
    assert [s for s in config.series] == list(series)  # config/series.yaml's, in its order


def test_run_series_keeps_only_the_named_series(tmp_path):
    overlay = tmp_path / "only.yaml"
    overlay.write_text("run_series: [e3, e1]\n")
    config = load_config([overlay], root=REPO)
    assert set(config.series) == {"e1", "e3"} and [s.id for s in config.train_series] == list(config.series)


def test_run_series_naming_no_series_is_refused_with_the_ids(tmp_path):
    overlay = tmp_path / "only.yaml"
    overlay.write_text("run_series: [e1, d9]\n")
    with pytest.raises(ConfigError, match=r"run_series.*d9"):
        load_config([overlay], root=REPO)


def test_an_eval_series_whose_train_series_is_left_out_is_refused(tmp_path):
    overlay = tmp_path / "only.yaml"
    overlay.write_text("run_series: [e4]\n")
    with pytest.raises(ConfigError, match="e1"):
        load_config([overlay], root=REPO)


def test_the_deepeyes_overlays_load():
    gpu = load_config([DEEPEYES], root=REPO)
    assert list(gpu.series) == ["d1", "d2", "d3", "d4"] and {s.generation for s in gpu.series.values()} == {"deepeyes"}
    assert gpu.series["d1"].reward.params["tool_bonus"] == 1.2 and gpu.tools.max_tool_turns == 4
    cpu = load_config(CPU, root=REPO)
    assert (cpu.backend, cpu.model.path, cpu.judge.backend) == ("local", None, "reference")
    assert list(cpu.series) == ["d1", "d3"] and cpu.series["d1"].dataset == "zoomchart"


def test_a_generation_name_must_be_a_name(tmp_path):
    overlay = tmp_path / "gen.yaml"
    overlay.write_text("series: {e1: {generation: 'v 1'}}\n")
    with pytest.raises(ConfigError, match="generation"):
        load_config([overlay], root=REPO)
