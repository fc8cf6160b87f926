"""The config: three configs load, the study's series are there, and every bad value is named with its fix."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest

from chartrl.config import ConfigError, EvalSeries, TrainSeries, load_config, merge_config, parse_config

from conftest import REPO, raw_default_config

DESIGN_SERIES = {
    # id: (generation, kind, tools, reward, algorithm, of)  -- the table in the README
    "e1": ("v1", "train", True, "v1_rule", "grpo", None),
    "e2": ("v1", "train", True, "v1_judge", "grpo", None),
    "e3": ("v1", "train", False, "v1_rule", "grpo", None),
    "e4": ("v1", "eval", None, None, None, "e1"),
    "e5": ("v1", "eval", None, None, None, "e2"),
    "e6": ("v2", "train", True, "v2_shaped", "grpo", None),
    "e7": ("v2", "train", False, "v2_shaped", "grpo", None),
    "e8": ("v2", "eval", None, None, None, "e6"),
    "e9": ("v2", "eval", None, None, None, "e6"),
    "e10": ("v3", "train", True, "v3_gra", "drgrpo", None),
    "e11": ("v3", "train", False, "v3_gra", "drgrpo", None),
    "e12": ("v3", "train", True, "v3_gra", "drgrpo", None),
    "e13": ("v3", "eval", None, None, None, "e10"),
    "e14": ("v3", "eval", None, None, None, "e10"),
}


CONTROLS = {"h1", "h2"}
"""The embedded default's hack control (config/series.yaml): not a series of the study, absent from gpu.yaml."""

NAMED_STEPS = {"e4": 9, "e8": 12, "e9": 12}
"""The embedded default's evaluation points (config/config.yaml), the study's 65 and 80 of 220 in proportion to 30."""


@pytest.mark.parametrize("overlays", [[], ["config/smoke.yaml"], ["config/gpu.yaml"]], ids=["default", "smoke", "gpu"])
def test_every_config_loads_with_all_14_series(overlays):
    config = load_config([REPO / o for o in overlays], root=REPO)
    assert set(config.series) - CONTROLS == set(DESIGN_SERIES)
    assert CONTROLS <= set(config.series) or overlays == ["config/gpu.yaml"]
    for sid, (generation, kind, tools, reward, algorithm, of) in DESIGN_SERIES.items():
        series = config.series[sid]
        assert (series.generation, series.kind) == (generation, kind), sid
        if kind == "train":
            assert isinstance(series, TrainSeries)
            assert (series.tools, series.reward.name, series.algorithm) == (tools, reward, algorithm), sid
        else:
            assert isinstance(series, EvalSeries)
            assert series.of == of and series.scorers, sid
            # the embedded default's named steps, the smoke run's last; gpu.yaml the study's (tests/test_overlays.py)
            expected = NAMED_STEPS.get(sid, "last") if not overlays else "last"
            assert series.checkpoint == expected or overlays == ["config/gpu.yaml"], sid


def test_series_details_follow_the_design():
    config = load_config(root=REPO)
    assert config.series["e7"].reward.params["d_tool"] == 0.0  # the no-tool baseline has no tool term
    assert config.series["e6"].reward.params["d_tool"] > 0
    assert config.series["e12"].reward.params["accuracy"] == "panel"
    assert config.series["e9"].scorers == ("judge",) and config.series["e14"].scorers == ("panel",)
    # e8/e9 and e13/e14 evaluate the same checkpoint: the diagonal pairs
    assert (config.series["e8"].of, config.series["e8"].checkpoint) == (
        config.series["e9"].of,
        config.series["e9"].checkpoint,
    )
    assert (config.series["e13"].of, config.series["e13"].checkpoint) == (
        config.series["e14"].of,
        config.series["e14"].checkpoint,
    )


def test_defaults_come_from_the_schema_and_are_not_written_back():
    raw = raw_default_config()
    before = copy.deepcopy(raw)
    config = parse_config(raw)
    assert raw == before  # the caller's dict is untouched
    assert config.mlflow.tracking_uri == "sqlite:///results/mlflow.db"
    assert config.datasets["synthchart"].options["questions_per_chart"] == 2
    assert config.series["e1"].reward.params["tool_bonus"] == 0
    assert config.rollout.kv_reuse is True  # pass 2 reuses pass 1's keys/values unless switched off
    # ChartQA's own relaxed accuracy by default (years within 5%), for the rewards and the scorers alike
    assert config.series["e1"].reward.params["year_rule"] == "standard"
    assert config.series["e6"].reward.params["year_rule"] == "standard"
    assert config.evaluate.year_rule == "standard" and config.evaluate.curve_rows == 100
    with pytest.raises(TypeError):
        config.datasets["synthchart"].options["seed"] = 3  # read-only view


def test_gpu_overlay_switches_backend_model_and_data():
    config = load_config([REPO / "config/gpu.yaml"], root=REPO)
    assert config.backend == "verl" and config.model_path == "Qwen/Qwen2.5-VL-3B-Instruct"
    assert config.needed_splits() == {"chartqa": ("train", "val", "test")}  # no synthetic data on the cluster


def test_merge_replaces_lists_and_merges_mappings_like_snakemake():
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    merge_config(base, {"a": {"c": [3]}, "e": 2})
    assert base == {"a": {"b": 1, "c": [3]}, "d": 1, "e": 2}


def _broken(mutate):
    raw = raw_default_config()
    mutate(raw)
    return raw


def _hypothesis(**changes):
    return {
        "id": "h",
        "generation": "v1",
        "claim": "the tool policy beats its baseline",
        "metric": "test_accuracy",
        "series": ["e1", "e3"],
        "comparison": "greater",
        **changes,
    }


BAD_CONFIGS = [
    # (case, mutation, fragments the message must contain: key, bad value, allowed values or fix)
    (
        "unknown algorithm",
        lambda c: c["series"]["e1"].update(algorithm="ppo"),
        ["series.e1.algorithm", '"ppo"', "grpo", "drgrpo"],
    ),
    (
        "unknown reward name",
        lambda c: c["series"]["e2"]["reward"].update(name="v9_magic"),
        ["series.e2.reward.name", '"v9_magic"', "v1_rule", "v3_gra"],
    ),
    (
        "eval of a missing train series",
        lambda c: c["series"]["e4"].update(of="e99"),
        ["series.e4.of", "'e99'", "names no train series", "e1, e2, e3"],
    ),
    (
        "eval of an eval series",
        lambda c: c["series"]["e5"].update(of="e4"),
        ["series.e5.of", "'e4'", "names no train series"],
    ),
    ("misspelled key", lambda c: c["series"]["e6"].update(algoritm="grpo"), ["series.e6", "algoritm", "allowed keys"]),
    (
        "reward param of another reward",
        lambda c: c["series"]["e1"]["reward"].update(d_tool=0.5),
        ["series.e1.reward", "d_tool"],
    ),
    (
        "negative delta",
        lambda c: c["series"]["e6"]["reward"].update(d_format=-1),
        ["series.e6.reward.d_format", "-1", "minimum"],
    ),
    ("bad checkpoint", lambda c: c["series"]["e8"].update(checkpoint="best"), ["series.e8.checkpoint", "best"]),
    (
        "unknown scorer",
        lambda c: c["series"]["e9"].update(scorers=["vibes"]),
        ["series.e9.scorers.0", '"vibes"', "rule", "judge", "panel"],
    ),
    (
        "wrong type",
        lambda c: c["datasets"]["synthchart"].update(seed="zero"),
        ["datasets.synthchart.seed", '"zero"', "integer"],
    ),
    (
        "unknown dataset source",
        lambda c: c["datasets"]["synthchart"].update(source="plotqa"),
        ["datasets.synthchart.source", '"plotqa"', "chartqa_original", "synthchart"],
    ),
    (
        "train dataset not defined",
        lambda c: c["train"].update(dataset="nowhere"),
        ["train.dataset", "'nowhere'", "not defined", "synthchart"],
    ),
    (
        "train dataset without val split",
        lambda c: c["datasets"]["synthchart"].update(splits={"train": 5, "test": 5}),
        ["train.dataset", "val", "datasets.synthchart"],
    ),
    ("extra dataset not defined", lambda c: c.update(extra_datasets=["ghost"]), ["extra_datasets[0]", "'ghost'"]),
    (
        "min above max categories",
        lambda c: c["datasets"]["synthchart"].update(min_categories=9, max_categories=4),
        ["datasets.synthchart.min_categories", "max_categories"],
    ),
    (
        "missing required series field",
        lambda c: c["series"]["e3"].pop("tools"),
        ["series.e3", "'tools' is a required property"],
    ),
    (
        "unknown prompt template",
        lambda c: c.setdefault("prompts", {}).update(tool_template="tool_usee"),
        ["prompts.tool_template", "'tool_usee'", "tool_use_compact"],
    ),
    ("bad series id", lambda c: c["series"].update({"e-15": dict(c["series"]["e1"])}), ["series", "e-15"]),
    (
        "unknown judge backend",
        lambda c: c.update(judge={"backend": "gpt4"}),
        ["judge.backend", '"gpt4"', "openai", "reference"],
    ),
    (
        "openai judge without an endpoint",
        lambda c: c.update(judge={"backend": "openai", "model": "m"}),
        ["judge.base_url", "needs a base_url", "backend: reference"],
    ),
    (
        "openai panel member without a model",
        lambda c: c.update(
            judge={"panel": {"members": [{"name": "a", "backend": "openai", "base_url": "http://h/v1"}]}}
        ),
        ["judge.panel.members[0].model", "needs a model"],
    ),
    (
        "a key in config instead of the name of its variable",
        lambda c: c.update(judge={"api_key": "sk-abc"}),
        ["judge", "api_key", "allowed keys", "api_key_env"],
    ),
    (
        "unknown panel combination",
        lambda c: c.update(judge={"panel": {"combine": "vote"}}),
        ["judge.panel.combine", '"vote"', "majority", "mean"],
    ),
    (
        "unknown judge template",
        lambda c: c.update(judge={"template": "judge_nope"}),
        ["judge.template", "'judge_nope'", "judge_equivalence"],
    ),
    (
        "unknown tool (checked against the tool registry, not a schema list)",
        lambda c: c.update(tools={"names": ["focus_on_x_values_with_mask", "focus_on_z_values"]}),
        ["tools.names", "'focus_on_z_values'", "focus_on_x_values_with_draw", "zoom_in"],
    ),
    (
        "rerank with no samples",
        lambda c: c["series"]["e4"].update(rerank={"n": 0, "by": ["scs"]}),
        ["series.e4.rerank.n", "0", "minimum"],
    ),
    (
        "unknown rerank method",
        lambda c: c["series"]["e4"].update(rerank={"n": 4, "by": ["scs", "vibes"]}),
        ["series.e4.rerank.by.1", '"vibes"', "scs", "confidence", "scorer", "oracle"],
    ),
    (
        "rerank by the external scorer without an endpoint",
        lambda c: c["series"]["e13"].update(rerank={"n": 4, "by": ["scorer"]}),
        ["series.e13.rerank.by", "'scorer'", "series.e13.rerank.scorer", "base_url"],
    ),
    (
        "rerank scorer with an unknown template",
        lambda c: c["series"]["e4"].update(
            rerank={"n": 2, "by": ["scorer"], "scorer": {"base_url": "http://h/v1", "model": "m", "template": "nope"}}
        ),
        ["series.e4.rerank.scorer.template", "'nope'", "rerank_score"],
    ),
    (
        "kv_reuse not a boolean",
        lambda c: c.update(rollout={"kv_reuse": "yes"}),
        ["rollout.kv_reuse", '"yes"', "boolean"],
    ),
    (
        "unknown year rule of the scorers",
        lambda c: c["evaluate"].update(year_rule="lenient"),
        ["evaluate.year_rule", '"lenient"', "standard", "strict"],
    ),
    (
        "unknown year rule of a reward",
        lambda c: c["series"]["e1"].update(reward={"name": "v1_rule", "year_rule": "exact"}),
        ["series.e1.reward.year_rule", '"exact"', "standard", "strict"],
    ),
    ("a test curve on no question", lambda c: c["evaluate"].update(curve_rows=0), ["evaluate.curve_rows", "minimum"]),
    (
        "a hypothesis naming no series",
        lambda c: c.update(hypotheses=[_hypothesis(series=["e1", "e99"])]),
        ["hypotheses[0].series[1]", "'e99'", "names no series", "e1, e2"],
    ),
    (
        "a hypothesis on validation naming an eval series",
        lambda c: c.update(hypotheses=[_hypothesis(metric="val_accuracy", series=["e4", "e3"])]),
        ["hypotheses[0].series[0]", "val_accuracy needs a train series", "'e4' is an eval series"],
    ),
    (
        "a drift hypothesis on two series",
        lambda c: c.update(hypotheses=[_hypothesis(metric="drift", series=["e9", "e14"])]),
        ["hypotheses[0].series", "drift reads one eval series", "name one eval series"],
    ),
    (
        "a drift hypothesis on a train series",
        lambda c: c.update(hypotheses=[_hypothesis(metric="drift", series=["e6"])]),
        ["hypotheses[0].series[0]", "drift needs an eval series", "'e6'"],
    ),
    (
        "two hypotheses under one id",
        lambda c: c.update(hypotheses=[_hypothesis(), _hypothesis(series=["e6", "e7"])]),
        ["hypotheses[1].id", "'h'", "used twice"],
    ),
    (
        "an unknown hypothesis metric",
        lambda c: c.update(hypotheses=[_hypothesis(metric="reward")]),
        ["hypotheses.0.metric", '"reward"', "test_accuracy"],
    ),
    (
        "an unknown hypothesis comparison",
        lambda c: c.update(hypotheses=[_hypothesis(comparison="less")]),
        ["hypotheses.0.comparison", '"less"', "greater", "not_less"],
    ),
    (
        "a hacking threshold above 1",
        lambda c: c["evaluate"].update(hacking_drift=1.5),
        ["evaluate.hacking_drift", "1.5", "maximum"],
    ),
    (
        "r1v format weight above 1",
        lambda c: c["series"]["e1"].update(reward={"name": "r1v", "format_weight": 2}),
        ["series.e1.reward.format_weight", "2", "maximum"],
    ),
]


@pytest.mark.parametrize("case,mutate,fragments", BAD_CONFIGS, ids=[c[0] for c in BAD_CONFIGS])
def test_bad_config_names_key_value_and_fix(case, mutate, fragments):
    with pytest.raises(ConfigError) as err:
        parse_config(_broken(mutate))
    message = str(err.value)
    for fragment in fragments:
        assert fragment in message, f"{case}: {fragment!r} missing from:\n{message}"


def test_several_problems_are_reported_at_once():
    def mutate(c):
        c["series"]["e1"]["algorithm"] = "ppo"
        c["series"]["e13"]["of"] = "e42"

    with pytest.raises(ConfigError) as err:
        parse_config(_broken(mutate))
    assert "series.e1.algorithm" in str(err.value)
    # the cross-reference check runs after the schema passes; the schema problem is reported first


@pytest.mark.slow
def test_cli_config_check_exits_nonzero_with_the_message(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("series:\n  e10:\n    algorithm: dr_grpo\n")
    run = subprocess.run(
        [sys.executable, "-m", "chartrl", "config", "check", "--root", str(REPO), "--configfile", str(bad)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2
    assert "series.e10.algorithm" in run.stderr and '"dr_grpo"' in run.stderr and "drgrpo" in run.stderr
    good = subprocess.run(
        [
            sys.executable,
            "-m",
            "chartrl",
            "config",
            "check",
            "--root",
            str(REPO),
            "--configfile",
            str(REPO / "config/smoke.yaml"),
        ],
        capture_output=True,
        text=True,
    )
    assert good.returncode == 0 and "16 series" in good.stdout  # the 14 and the hack control


def test_schema_in_package_is_the_workflow_schema():
    """The package ships the very file the Snakefile validates with (a link), not a copy that can drift."""
    from importlib import resources

    packaged = resources.files("chartrl").joinpath("schemas/config.schema.yaml").read_text()
    assert packaged == (REPO / "workflow/schemas/config.schema.yaml").read_text()


def test_the_schema_reads_the_same_with_libyaml_as_with_the_pure_python_parser():
    """config_schema() parses with libyaml's loader for speed; what the Snakefile validates with is the same data."""
    import yaml

    from chartrl.config.schema import config_schema

    assert config_schema() == yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())


def test_judge_defaults_are_offline_and_members_inherit():
    config = load_config(root=REPO)
    judge = config.judge
    assert judge.backend == "reference" and judge.cache_path == "results/judge_cache.sqlite"
    assert [m.name for m in judge.panel.members] == ["exact", "tolerant", "relaxed"]
    tolerant = judge.member(judge.panel.members[1])
    # a member sets what differs and inherits the rest; the config itself is untouched
    assert (tolerant.numeric_tolerance, tolerant.string_match, tolerant.max_response_chars) == (0.01, "token_set", 1000)
    assert judge.numeric_tolerance == 0.0
    assert type(judge).from_dict(judge.to_dict()) == judge


def test_a_series_judge_keys_are_its_rewards_and_its_eval_series_judge_its_generations_with_them():
    """h1, the hack control, rewards with an exploitable judge (candidates: any, its own key); h2 scores h1's
    generations with it; every other series, train or eval, has the top-level judge."""
    config = load_config(root=REPO)
    assert config.judge.candidates == "refuse" and config.judge.false_accept_rate > config.judge.false_reject_rate > 0
    for sid in ("h1", "h2"):
        judge = config.judge_of(sid)
        assert judge.candidates == "any" and judge.false_accept_rate == config.judge.false_accept_rate  # merged over
    assert all(config.judge_of(sid) == config.judge for sid in ("e2", "e5", "e9", "e12", "e14"))
    assert config.series["h2"].of == "h1" and set(config.series["h2"].scorers) == {"rule", "judge"}


def test_gpu_overlay_points_the_judge_at_an_openai_endpoint_by_key_name():
    judge = load_config([REPO / "config/gpu.yaml"], root=REPO).judge
    assert judge.backend == "openai" and judge.base_url.startswith("https://")
    assert judge.api_key_env == "OPENROUTER_API_KEY"
    members = [judge.member(m) for m in judge.panel.members]
    assert {m.backend for m in members} == {"openai"} and {m.template for m in members} == {
        "judge_equivalence",
        "judge_strict",
    }


def test_rerank_settings_are_typed_with_their_defaults():
    """The embedded default reranks e4 (no external scorer: no endpoint); a scorer's settings get the schema's
    defaults, and only a series that asks for reranking has any."""
    config = load_config()
    rerank = config.series["e4"].rerank
    assert rerank.n >= 1 and "scorer" not in rerank.by and rerank.questions is not None
    assert config.series["e5"].rerank is None

    def mutate(c):
        c["series"]["e13"]["rerank"] = {
            "n": 3,
            "by": ["scorer", "oracle"],
            "scorer": {"base_url": "http://localhost:8000/v1", "model": "OpenGVLab/VisualPRM-8B"},
        }

    scorer = parse_config(_broken(mutate)).series["e13"].rerank.scorer
    assert scorer.template == "rerank_score" and scorer.api_key_env == "OPENAI_API_KEY"
    assert scorer.cache_path == "results/judge_cache.sqlite" and scorer.max_retries == 5
