"""The shortcut filter's config: datasets.<name>.shortcut_filter and a train series' shortcut_filter switch,
parsed with their defaults, and bad settings refused before anything runs, naming the key, the value and the fix."""

from __future__ import annotations

import pytest

from chartrl.config import ConfigError, ShortcutFilterConfig, load_config, parse_config

from conftest import REPO, raw_default_config


def test_the_embedded_default_filters_synthchart_with_defaults_filled():
    config = load_config(root=REPO)
    settings = config.datasets["synthchart"].shortcut_filter
    assert isinstance(settings, ShortcutFilterConfig)
    assert settings.k == 4 and settings.threshold == 0.75 and settings.controls == ("blank", "shuffled")
    assert settings.mode == "remove" and settings.max_questions == 200 and settings.examples == 6  # a default
    assert config.datasets["chartqa_sample"].shortcut_filter is None
    # no series of the embedded default trains on the filtered split; the switch defaults to off
    assert not any(s.shortcut_filter for s in config.train_series)
    # the filter is not a reader option: changing it never reruns the data stage
    assert "shortcut_filter" not in config.datasets["synthchart"].options
    assert "shortcut_filter" not in config.datasets["synthchart"].to_dict()


def test_an_overlay_switches_the_filter_off():
    raw = raw_default_config()
    raw["datasets"]["synthchart"]["shortcut_filter"]["enabled"] = False
    assert parse_config(raw).datasets["synthchart"].shortcut_filter is None
    raw["series"]["e1"]["shortcut_filter"] = True  # a series cannot read a split that is not built
    with pytest.raises(ConfigError, match="series.e1.shortcut_filter"):
        parse_config(raw)


def test_a_series_opts_in():
    raw = raw_default_config()
    raw["series"]["e1"]["shortcut_filter"] = True
    raw["datasets"]["synthchart"]["shortcut_filter"]["mode"] = "downweight"
    config = parse_config(raw)
    assert config.series["e1"].shortcut_filter and not config.series["e3"].shortcut_filter
    assert config.datasets["synthchart"].shortcut_filter.weight == 0.25


def _filter(**values):
    def mutate(raw):
        raw["datasets"]["synthchart"]["shortcut_filter"].update(values)

    return mutate


BAD = [
    ("threshold zero", _filter(threshold=0), ["datasets.synthchart.shortcut_filter.threshold", "0"]),
    ("threshold above one", _filter(threshold=1.5), ["datasets.synthchart.shortcut_filter.threshold", "1.5"]),
    ("k zero", _filter(k=0), ["datasets.synthchart.shortcut_filter.k", "0", "minimum"]),
    ("no control", _filter(controls=[]), ["datasets.synthchart.shortcut_filter.controls"]),
    ("unknown control", _filter(controls=["noise"]), ["shortcut_filter.controls.0", '"noise"', "blank", "shuffled"]),
    ("unknown mode", _filter(mode="drop"), ["shortcut_filter.mode", '"drop"', "remove", "downweight"]),
    ("weight one", _filter(weight=1), ["shortcut_filter.weight", "1"]),
    ("misspelled key", _filter(treshold=0.5), ["shortcut_filter", "treshold", "allowed keys"]),
    (
        "series opts in on a dataset without a filter",
        lambda raw: (
            raw["datasets"]["synthchart"].pop("shortcut_filter"),
            raw["series"]["e1"].update(shortcut_filter=True),
        ),
        [
            "series.e1.shortcut_filter",
            "dataset 'synthchart' sets no shortcut filter",
            "datasets.synthchart.shortcut_filter",
        ],
    ),
    (
        "an eval series cannot opt in",
        lambda raw: raw["series"]["e4"].update(shortcut_filter=True),
        ["series.e4", "shortcut_filter"],
    ),
]


@pytest.mark.parametrize("case,mutate,fragments", BAD, ids=[c[0] for c in BAD])
def test_bad_filter_settings_are_refused(case, mutate, fragments):
    raw = raw_default_config()
    mutate(raw)
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    for fragment in fragments:
        assert fragment in str(err.value), f"{case}: {fragment!r} missing from:\n{err.value}"


def test_verl_refuses_a_downweighted_split_it_cannot_weight(tmp_path):
    overlay = tmp_path / "verl_downweight.yaml"
    overlay.write_text(
        "datasets:\n  chartqa:\n    shortcut_filter: {mode: downweight}\nseries:\n  e1: {shortcut_filter: true}\n"
    )
    with pytest.raises(ConfigError) as err:
        load_config([REPO / "config/gpu.yaml", overlay], root=REPO)
    message = str(err.value)
    assert "datasets.chartqa.shortcut_filter.mode" in message and "'downweight'" in message
    assert "verl" in message and "mode: remove" in message
    # remove is fine on verl, and a down-weighted split no series trains on is only a card
    overlay.write_text(
        "datasets:\n  chartqa:\n    shortcut_filter: {mode: remove}\nseries:\n  e1: {shortcut_filter: true}\n"
    )
    assert load_config([REPO / "config/gpu.yaml", overlay], root=REPO).series["e1"].shortcut_filter
    overlay.write_text("datasets:\n  chartqa:\n    shortcut_filter: {mode: downweight}\n")
    assert load_config([REPO / "config/gpu.yaml", overlay], root=REPO).datasets["chartqa"].shortcut_filter
