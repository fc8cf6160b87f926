"""What a cluster user of config/gpu.yaml needs to be true before a single GPU-hour is spent: nothing the embedded
default chooses for its 2 M-parameter model leaks into the study, the study offers the six ReFocus tools with the
full prompt on ChartQA with label boxes, its eval series name the study's steps and the train series keep them, and
a study that cannot work (tools on data without boxes, a step never saved) is refused before anything runs. And
config/rehearsal.yaml changes only what a CPU cannot run."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from chartrl.config import ConfigError, load_config, read_config_files
from chartrl.tools.registry import TOOLS
from chartrl.tools.study_checks import tool_data_problems

from conftest import REPO, snakemake

GPU = REPO / "config" / "gpu.yaml"
REHEARSAL = REPO / "config" / "rehearsal.yaml"
SIX_TOOLS = [name for name, spec in TOOLS.items() if spec.axis is not None]

# Keys config/config.yaml sets that gpu.yaml may leave as they are, and why. Everything else the embedded default
# sets must be set again by gpu.yaml.
NEUTRAL = {
    "mlflow.tracking_uri": "where MLflow writes (results/mlflow.db), the same for every config",
    "data.max_reject_fraction": "the schema's own default, a data-quality bound, not a model choice",
    "warmstart.": "the warm start runs only for the tiny model (model.path null); gpu.yaml names a pretrained model",
    "datasets.synthchart.": "defined, but no series of gpu.yaml reads it and extra_datasets is []",
    "datasets.chartqa_sample.": "defined, but no series of gpu.yaml reads it and extra_datasets is []",
    "hypotheses": "a hypothesis goes with the series it names, which a recipe leaves out (gpu.yaml sets its own)",
    "series.e4.": "the miniature's evaluation points; gpu.yaml names the study's, a recipe's run_series drops e1-e14",
    "series.e8.": "the miniature's evaluation points; gpu.yaml names the study's, a recipe's run_series drops e1-e14",
    "series.e9.": "the miniature's evaluation points; gpu.yaml names the study's, a recipe's run_series drops e1-e14",
    **{
        f"series.{sid}.reward.": "the miniature's length budget; gpu.yaml sets the study's, a recipe's run_series "
        "drops the study's series"
        for sid in ("e6", "e7", "e10", "e11", "e12")
    },
    "judge.false_accept_rate": "read by the reference judge only: every judge the overlay uses is an LLM",
    "judge.false_reject_rate": "read by the reference judge only: every judge the overlay uses is an LLM",
}


def _leaves(data, prefix=""):
    for key, value in data.items():
        if isinstance(value, dict) and value:
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


@pytest.fixture(scope="module")
def gpu():
    return load_config([GPU], root=REPO)


# The overlays that run a study on GPUs (the ReFocus study and the recipes): none may inherit a choice the embedded
# default makes for the tiny model. Beyond NEUTRAL, what one of them may leave as it is, and why.
STUDY_OVERLAYS = {
    "gpu.yaml": {},
    "deepeyes.yaml": {},
    "geoqa_mc.yaml": {"judge.": "no reward or scorer of the recipe calls a judge"},
    "geoqa_r1v.yaml": {"judge.": "no reward or scorer of the recipe calls a judge"},
}


@pytest.mark.parametrize("overlay_name", sorted(STUDY_OVERLAYS))
def test_nothing_the_embedded_default_sets_leaks_into_a_study_overlay(overlay_name):
    path = REPO / "config" / overlay_name
    default = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    overlay = set(_leaves(yaml.safe_load(path.read_text())))
    neutral = {**NEUTRAL, **STUDY_OVERLAYS[overlay_name]}
    leaked = [
        key
        for key in _leaves(default)
        if key not in overlay and not any(key == n or (n.endswith(".") and key.startswith(n)) for n in neutral)
    ]
    assert leaked == [], f"config/{overlay_name} inherits the embedded default's {leaked}: set them in {overlay_name}"
    # the neutral ones are neutral for the reason given
    config = load_config([path], root=REPO)
    assert config.model.path is not None and not config.extra_datasets
    assert {"h1", "h2"}.isdisjoint(config.series)
    if {"e4", "e8", "e9"} & set(config.series):  # the study names its own evaluation points
        assert all(f"series.{sid}.checkpoint" in overlay for sid in ("e4", "e8", "e9")), overlay_name
    for sid in {"e6", "e7", "e10", "e11", "e12"} & set(config.series):  # and its own length budget
        assert f"series.{sid}.reward.length_budget" in overlay, (overlay_name, sid)
    if "judge." not in STUDY_OVERLAYS[overlay_name]:  # the judge's error rates are neutral: its judges are LLMs
        assert all(j.backend == "openai" for j in _judges_used(config)), overlay_name
    assert {"synthchart", "chartqa_sample"}.isdisjoint(config.needed_splits())
    if "judge." in STUDY_OVERLAYS[overlay_name]:
        from chartrl.verl_backend.overrides import uses_judge

        assert not any(uses_judge(s) for s in config.train_series)
        assert not any({"judge", "panel"} & set(s.scorers) for s in config.eval_series)


def test_the_study_states_its_hypotheses_and_a_recipe_shows_none(gpu):
    """gpu.yaml carries the study's hypotheses, one or more per generation, over its own series; a recipe overlay,
    whose run_series leaves the study's series out, shows none (the default's go with the series they name)."""
    assert {h.generation for h in gpu.hypotheses} == {"v1", "v2", "v3"}
    assert all(sid in gpu.series for h in gpu.hypotheses for sid in h.series)
    for name in ("deepeyes.yaml", "geoqa_mc.yaml", "geoqa_r1v.yaml"):
        assert load_config([REPO / "config" / name], root=REPO).hypotheses == (), name


def _judges_used(config):
    """The judge settings an overlay's rewards and scorers use: the single judge, and the panel's members when a
    reward or a scorer asks the panel."""
    from chartrl.rewards.registry import accuracy_signal

    signals = {accuracy_signal(s.reward.name, s.reward.params) for s in config.train_series}
    signals |= {scorer for s in config.eval_series for scorer in s.scorers}
    judges = [config.judge_of(s.id) for s in config.series.values() if s.kind == "train"]
    if "panel" in signals:
        judges += [config.judge.member(m) for m in config.judge.panel.members]
    return judges


def test_the_gpu_config_evaluates_every_test_question(gpu):
    assert gpu.evaluate.limit is None and gpu.evaluate.split == "test"


def test_the_study_offers_the_six_refocus_tools_with_the_full_prompt_on_boxed_chartqa(gpu):
    assert list(gpu.tools.names) == SIX_TOOLS and len(SIX_TOOLS) == 6
    assert gpu.prompts.tool_template == "tool_use" and gpu.prompts.list_labels
    chartqa = gpu.datasets["chartqa"]
    assert chartqa.source == "chartqa_original" and chartqa.options["annotations"]
    assert list(chartqa.options["require_boxes"]) == ["train", "val"]
    assert tool_data_problems(gpu) == []


def test_the_recipe_follows_the_seeds(gpu):
    train, verl = gpu.train, gpu.verl
    assert (train.lr, train.kl_coef, train.clip_low, train.clip_high) == (1e-6, 0.01, 0.2, 0.3)
    assert (train.prompts_per_step, gpu.rollout.n, verl.ppo_mini_batch_size) == (512, 5, 128)
    assert (train.val_every, train.checkpoint_every, train.keep_last) == (5, 5, 3)
    assert (gpu.model.path, gpu.model.max_pixels, verl.n_gpus) == ("Qwen/Qwen2.5-VL-3B-Instruct", 4194304, 8)
    assert not train.lora.enabled


def test_the_optimiser_and_the_image_floor_are_easyr1s(gpu):
    """EasyR1's AdamW (``OptimConfig``: weight decay 1e-2, betas (0.9, 0.999)) and its data.min_pixels 262144,
    not the tiny model's choices (no decay, betas (0.9, 0.98), the processor's floor)."""
    assert (gpu.train.weight_decay, tuple(gpu.verl.adam_betas)) == (0.01, (0.9, 0.999))
    assert gpu.model.min_pixels == 262144
    assert not gpu.train.exclude_degenerate  # EasyR1 keeps groups whose rewards are all equal, as verl must


def test_eval_series_name_the_studys_steps_and_the_train_series_keep_them(gpu):
    named = {s.id: (s.of, s.checkpoint) for s in gpu.eval_series}
    assert named == {
        "e4": ("e1", 65),
        "e5": ("e2", 215),
        "e8": ("e6", 80),
        "e9": ("e6", 80),
        "e13": ("e10", 215),
        "e14": ("e10", 215),
    }
    assert {sid: gpu.keep_steps(sid) for sid in ("e1", "e2", "e6", "e10", "e3")} == {
        "e1": (65,),
        "e2": (215,),
        "e6": (80,),
        "e10": (215,),
        "e3": (),
    }
    assert all(gpu.train.saves(step) for _, step in named.values())


def _check(*overlays, tmp_path, changes):
    data = yaml.safe_load(GPU.read_text())
    for path, value in changes.items():
        node = data
        *parents, last = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    changed = tmp_path / "gpu_changed.yaml"
    changed.write_text(yaml.safe_dump(data))
    return subprocess.run(
        [sys.executable, "-m", "chartrl", "config", "check", "--root", str(REPO), "--configfile", str(changed)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )


@pytest.mark.slow
def test_config_check_passes_the_gpu_config(tmp_path):
    result = _check(tmp_path=tmp_path, changes={})
    assert result.returncode == 0, result.stderr
    run_series = yaml.safe_load((REPO / "config" / "gpu.yaml").read_text())["run_series"]
    assert f"config OK: {len(run_series)} series" in result.stdout


@pytest.mark.slow
def test_the_hub_layout_without_boxes_is_refused_naming_the_dataset_and_the_tools(tmp_path):
    hub = {
        "source": "chartqa_hf",
        "path": "HuggingFaceM4/ChartQA",
        "splits": {"train": "train", "val": "val", "test": "test"},
    }
    result = _check(tmp_path=tmp_path, changes={"datasets.chartqa": hub})
    assert result.returncode == 2
    assert "dataset 'chartqa' (source chartqa_hf)" in result.stderr
    assert "tool series e1, e2, e6, e10, e12" in result.stderr and "focus_on_y_values_with_draw" in result.stderr
    assert "chartqa_original" in result.stderr  # the fix


@pytest.mark.slow
def test_a_step_no_checkpoint_is_written_at_is_refused(tmp_path):
    result = _check(tmp_path=tmp_path, changes={"series.e4": {"checkpoint": 66}, "series.e5": {"checkpoint": 300}})
    assert result.returncode == 2
    assert "'series.e4.checkpoint': step 66 of train series e1 is never saved" in result.stderr
    assert "name step 65 or 70" in result.stderr
    assert "'series.e5.checkpoint': step 300 of train series e2" in result.stderr and "train.steps" in result.stderr


@pytest.mark.slow
def test_a_gpu_count_that_does_not_divide_the_batch_is_refused(tmp_path):
    result = _check(tmp_path=tmp_path, changes={"verl.n_gpus_per_node": 7})
    assert result.returncode == 2 and "do not split evenly over 7 GPUs" in result.stderr


@pytest.mark.slow
def test_snakemake_refuses_a_study_without_boxes_before_anything_runs(tmp_path):
    data = yaml.safe_load(GPU.read_text())
    data["datasets"]["chartqa"] = {
        "source": "chartqa_hf",
        "path": "HuggingFaceM4/ChartQA",
        "splits": {"train": "train", "val": "val", "test": "test"},
    }
    overlay = tmp_path / "hub.yaml"
    overlay.write_text(yaml.safe_dump(data))
    result = snakemake(tmp_path, "-n", "--configfile", str(overlay), check=False)
    assert result.returncode != 0 and "every call would fail (no_boxes)" in result.stdout + result.stderr
    assert not (tmp_path / "results").exists()


def test_the_rehearsal_changes_only_what_a_cpu_cannot_run(gpu):
    rehearsal = load_config([GPU, REHEARSAL], root=REPO)
    assert rehearsal.backend == "local" and rehearsal.model.path is None  # what a CPU can run
    assert rehearsal.tools == gpu.tools and rehearsal.prompts == gpu.prompts  # what the study offers
    for sid, series in gpu.series.items():  # the same series, rewards and algorithms; eval steps scaled
        other = rehearsal.series[sid]
        if series.kind == "train":
            assert other == series
        else:
            assert (other.of, other.scorers, type(other.checkpoint)) == (series.of, series.scorers, int)
            assert rehearsal.train.saves(other.checkpoint) and other.checkpoint <= rehearsal.train.steps
    data, study = rehearsal.datasets["chartqa"], gpu.datasets["chartqa"]
    assert (data.source, data.options["require_boxes"]) == (study.source, study.options["require_boxes"])
    assert (rehearsal.train.clip_low, rehearsal.train.clip_high, rehearsal.train.kl_coef) == (0.2, 0.3, 0.01)
    # e4 and e8 name steps keep_last alone would prune: the kept-step path of gpu.yaml's 65 and 80 is exercised
    steps, keep = rehearsal.train.steps, rehearsal.train.keep_last
    assert rehearsal.keep_steps("e1")[0] <= steps - keep and rehearsal.keep_steps("e6")[0] <= steps - keep


ON_TOP_OF = {"rehearsal.yaml": GPU, "gpu_smoke.yaml": GPU, "geoqa_r1v_lora.yaml": REPO / "config" / "geoqa_r1v.yaml"}
"""Overlays written to go on top of another one."""


def test_every_file_under_config_is_valid_on_its_own_or_on_the_overlay_it_extends():
    for path in sorted((REPO / "config").glob("*.yaml")):
        if path.name in ("config.yaml", "series.yaml"):
            continue
        overlays = [ON_TOP_OF[path.name], path] if path.name in ON_TOP_OF else [path]
        recipe = REPO / "config" / path.name.replace("_cpu.yaml", ".yaml")
        if path.name.endswith("_cpu.yaml") and recipe.exists():  # a recipe's CPU variant, on its recipe and smoke
            overlays = [recipe, REPO / "config" / "smoke.yaml", path]
        load_config(overlays, root=REPO)


def test_a_missing_overlay_is_named():
    with pytest.raises(ConfigError, match="does not exist"):
        read_config_files([REPO / "config" / "nope.yaml"])
